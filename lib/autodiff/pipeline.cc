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
  if (n == "interleaved1f1b") return PpSchedule::kInterleaved1F1B;
  return std::nullopt;
}

std::string_view PpScheduleName(PpSchedule s) {
  static const char* const kNames[] = {"gpipe", "1f1b", "interleaved1f1b", "interleavedzerobubble", "zbvzerobubble"};
  return kNames[static_cast<int>(s)];
}

std::optional<PpMulti> MultiStage(PpSchedule s) {
  switch (s) {
    case PpSchedule::kInterleaved1F1B: return PpMulti::kInterleaved1F1B;
    case PpSchedule::kInterleavedZeroBubble: return PpMulti::kInterleavedZeroBubble;
    case PpSchedule::kZBVZeroBubble: return PpMulti::kZBVZeroBubble;
    default: return std::nullopt;
  }
}

namespace {

/// ScheduleGPipe._step_microbatches: every forward, each send's Work kept in fwd_sends_to_wait,
/// then every backward, each grad send's Work in bwd_sends_to_wait; both lists live until return.
void RunGPipe(int stages, int stage, int m, PpRuntime* rt) {
  const bool first = stage == 0, last = stage == stages - 1;
  for (int i = 0; i < m; ++i) {
    rt->Forward(0, i, "F" + std::to_string(i));
    if (!last) rt->Append(PpRuntime::kFwdSendsToWait, {false, i});
  }
  for (int i = 0; i < m; ++i) {
    rt->Backward(0, i, "B" + std::to_string(i));
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
  auto forward = [&](int i) { rt->Forward(0, i, "F" + std::to_string(i)); };
  auto backward = [&](int i) { rt->Backward(0, i, "B" + std::to_string(i)); };
  int f = 0, b = 0;
  for (int k = 0; k < warmup; ++k, ++f) {
    forward(f);
    rt->Bind(PpRuntime::kFwdSends, act(f));                      // fwd_sends = get_fwd_send_ops(f)
    if (f != warmup - 1) rt->Bind(PpRuntime::kSendWork, act(f));  // send_work = _batch_p2p(fwd_sends)
  }
  while (true) {
    backward(b);
    rt->Bind(PpRuntime::kBwdSends, grad(b));  // bwd_sends = get_bwd_send_ops(b)
    ++b;
    if (f == m) break;
    forward(f);
    rt->Bind(PpRuntime::kFwdSends, act(f));
    ++f;
  }
  rt->Bind(PpRuntime::kSendWork, grad(b - 1));  // send_work = _batch_p2p(bwd_sends)
  for (; b < m; ++b) {
    backward(b);
    rt->Bind(PpRuntime::kBwdSends, grad(b));
    rt->Bind(PpRuntime::kSendWork, grad(b));
  }
}

/// _PipelineScheduleRuntime._step_microbatches: the rank's action list (pipeline_order_with_comms)
/// in order; each send's Works are appended to send_ops, which keeps them (and their tensors) to
/// the end of the step, where they are popped, the last first.
void RunRuntime(PpMulti kind, int ranks, int per_rank, int rank, int m, PpRuntime* rt) {
  const std::vector<int> mine = PpStagesOfRank(kind, ranks, per_rank, rank);
  auto local = [&](int stage) { return static_cast<int>(std::find(mine.begin(), mine.end(), stage) - mine.begin()); };
  std::vector<PpSend> send_ops;
  const std::vector<std::vector<PpAction>> lists = PpLowerWithComms(kind, ranks, per_rank, m);
  for (const PpAction& a : lists[rank]) {
    const int j = local(a.stage);
    switch (a.op) {
      case PpOp::kF: rt->Forward(j, a.mb, a.str()); break;
      case PpOp::kB: rt->Backward(j, a.mb, a.str()); break;
      case PpOp::kI: rt->BackwardInput(j, a.mb, a.str()); break;
      case PpOp::kW: rt->BackwardWeight(j, a.mb, a.str()); break;
      case PpOp::kSendF:
      case PpOp::kSendB:
        send_ops.push_back({a.op == PpOp::kSendB, a.mb, j});
        rt->Append(PpRuntime::kSendOps, send_ops.back());
        break;
      default: break;  // RECV_*: into the stage's own recv buffers; REDUCE_GRAD: grads scaled in place
    }
  }
  while (!send_ops.empty()) {  // while send_ops: _wait_batch_p2p(send_ops.pop())
    send_ops.pop_back();
    rt->Bind(PpRuntime::kSendOps, send_ops);
  }
}

}  // namespace

void RunSchedule(PpSchedule schedule, int ranks, int per_rank, int rank, int microbatches, PpRuntime* rt) {
  if (const std::optional<PpMulti> multi = MultiStage(schedule)) RunRuntime(*multi, ranks, per_rank, rank, microbatches, rt);
  else if (schedule == PpSchedule::kGPipe) RunGPipe(ranks, rank, microbatches, rt);
  else Run1F1B(ranks, rank, microbatches, rt);
  for (int n = 0; n < PpRuntime::kNames; ++n) rt->Bind(static_cast<PpRuntime::Name>(n), {});  // return
}

std::string ScheduleOrder(PpSchedule schedule, int ranks, int per_rank, int rank, int microbatches) {
  struct Recorder : PpRuntime {
    std::string order;
    void Forward(int, int, const std::string& label) override { order += (order.empty() ? "" : " ") + label; }
    void Backward(int, int, const std::string& label) override { order += (order.empty() ? "" : " ") + label; }
    void Bind(Name, std::vector<PpSend>) override {}
    void Append(Name, PpSend) override {}
  } rec;
  RunSchedule(schedule, ranks, per_rank, rank, microbatches, &rec);
  return rec.order;
}

namespace {

/// The schedule on the engine: each stage's microbatch's activations and autograd nodes live in
/// a context of their own, swapped into the StepState while its forward or backward runs.
class EngineRuntime : public PpRuntime {
 public:
  explicit EngineRuntime(StepState& s) : s_(s), p_(*s.cfg.pipeline), m_(p_.microbatches) {
    for (TensorId t = 0; t < s.g.tensors.size(); ++t)
      if (s.g.tensors[t].role == TensorRole::kActivation) activations_.push_back(t);
    const size_t n = p_.local.size() * m_;
    contexts_.resize(n);
    for (Context& c : contexts_) {
      c.storage.assign(s.g.tensors.size(), kNoStorage);
      c.nodes.assign(s.g.ops.size(), Node{});
    }
    outputs_.assign(n, kNoStorage);
    input_grads_.assign(n, kNoStorage);
    losses_.assign(n, kNoStorage);
    popped_.assign(n, false);
  }

