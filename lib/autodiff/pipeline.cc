// The pipeline schedule interpreter (Note [Pipeline parallel] in docs/parallel.md): the schedules
// of torch/distributed/pipelining/schedules.py transcribed statement by statement (RunSchedule),
// and the runtime that runs them on the step engine, one autograd graph per microbatch in flight.
#include "lib/autodiff/pipeline.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "lib/autodiff/state.h"

namespace memsim {

std::optional<PpSchedule> ParsePpSchedule(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "gpipe") return PpSchedule::kGPipe;
  if (n == "1f1b") return PpSchedule::k1F1B;
  return std::nullopt;
}

std::string_view PpScheduleName(PpSchedule s) { return s == PpSchedule::kGPipe ? "gpipe" : "1f1b"; }

namespace {

/// ScheduleGPipe._step_microbatches: every forward, each send's Work kept in fwd_sends_to_wait,
/// then every backward, each grad send's Work in bwd_sends_to_wait; both lists live until return.
void RunGPipe(int stages, int stage, int m, PpRuntime* rt) {
  const bool first = stage == 0, last = stage == stages - 1;
  for (int i = 0; i < m; ++i) {
    rt->Forward(i);
    if (!last) rt->Append(PpRuntime::kFwdSendsToWait, {false, i});
  }
  for (int i = 0; i < m; ++i) {
    rt->Backward(i);
    if (!first) rt->Append(PpRuntime::kBwdSendsToWait, {true, i});
  }
}

/// Schedule1F1B._step_microbatches: min(M, stages - stage) warmup forwards (the last one's send
/// left in fwd_sends for the first 1B), then 1B1F, then the cooldown backwards.
void Run1F1B(int stages, int stage, int m, PpRuntime* rt) {
  const bool first = stage == 0, last = stage == stages - 1;
  auto act = [&](int i) { return last ? std::vector<PpSend>{} : std::vector<PpSend>{{false, i}}; };
  auto grad = [&](int i) { return first ? std::vector<PpSend>{} : std::vector<PpSend>{{true, i}}; };
  const int warmup = std::min(m, stages - stage);
  int f = 0, b = 0;
  for (int k = 0; k < warmup; ++k, ++f) {
    rt->Forward(f);
    rt->Bind(PpRuntime::kFwdSends, act(f));                      // fwd_sends = get_fwd_send_ops(f)
    if (f != warmup - 1) rt->Bind(PpRuntime::kSendWork, act(f));  // send_work = _batch_p2p(fwd_sends)
  }
  while (true) {
    rt->Backward(b);
    rt->Bind(PpRuntime::kBwdSends, grad(b));  // bwd_sends = get_bwd_send_ops(b)
    ++b;
    if (f == m) break;
    rt->Forward(f);
    rt->Bind(PpRuntime::kFwdSends, act(f));
    ++f;
  }
  rt->Bind(PpRuntime::kSendWork, grad(b - 1));  // send_work = _batch_p2p(bwd_sends)
  for (; b < m; ++b) {
    rt->Backward(b);
    rt->Bind(PpRuntime::kBwdSends, grad(b));
    rt->Bind(PpRuntime::kSendWork, grad(b));
  }
}

}  // namespace

void RunSchedule(PpSchedule schedule, int stages, int stage, int microbatches, PpRuntime* rt) {
  if (schedule == PpSchedule::kGPipe) RunGPipe(stages, stage, microbatches, rt);
  else Run1F1B(stages, stage, microbatches, rt);
  for (int n = 0; n < PpRuntime::kNames; ++n) rt->Bind(static_cast<PpRuntime::Name>(n), {});  // return
}

std::string ScheduleOrder(PpSchedule schedule, int stages, int stage, int microbatches) {
  struct Recorder : PpRuntime {
    std::string order;
    void Forward(int mb) override { order += (order.empty() ? "F" : " F") + std::to_string(mb); }
    void Backward(int mb) override { order += (order.empty() ? "B" : " B") + std::to_string(mb); }
    void Bind(Name, std::vector<PpSend>) override {}
    void Append(Name, PpSend) override {}
  } rec;
  RunSchedule(schedule, stages, stage, microbatches, &rec);
  return rec.order;
}

namespace {

/// The schedule on the engine: each microbatch's activations and autograd nodes live in a
/// context of their own, swapped into the StepState while its forward or backward runs.
class EngineRuntime : public PpRuntime {
 public:
  explicit EngineRuntime(StepState& s) : s_(s), p_(*s.cfg.pipeline) {
    for (TensorId t = 0; t < s.g.tensors.size(); ++t)
      if (s.g.tensors[t].role == TensorRole::kActivation) activations_.push_back(t);
    contexts_.resize(p_.microbatches);
    for (Context& c : contexts_) {
      c.storage.assign(s.g.tensors.size(), kNoStorage);
      c.nodes.assign(s.g.ops.size(), Node{});
    }
    outputs_.assign(p_.microbatches, kNoStorage);
    input_grads_.assign(p_.microbatches, kNoStorage);
    losses_.assign(p_.microbatches, kNoStorage);
    popped_.assign(p_.microbatches, false);
  }

