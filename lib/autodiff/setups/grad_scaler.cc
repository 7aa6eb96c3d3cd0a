// torch.amp.GradScaler (Note [GradScaler] in docs/op-rules.md), as PyTorch 2.x allocates:
//   scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()
// scale(): at the first call, the fp32 scale and the int32 growth tracker (0-dim, kept for the
// run); `loss * scale`, the scaled loss that backward starts from. step(): unscale_ takes the
// reciprocal of the scale in fp64 (`_scale.double().reciprocal().float()`), makes a 0-dim fp32
// found_inf, and unscales the grads in place (_amp_foreach_non_finite_check_and_unscale_);
// inv_scale dies as unscale_ returns, found_inf when update() resets the optimizer's state.
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class GradScaler : public TrainingSetup {
 public:
  /// Not the first step: the scale and growth tracker of earlier steps are resident.
  void OnSetup(StepState& s) override {
    if (!s.cfg.first_step) CreateScale(s);
  }

  /// scaler.scale(loss), after the autocast region: the scaled loss and the grad seed that
  /// backward starts from (MulBackward0 then hands the loss its grad, as without a scaler).
  void AfterForwardPass(StepState& s) override {
    if (s.g.loss == kNone) return;
    if (scale_ == kNoStorage) CreateScale(s);
    scaled_loss_ = s.ledger.Alloc(4, "GradScaler: scaled loss", Category::kActivation);
    seed_ = s.ledger.Alloc(4, "GradScaler: scaled loss grad (seed)", Category::kGradient);
  }

  void AfterBackwardPass(StepState& s) override {
    if (seed_ != kNoStorage) s.ledger.Unref(seed_);
    if (scaled_loss_ != kNoStorage) s.ledger.Unref(scaled_loss_);
    seed_ = scaled_loss_ = kNoStorage;
  }

  /// scaler.step(optimizer) → unscale_(optimizer), before optimizer.step().
  void BeforeOptimizerStep(StepState& s) override {
    StorageId dbl = s.ledger.Alloc(8, "GradScaler: scale.double()", Category::kTemporary);
    StorageId rec = s.ledger.Alloc(8, "GradScaler: reciprocal", Category::kTemporary);
    s.ledger.Unref(dbl);
    StorageId inv = s.ledger.Alloc(4, "GradScaler: inv_scale", Category::kTemporary);
    s.ledger.Unref(rec);
    found_inf_ = s.ledger.Alloc(4, "GradScaler: found_inf", Category::kTemporary);
    // _amp_foreach_non_finite_check_and_unscale_ works in place on the grads.
    s.ledger.Unref(inv);
  }

  /// scaler.update(): _amp_update_scale_ in place; the per-optimizer state (found_inf) is reset.
  void AfterOptimizerStep(StepState& s) override {
    if (found_inf_ != kNoStorage) s.ledger.Unref(found_inf_);
    found_inf_ = kNoStorage;
  }

 private:
  void CreateScale(StepState& s) {
    scale_ = s.ledger.Alloc(4, "GradScaler: scale", Category::kOptimizerState);
    tracker_ = s.ledger.Alloc(4, "GradScaler: growth tracker", Category::kOptimizerState);
  }

  StorageId scale_ = kNoStorage, tracker_ = kNoStorage;
  StorageId scaled_loss_ = kNoStorage, seed_ = kNoStorage, found_inf_ = kNoStorage;
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeGradScaler() { return std::make_unique<GradScaler>(); }

}  // namespace memsim
