// The optimizer step fused into backward (torchtune's `optimizer_in_bwd`, PyTorch's tutorial
// "How to save memory by fusing the optimizer step into the backward pass"): one optimizer per
// parameter, stepped by a post-accumulate-grad hook that then sets that grad to None, so no
// gradient outlives its own parameter's update (Note [Optimizer in backward] in
// docs/op-rules.md). The step's own optimizer phase then finds no gradient and does nothing.
#include "lib/autodiff/optimizer.h"
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class OptimizerInBackward : public TrainingSetup {
 public:
  // p.register_post_accumulate_grad_hook(lambda p: (optim_dict[p].step(), optim_dict[p].zero_grad())):
  // AccumulateGrad has just finished |k|; its optimizer holds it alone (a one-tensor list, so
  // foreach temporaries are this parameter's only).
  void OnGradReady(StepState& s, uint32_t k) override {
    StorageId& grad = s.param_grad[k];
    if (grad == kNoStorage) return;
    // The one-parameter list (no setup reshapes it: the data-parallel setups are refused).
    RunOptimizerStep(s.cfg.optimizer, s.profile, s.first_step, {s.OptParamOf(k)}, &s.ledger, &s.states);
    s.ledger.Unref(grad);  // zero_grad(set_to_none=True)
    grad = kNoStorage;
  }
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeOptimizerInBackward() { return std::make_unique<OptimizerInBackward>(); }

}  // namespace memsim
