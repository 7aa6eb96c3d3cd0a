// torchtune's activation offloading, `with OffloadActivations(): logits = model(...)`
// (torchtune/training/_activation_offloading.py; TRL's trl/models/activation_offloading.py is a copy)
// around the forward and the loss (Note [Activation offloading] in docs/op-rules.md). Its pack hook
// sees what save_on_cpu's sees, but takes only the tensors of at least min_offload_size bytes on
// the accelerator that are no nn.Parameter or Buffer themselves, into torch.empty_like(t,
// device="cpu", pin_memory=...) (the source's strides). With use_streams (CUDA only):
// - forward: the copy runs on a side stream, so the device tensor stays in `fwd_stash` until the
//   pack of an offloaded tensor whose id (every tensor the hook sees takes one) is at least
//   max_fwd_stash_size past its own;
// - backward: a tensor still in the stash is unpacked as it is; any other is copied back (on the
//   side stream) and kept in `bwd_tensor_stash` until the post hook of the next node that unpacks
//   an offloaded tensor has run (that hook also empties the forward stash), the rest at the end of
//   backward.
// Without streams the unpack hook copies it back as the node runs (the engine's UnpackSaved).
#include <algorithm>
#include <deque>
#include <sstream>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"
#include "lib/util/option_check.h"

namespace memsim {
namespace {

class OffloadActivationsSetup : public TrainingSetup {
 public:
  OffloadActivationsSetup(const OffloadActivations& options, const Profile& profile)
      : options_(options), streams_(profile.cuda && options.streams) {
    using Pack = ForwardOpPolicy::Pack;
    // On the CPU (the traces, with the accelerator made to name the CPU) the copy is a new CPU
    // tensor, and .to("cpu") unpacks it as it is.
    pack_ = !profile.cuda ? Pack::kCopy : options.pin_memory ? Pack::kHostPinned : Pack::kHost;
    filter_.min_bytes = options.min_bytes;
    filter_.skip_parameters = true;
    filter_.keeps_strides = true;
    if (streams_) filter_.on_pack = [this](uint32_t saved, uint32_t packed) { OnPack(saved, packed); };
  }

  void BeforeForwardOp(StepState& s, OpId, ForwardOpPolicy* policy) override {
    state_ = &s;
    policy->pack = pack_;
    policy->pack_filter = &filter_;
  }

  void BeforeBackwardNode(StepState& s, OpId o) override {
    if (!streams_) return;
    Node& node = s.nodes[o];
    bool offloaded = false;
    std::vector<StorageId> brought;
    for (size_t k = 0; k < node.saved.size(); ++k) {
      if (node.released[k]) continue;
      auto stashed = std::find_if(fwd_stash_.begin(), fwd_stash_.end(),
                                  [&](const Stashed& e) { return e.packed == node.saved[k]; });
      if (stashed != fwd_stash_.end()) {  // unpacked as it is; the host copy leaves the tracker
        s.ledger.Ref(stashed->saved);
        s.ledger.Unref(node.saved[k]);
        node.saved[k] = stashed->saved;
        offloaded = true;
        continue;
      }
      const int64_t host = s.ledger.host_bytes(node.saved[k]);
      if (host == 0) continue;
      const Op& op = s.g.ops[o];
      StorageId device = s.ledger.AllocJoined(host, {op.name, ":saved (unpacked)"}, Category::kActivation, op.module);
      s.ledger.Ref(device);  // bwd_tensor_stash
      brought.push_back(device);
      s.ledger.Unref(node.saved[k]);
      node.saved[k] = device;
      offloaded = true;
    }
    if (!offloaded) return;
    // The first unpack on a new node marks the earlier nodes' tensors to go in its post hook.
    release_after_node_ = std::move(bwd_stash_);
    bwd_stash_ = std::move(brought);
    hooked_node_ = o;
  }

  void AfterBackwardNode(StepState& s, OpId o) override {
    if (!streams_ || o != hooked_node_) return;
    hooked_node_ = kNone;
    for (const Stashed& e : fwd_stash_) s.ledger.Unref(e.saved);
    fwd_stash_.clear();
    for (StorageId st : release_after_node_) s.ledger.Unref(st);
    release_after_node_.clear();
  }

  /// wait_and_del_remaining_references, queued to run as the backward ends.
  void AfterBackwardPass(StepState& s) override {
    for (const Stashed& e : fwd_stash_) s.ledger.Unref(e.saved);
    for (StorageId st : bwd_stash_) s.ledger.Unref(st);
    fwd_stash_.clear();
    bwd_stash_.clear();
    tensor_id_ = 0;
  }

 private:
  struct Stashed {
    int64_t id;
    StorageId saved, packed;
  };

  /// pack_tensor with streams: every tensor seen takes an id; before an offload, the stashed
  /// device tensors at least max_fwd_stash_size ids older are let go, oldest first.
  void OnPack(StorageId saved, StorageId packed) {
    ++tensor_id_;
    if (packed == kNoStorage) return;
    while (!fwd_stash_.empty() && fwd_stash_.front().id <= tensor_id_ - options_.max_fwd_stash) {
      state_->ledger.Unref(fwd_stash_.front().saved);
      fwd_stash_.pop_front();
    }
    state_->ledger.Ref(saved);
    fwd_stash_.push_back({tensor_id_, saved, packed});
  }

  OffloadActivations options_;
  bool streams_;
  ForwardOpPolicy::Pack pack_;
  ForwardOpPolicy::PackFilter filter_;
  StepState* state_ = nullptr;
  int64_t tensor_id_ = 0;
  std::deque<Stashed> fwd_stash_;
  std::vector<StorageId> bwd_stash_, release_after_node_;
  OpId hooked_node_ = kNone;
};

}  // namespace

Result<OffloadActivations> ParseOffloadActivations(const std::string& spec) {
  OffloadActivations o;
  if (spec == "on") return o;
  auto error = [&](const std::string& why) {
    return Status::InvalidArgument("--offload-activations \"" + spec + "\": " + why +
                                   " (expected on or min_size=BYTES,streams=on|off,pin=on|off,stash=K)");
  };
  std::stringstream in(spec);
  for (std::string kv; std::getline(in, kv, ',');) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return error("\"" + kv + "\" has no key");
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "min_size") {
      MEMSIM_ASSIGN_OR_RETURN(o.min_bytes, ParseBytesOption("--offload-activations min_size", value, int64_t{1} << 50));
    } else if (key == "stash") {
      MEMSIM_ASSIGN_OR_RETURN(int64_t k, ParseIntOption("--offload-activations stash", value, 1, kMaxOptionCount));
      o.max_fwd_stash = static_cast<int>(k);
    } else if (key == "streams" || key == "pin") {
      if (value != "on" && value != "off") return error(key + " is on or off");
      (key == "streams" ? o.streams : o.pin_memory) = value == "on";
    } else {
      return error("unknown key \"" + key + "\"");
    }
  }
  return o;
}

std::unique_ptr<TrainingSetup> MakeOffloadActivations(const OffloadActivations& options, const Profile& profile) {
  return std::make_unique<OffloadActivationsSetup>(options, profile);
}

}  // namespace memsim
