// Activation offloading with torch.autograd.graph.save_on_cpu(pin_memory=...) around the forward
// and the loss (Note [Activation offloading] in docs/op-rules.md): every tensor an autograd node
// saves outside a checkpointed region (whose own hooks are innermost) goes through its pack hook.
// On a GPU it moves to host memory and comes back when its node runs; on the CPU `tensor.cpu()`
// is the tensor itself, and pin_memory=True packs it into a new CPU tensor.
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class SaveOnCpu : public TrainingSetup {
 public:
  SaveOnCpu(bool pin_memory, const Profile& profile) {
    using Pack = ForwardOpPolicy::Pack;
    if (profile.cuda) pack_ = pin_memory ? Pack::kHostPinned : Pack::kHost;
    else pack_ = pin_memory ? Pack::kCopy : Pack::kNone;
  }

  void BeforeForwardOp(StepState&, OpId, ForwardOpPolicy* policy) override { policy->pack = pack_; }

 private:
  ForwardOpPolicy::Pack pack_;
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeSaveOnCpu(bool pin_memory, const Profile& profile) {
  return std::make_unique<SaveOnCpu>(pin_memory, profile);
}

}  // namespace memsim