  void Forward(int j, int mb, const std::string& label) override {
    const PpStage& st = p_.local[j];
    const size_t k = Slot(j, mb);
    s_.SetPhase(Phase::kForward);
    s_.ledger.MarkAction(label);
    Swap(k);
    if (st.recv != kNone) {  // _retrieve_recv_activations: the recv buffer, a leaf requiring grad
      s_.storage[st.recv] = s_.pp_recv_act[RecvSlot(j, mb)];
      s_.ledger.Ref(s_.storage[st.recv]);
    }
    for (OpId o = st.begin; o < st.end; ++o) RunForwardOp(s_, o);
    s_.ledger.set_op(kNoOp);
    // The stage module's forward returns: its locals die; the output stays in fwd_cache.
    if (!p_.IsLast(st)) {
      std::vector<TensorId> locals;
      for (TensorId t : activations_) {
        const OpId producer = s_.g.tensors[t].producer, last = s_.bound.last_use[t];
        if (!s_.held[t] && producer >= st.begin && producer < st.end && last != kNone && last >= st.end)
          locals.push_back(t);
      }
      DropNames(s_, locals);
      outputs_[k] = s_.storage[st.send];
    } else if (s_.g.loss != kNone && s_.storage[s_.g.loss] != kNoStorage) {
      losses_[k] = s_.storage[s_.g.loss];  // _internal_losses
      s_.ledger.Ref(losses_[k]);
    }
    s_.Hook(&TrainingSetup::AfterForwardPass);
    Swap(k);
  }