  void Forward(int mb) override {
    s_.SetPhase(Phase::kForward);
    s_.ledger.MarkAction("F" + std::to_string(mb));
    Swap(mb);
    if (p_.recv != kNone) {  // _retrieve_recv_activations: the recv buffer, a leaf requiring grad
      s_.storage[p_.recv] = s_.pp_recv_act[mb];
      s_.ledger.Ref(s_.storage[p_.recv]);
    }
    for (OpId o = p_.begin; o < p_.end; ++o) RunForwardOp(s_, o);
    s_.ledger.set_op(kNoOp);
    // The stage module's forward returns: its locals die; the output stays in fwd_cache.
    if (!p_.last()) {
      std::vector<TensorId> locals;
      for (TensorId t : activations_) {
        const OpId producer = s_.g.tensors[t].producer, last = s_.bound.last_use[t];
        if (!s_.held[t] && producer >= p_.begin && producer < p_.end && last != kNone && last >= p_.end)
          locals.push_back(t);
      }
      DropNames(s_, locals);
      outputs_[mb] = s_.storage[p_.send];
    } else if (s_.g.loss != kNone && s_.storage[s_.g.loss] != kNoStorage) {
      losses_[mb] = s_.storage[s_.g.loss];  // _internal_losses
      s_.ledger.Ref(losses_[mb]);
    }
    s_.Hook(&TrainingSetup::AfterForwardPass);
    Swap(mb);
  }

  void Backward(int mb) override {
    s_.SetPhase(Phase::kBackward);
    s_.ledger.MarkAction("B" + std::to_string(mb));
    Swap(mb);
    s_.param_buffer.assign(s_.param_buffer.size(), Grad{});
    s_.param_deps.assign(s_.param_deps.size(), 0);
    if (!p_.last()) {  // stage_backward(stage_output, output_grads=the grad recv buffer)
      s_.backward_root = p_.send;
      s_.backward_seed = s_.pp_recv_grad[mb];
    }
    RunBackwardPass(s_);
    s_.backward_root = kNone;
    s_.backward_seed = kNoStorage;
    if (!p_.last() && s_.storage[p_.send] != kNoStorage) {  // fwd_cache popped: stage_output dies
      s_.ledger.Unref(s_.storage[p_.send]);
      s_.storage[p_.send] = kNoStorage;
    }
    if (p_.recv != kNone) {  // val.grad = None: the input grad goes to bwd_cache
      StorageId& g = s_.param_grad[s_.param_index[p_.recv]];
      input_grads_[mb] = g;
      g = kNoStorage;
      s_.storage[p_.recv] = kNoStorage;
    }
    Swap(mb);
  }

  void Bind(Name name, std::vector<PpSend> sends) override {
    for (const PpSend& x : sends) s_.ledger.Ref(Storage(x));
    for (const PpSend& x : names_[name]) s_.ledger.Unref(Storage(x));
    names_[name] = std::move(sends);
    Pop(names_[name]);
  }

  void Append(Name name, PpSend send) override {
    s_.ledger.Ref(Storage(send));
    names_[name].push_back(send);
    Pop({send});
  }

  /// After the schedule: _update_losses drops the losses; a grad no send took leaves bwd_cache.
  void Finish() {
    for (StorageId& l : losses_)
      if (l != kNoStorage) s_.ledger.Unref(std::exchange(l, kNoStorage));
    for (int mb = 0; mb < p_.microbatches; ++mb)
      if (input_grads_[mb] != kNoStorage && !popped_[mb]) s_.ledger.Unref(input_grads_[mb]);
  }

 private:
  struct Context {
    std::vector<StorageId> storage;
    std::vector<Node> nodes;
  };

  void Swap(int mb) {
    Context& c = contexts_[mb];
    for (TensorId t : activations_) std::swap(s_.storage[t], c.storage[t]);
    std::swap(s_.nodes, c.nodes);
  }

  /// The storage a send holds (detach() of the output shares its storage).
  StorageId Storage(const PpSend& x) const { return x.grad ? input_grads_[x.mb] : outputs_[x.mb]; }

  /// get_bwd_send_ops pops bwd_cache: once a name holds a grad, bwd_cache's reference goes.
  void Pop(const std::vector<PpSend>& sends) {
    for (const PpSend& x : sends)
      if (x.grad && !popped_[x.mb]) {
        popped_[x.mb] = true;
        s_.ledger.Unref(input_grads_[x.mb]);
      }
  }

  StepState& s_;
  const PipelineStagePlan& p_;
  std::vector<TensorId> activations_;
  std::vector<Context> contexts_;
  std::vector<StorageId> outputs_, input_grads_, losses_;
  std::vector<bool> popped_;
  std::vector<PpSend> names_[kNames];
};

}  // namespace

void RunPipelinePasses(StepState& s) {
  const PipelineStagePlan& p = *s.cfg.pipeline;
  s.SetPhase(Phase::kForward);
  // _prepare_forward_infra / _prepare_backward_infra on the first step(): one recv buffer per
  // microbatch for the activation (not on the first stage), then one per microbatch for its
  // grad (not on the last), kept by the stage from then on.
  if (s.pp_recv_act.empty() && s.pp_recv_grad.empty()) AllocatePipelineBuffers(s);
  EngineRuntime rt(s);
  RunSchedule(p.schedule, p.stages, p.stage, p.microbatches, &rt);
  rt.Finish();
  s.ledger.set_op(kNoOp);
}

void AllocatePipelineBuffers(StepState& s) {
  const PipelineStagePlan& p = *s.cfg.pipeline;
  if (p.recv != kNone)
    for (int mb = 0; mb < p.microbatches; ++mb)
      s.pp_recv_act.push_back(s.ledger.Alloc(s.bound.metas[p.recv].bytes(), "recv_for_" + std::to_string(p.stage) +
                                             "_from_" + std::to_string(p.stage - 1), Category::kActivation));
  if (p.send != kNone)
    for (int mb = 0; mb < p.microbatches; ++mb)
      s.pp_recv_grad.push_back(s.ledger.Alloc(s.bound.metas[p.send].bytes(), "recv_grad_for_" + std::to_string(p.stage) +
                                              "_from_" + std::to_string(p.stage + 1), Category::kGradient));
}

}  // namespace memsim
