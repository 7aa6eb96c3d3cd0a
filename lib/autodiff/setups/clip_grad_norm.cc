// Gradient clipping: torch.nn.utils.clip_grad_norm_(params, max_norm) at the start of the step
// phase (Note [clip_grad_norm_] in docs/op-rules.md). What it allocates:
//   per-tensor path (1.13):
//     norms = [torch.norm(g) for g in grads]     one 0-dim tensor per grad
//     total = torch.norm(torch.stack(norms))     the stacked [n] vector, then the 0-dim total;
//                                                the norms die with the list, the stack after norm
//   foreach path (2.x): norms = torch._foreach_norm(grads), then the same stack and total.
//   clip_coef = max_norm / (total + 1e-6); clamped = clamp(clip_coef, max=1.0); each grad mul_
//   in place by clamped; the scalars die when the function returns (total is returned and
//   dropped by the caller). Python-number wrapper tensors (8 B) are not modelled.
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class ClipGradNorm : public TrainingSetup {
 public:
  void BeforeOptimizerStep(StepState& s) override {
    std::vector<StorageId> grads;
    for (StorageId g : s.param_grad)
      if (g != kNoStorage) grads.push_back(g);
    if (grads.empty()) return;
    // Norms have the grads' dtype; memsim's grads are the parameters' (fp32: 4 B).
    const int64_t scalar = 4;
    std::vector<StorageId> norms;
    for (size_t i = 0; i < grads.size(); ++i)
      norms.push_back(s.ledger.Alloc(scalar, "clip_grad_norm_: norm", Category::kTemporary));
    StorageId stacked = s.ledger.Alloc(scalar * static_cast<int64_t>(norms.size()), "clip_grad_norm_: stack",
                                       Category::kTemporary);
    for (StorageId n : norms) s.ledger.Unref(n);
    StorageId total = s.ledger.Alloc(scalar, "clip_grad_norm_: total_norm", Category::kTemporary);
    s.ledger.Unref(stacked);
    StorageId shifted = s.ledger.Alloc(scalar, "clip_grad_norm_: total_norm + 1e-6", Category::kTemporary);
    StorageId coef = s.ledger.Alloc(scalar, "clip_grad_norm_: clip_coef", Category::kTemporary);
    s.ledger.Unref(shifted);
    StorageId clamped = s.ledger.Alloc(scalar, "clip_grad_norm_: clip_coef_clamped", Category::kTemporary);
    s.ledger.Unref(clamped);
    s.ledger.Unref(coef);
    s.ledger.Unref(total);
  }
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeClipGradNorm(const Profile&) { return std::make_unique<ClipGradNorm>(); }

}  // namespace memsim