  void Backward(int j, int mb, const std::string& label) override {
    const PpStage& st = p_.local[j];
    const size_t k = Slot(j, mb);
    s_.SetPhase(Phase::kBackward);
    s_.ledger.MarkAction(label);
    Swap(k);
    s_.param_buffer.assign(s_.param_buffer.size(), Grad{});
    s_.param_deps.assign(s_.param_deps.size(), 0);
    if (!p_.IsLast(st)) {  // stage_backward(stage_output, output_grads=the grad recv buffer)
      s_.backward_root = st.send;
      s_.backward_seed = s_.pp_recv_grad[GradSlot(j, mb)];
    }
    RunBackwardPass(s_);
    s_.backward_root = kNone;
    s_.backward_seed = kNoStorage;
    if (!p_.IsLast(st) && s_.storage[st.send] != kNoStorage) {  // fwd_cache popped: stage_output dies
      s_.ledger.Unref(s_.storage[st.send]);
      s_.storage[st.send] = kNoStorage;
    }
    if (st.recv != kNone) {  // val.grad = None: the input grad goes to bwd_cache
      StorageId& g = s_.param_grad[s_.param_index[st.recv]];
      input_grads_[k] = g;
      g = kNoStorage;
      s_.storage[st.recv] = kNoStorage;
    }
    Swap(k);
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
    for (size_t k = 0; k < input_grads_.size(); ++k)
      if (input_grads_[k] != kNoStorage && !popped_[k]) s_.ledger.Unref(input_grads_[k]);
  }

 private:
  struct Context {
    std::vector<StorageId> storage;
    std::vector<Node> nodes;
  };

  size_t Slot(int j, int mb) const { return static_cast<size_t>(j) * m_ + mb; }
  /// The recv buffers' order: the activation ones of the stages that receive, in stage order.
  size_t RecvSlot(int j, int mb) const {
    size_t before = 0;
    for (int i = 0; i < j; ++i) before += p_.local[i].recv != kNone;
    return before * m_ + mb;
  }
  /// The grad ones: made by _prepare_backward_infra over the stages in reverse.
  size_t GradSlot(int j, int mb) const {
    size_t before = 0;
    for (int i = static_cast<int>(p_.local.size()) - 1; i > j; --i) before += p_.local[i].send != kNone;
    return before * m_ + mb;
  }

  void Swap(size_t k) {
    Context& c = contexts_[k];
    for (TensorId t : activations_) std::swap(s_.storage[t], c.storage[t]);
    std::swap(s_.nodes, c.nodes);
  }

  /// The storage a send holds (detach() of the output shares its storage).
  StorageId Storage(const PpSend& x) const {
    const size_t k = Slot(x.stage, x.mb);
    return x.grad ? input_grads_[k] : outputs_[k];
  }

  /// get_bwd_send_ops pops bwd_cache: once a name holds a grad, bwd_cache's reference goes.
  void Pop(const std::vector<PpSend>& sends) {
    for (const PpSend& x : sends) {
      const size_t k = Slot(x.stage, x.mb);
      if (x.grad && !popped_[k]) {
        popped_[k] = true;
        s_.ledger.Unref(input_grads_[k]);
      }
    }
  }

  StepState& s_;
  const PipelineStagePlan& p_;
  const int m_;
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
  RunSchedule(p.schedule, p.ranks, static_cast<int>(p.local.size()), p.rank, p.microbatches, &rt);
  rt.Finish();
  s.ledger.set_op(kNoOp);
}

void AllocatePipelineBuffers(StepState& s) {
  const PipelineStagePlan& p = *s.cfg.pipeline;
  // _initialize_pp_stages: every stage's forward infra in order, then the backward infra in reverse.
  for (const PpStage& st : p.local)
    if (st.recv != kNone)
      for (int mb = 0; mb < p.microbatches; ++mb)
        s.pp_recv_act.push_back(s.ledger.Alloc(s.bound.metas[st.recv].bytes(), "recv_for_" + std::to_string(st.index) +
                                               "_from_" + std::to_string(st.index - 1), Category::kActivation));
  for (auto st = p.local.rbegin(); st != p.local.rend(); ++st)
    if (st->send != kNone)
      for (int mb = 0; mb < p.microbatches; ++mb)
        s.pp_recv_grad.push_back(s.ledger.Alloc(s.bound.metas[st->send].bytes(), "recv_grad_for_" + std::to_string(st->index) +
                                                "_from_" + std::to_string(st->index + 1), Category::kGradient));
}

}  // namespace memsim
