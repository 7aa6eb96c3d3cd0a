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
  if (n == "interleavedzerobubble" || n == "interleavedzb") return PpSchedule::kInterleavedZeroBubble;
  if (n == "zbvzerobubble" || n == "zbv") return PpSchedule::kZBVZeroBubble;
  if (n == "dualpipev") return PpSchedule::kDualPipeV;
  return std::nullopt;
}

std::string_view PpScheduleName(PpSchedule s) {
  static const char* const kNames[] = {"gpipe", "1f1b", "interleaved1f1b", "interleavedzerobubble", "zbvzerobubble", "dualpipev"};
  return kNames[static_cast<int>(s)];
}

std::optional<PpMulti> MultiStage(PpSchedule s) {
  switch (s) {
    case PpSchedule::kInterleaved1F1B: return PpMulti::kInterleaved1F1B;
    case PpSchedule::kInterleavedZeroBubble: return PpMulti::kInterleavedZeroBubble;
    case PpSchedule::kZBVZeroBubble: return PpMulti::kZBVZeroBubble;
    case PpSchedule::kDualPipeV: return PpMulti::kDualPipeV;
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
  rt->UpdateLosses();
  rt->ReduceGrad(0);  // perform_reduce_grad, the sends still held
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
  rt->UpdateLosses();
  rt->ReduceGrad(0);  // perform_reduce_grad, the sends still held
}

/// _PipelineScheduleRuntime._step_microbatches: the rank's action list (pipeline_order_with_comms)
/// in order; each send's Works are appended to send_ops, which keeps them (and their tensors) to
/// the end of the step, where they are popped, the last first.
void RunRuntime(PpMulti kind, int ranks, int per_rank, int rank, int m, PpRuntime* rt, bool fsdp) {
  const std::vector<int> mine = PpStagesOfRank(kind, ranks, per_rank, rank);
  auto local = [&](int stage) { return static_cast<int>(std::find(mine.begin(), mine.end(), stage) - mine.begin()); };
  std::vector<PpSend> send_ops;
  const std::vector<std::vector<PpAction>> lists = PpLowerWithComms(kind, ranks, per_rank, m, fsdp);
  auto perform = [&](const PpAction& a) {  // _perform_action
    const int j = local(a.stage);
    // [Note: V-schedule special case]: adjacent stages on this rank hand over without p2p.
    const int next = local(a.stage + 1), prev = local(a.stage - 1), n = static_cast<int>(mine.size());
    if (a.op == PpOp::kF || a.op == PpOp::kB || a.op == PpOp::kI || a.op == PpOp::kW) rt->WaitUnshard(j);  // _assert_unsharded
    switch (a.op) {
      case PpOp::kUnshard: rt->Unshard(j); break;
      case PpOp::kReshard: rt->Reshard(j); break;
      case PpOp::kF:
        rt->Forward(j, a.mb, a.str());
        if (next < n) rt->PassForward(j, next, a.mb);  // set_local_fwd_input
        break;
      case PpOp::kB:
      case PpOp::kI:
        if (a.op == PpOp::kB) rt->Backward(j, a.mb, a.str());
        else rt->BackwardInput(j, a.mb, a.str());
        if (prev < n) rt->PassBackward(j, prev, a.mb);  // set_local_bwd_input(get_local_bwd_output)
        break;
      case PpOp::kW: rt->BackwardWeight(j, a.mb, a.str()); break;
      case PpOp::kSendF:
      case PpOp::kSendB:
        send_ops.push_back({a.op == PpOp::kSendB, a.mb, j});
        rt->Append(PpRuntime::kSendOps, send_ops.back());
        break;
      case PpOp::kReduceGrad: rt->ReduceGrad(j); break;
      default: break;  // RECV_*: into the stage's own recv buffers
    }
  };
  for (const PpAction& a : lists[rank]) {
    if (a.op != PpOp::kOverlapFB) perform(a);
    for (const PpAction& sub : a.sub) perform(sub);  // OVERLAP_F_B: its sub-actions in order
  }
  while (!send_ops.empty()) {  // while send_ops: _wait_batch_p2p(send_ops.pop())
    send_ops.pop_back();
    rt->Bind(PpRuntime::kSendOps, send_ops);
  }
}

}  // namespace

void RunSchedule(PpSchedule schedule, int ranks, int per_rank, int rank, int microbatches, PpRuntime* rt, bool fsdp) {
  if (const std::optional<PpMulti> multi = MultiStage(schedule)) RunRuntime(*multi, ranks, per_rank, rank, microbatches, rt, fsdp);
  else if (schedule == PpSchedule::kGPipe) RunGPipe(ranks, rank, microbatches, rt);
  else Run1F1B(ranks, rank, microbatches, rt);
  for (int n = 0; n < PpRuntime::kNames; ++n) rt->Bind(static_cast<PpRuntime::Name>(n), {});  // return
}

std::string ScheduleOrder(PpSchedule schedule, int ranks, int per_rank, int rank, int microbatches) {
  struct Recorder : PpRuntime {
    std::string order;
    void Forward(int, int, const std::string& label) override { order += (order.empty() ? "" : " ") + label; }
    void Backward(int, int, const std::string& label) override { order += (order.empty() ? "" : " ") + label; }
    void BackwardInput(int, int, const std::string& label) override { order += (order.empty() ? "" : " ") + label; }
    void BackwardWeight(int, int, const std::string& label) override { order += (order.empty() ? "" : " ") + label; }
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
    split_.resize(n);
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
    const TensorId out = StageOutput(st);
    for (OpId o : st.prologue) RunForwardOp(s_, o);  // what the stage makes again (its rotary tables)
    for (OpId o = st.begin; o < st.end; ++o) {
      RunForwardOp(s_, o);
      // The single-stage schedules' `output = self._stage.forward_one_chunk(...)`: the local holds
      // the stage output (the last stage's logits) from the module's return, before the loss,
      // until the next forward returns (fwd_cache drops it at the backward), the last one until
      // step() returns.
      if (out != kNone && o == s_.g.tensors[out].producer && !MultiStage(p_.schedule)) {
        s_.ledger.set_op(kNoOp);
        s_.ledger.Ref(s_.storage[out]);
        if (output_ != kNoStorage) s_.ledger.Unref(output_);
        output_ = s_.storage[out];
      }
    }
    s_.ledger.set_op(kNoOp);
    // The stage module's forward returns: its locals die; the output stays in fwd_cache. What
    // the prologue made dies too unless a prologue or stage op was its last use (dropped then).
    std::vector<TensorId> made;
    for (OpId o : st.prologue)
      for (TensorId t : s_.g.ops[o].outputs)
        if (const OpId last = s_.bound.last_use[t]; !s_.held[t] && last != kNone && (last < st.begin || last >= st.end) &&
                                                    !std::binary_search(st.prologue.begin(), st.prologue.end(), last))
          made.push_back(t);
    DropNames(s_, made);
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
    FlushPendingWaits(s_);
    s_.Hook(&TrainingSetup::AfterForwardPass);
    Swap(k);
  }

  void Backward(int j, int mb, const std::string& label) override {
    s_.SetPhase(Phase::kBackward);
    s_.ledger.MarkAction(label);
    FullBackward(j, mb);
  }

  /// backward_one_chunk(full_backward=False): stage_backward_input on a non-first stage (the first
  /// stage's input needs no grad: its whole backward waits for W).
  void BackwardInput(int j, int mb, const std::string& label) override {
    s_.SetPhase(Phase::kBackward);
    s_.ledger.MarkAction(label);
    if (!p_.IsFirst(p_.local[j])) InputBackward(j, mb);
  }

  /// backward_weight_one_chunk: stage_backward_weight, or on the first stage stage_backward.
  void BackwardWeight(int j, int mb, const std::string& label) override {
    s_.SetPhase(Phase::kBackward);
    s_.ledger.MarkAction(label);
    if (p_.IsFirst(p_.local[j])) FullBackward(j, mb);
    else WeightBackward(j, mb);
  }

  /// set_local_fwd_input: the next local stage's recv buffer for |mb| becomes this stage's output
  /// (detached: its storage); the buffer it had is dropped.
  void PassForward(int j, int next, int mb) override {
    StorageId& buf = s_.pp_recv_act[RecvSlot(next, mb)];
    s_.ledger.Ref(outputs_[Slot(j, mb)]);
    s_.ledger.Unref(std::exchange(buf, outputs_[Slot(j, mb)]));
  }

  /// set_local_bwd_input(get_local_bwd_output(mb)): the input grad leaves bwd_cache for the
  /// previous local stage's grad recv buffer, which it replaces.
  void PassBackward(int j, int prev, int mb) override {
    const size_t k = Slot(j, mb);
    StorageId& buf = s_.pp_recv_grad[GradSlot(prev, mb)];
    s_.ledger.Unref(std::exchange(buf, input_grads_[k]));
    popped_[k] = true;  // bwd_cache's reference moves to the buffer
  }

  void Bind(Name name, std::vector<PpSend> sends) override {
    if (Holds(name)) {
      for (const PpSend& x : sends) s_.ledger.Ref(Storage(x));
      for (const PpSend& x : names_[name]) s_.ledger.Unref(Storage(x));
    }
    names_[name] = std::move(sends);
    Pop(names_[name]);
  }

  void Append(Name name, PpSend send) override {
    if (Holds(name)) s_.ledger.Ref(Storage(send));
    names_[name].push_back(send);
    Pop({send});
  }

  /// Whether |name| keeps its tensors: a list of P2POps always does; the Works a send returned
  /// only where the backend's Work holds them (Note [Pipeline sends on CUDA]).
  bool Holds(Name name) const {
    return name == kFwdSends || name == kBwdSends || s_.profile.p2p_send_work_holds_tensor;
  }

  void Unshard(int j) override { s_.Hook(&TrainingSetup::OnStageShard, j, TrainingSetup::StageShard::kIssue); }
  void WaitUnshard(int j) override { s_.Hook(&TrainingSetup::OnStageShard, j, TrainingSetup::StageShard::kWait); }
  void Reshard(int j) override { s_.Hook(&TrainingSetup::OnStageShard, j, TrainingSetup::StageShard::kReshard); }

  void UpdateLosses() override {
    for (StorageId& l : losses_)
      if (l != kNoStorage) s_.ledger.Unref(std::exchange(l, kNoStorage));
  }

  /// perform_reduce_grad: the grads scaled in place; a data-parallel setup syncs them.
  void ReduceGrad(int j) override {
    s_.ledger.set_op(kNoOp);
    s_.Hook(&TrainingSetup::OnReduceGrad, j);
  }

  /// After the schedule: _update_losses drops the losses; a grad no send took leaves bwd_cache;
  /// step() returns: its `output` local goes.
  void Finish() {
    UpdateLosses();
    if (output_ != kNoStorage) s_.ledger.Unref(std::exchange(output_, kNoStorage));
    for (size_t k = 0; k < input_grads_.size(); ++k)
      if (input_grads_[k] != kNoStorage && !popped_[k]) s_.ledger.Unref(input_grads_[k]);
  }

 private:
  /// backward_one_chunk with full_backward: stage_backward.
  void FullBackward(int j, int mb) {
    const PpStage& st = p_.local[j];
    const size_t k = Slot(j, mb);
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

  /// stage_backward_input: autograd.grad(stage_output or loss, the stage input, retain_graph=True)
  /// runs only the nodes toward the input, keeping every saved tensor; the param groups'
  /// intermediates' prehooks keep the grads flowing into them; the input grad goes to bwd_cache
  /// and stays the recv buffer's .grad (inp.grad = dinput, never reset); the stage output is
  /// detached, so the nodes no intermediate reaches die.
  void InputBackward(int j, int mb) {
    const PpStage& st = p_.local[j];
    const size_t k = Slot(j, mb);
    Swap(k);
    Split& sp = split_[k];
    AnalyzeSplit(st, &sp);
    const TensorId out = p_.IsLast(st) ? s_.g.loss : st.send;
    const OpId root = s_.g.tensors[out].producer;
    const TensorMeta& om = s_.bound.metas[out];
    // output_grads, or torch.ones_like(loss) held by valid_output_grads until the function returns
    const StorageId seed = p_.IsLast(st) ? s_.ledger.AllocJoined(om.bytes(), {s_.g.tensors[out].name, ".grad (seed)"},
                                                                 Category::kGradient)
                                         : s_.pp_recv_grad[GradSlot(j, mb)];
    s_.ledger.Ref(seed);
    Node& rn = s_.nodes[root];
    rn.buffer.resize(s_.g.ops[root].outputs.size());
    const auto& outs = s_.g.ops[root].outputs;
    rn.buffer[std::find(outs.begin(), outs.end(), out) - outs.begin()] = Grad{seed, *TensorMeta::Contiguous(om.dtype, om.sizes)};
    s_.param_buffer.assign(s_.param_buffer.size(), Grad{});
    s_.ledger.set_op(root);
    RunGrad(s_, {root}, &sp.pass);
    const uint32_t leaf = s_.param_index[st.recv];
    if (const Grad d = std::exchange(s_.param_buffer[leaf], Grad{}); d.defined()) {
      input_grads_[k] = d.s;   // bwd_cache
      s_.ledger.Ref(d.s);      // inp.grad = dinput
      buffer_grads_.push_back(d.s);
    }
    if (p_.IsLast(st)) s_.ledger.Unref(seed);
    if (!s_.cfg.loop_holds_output && !s_.cfg.loop_holds_step) DropCallerNames(s_, /*forget=*/false);
    // t.detach_(): what no intermediate reaches dies
    std::vector<OpId> holders;
    for (const Group& group : sp.groups) holders.insert(holders.end(), group.nodes.begin(), group.nodes.end());
    std::vector<bool> dead(s_.g.ops.size(), false);
    DestroyUnreached(st, holders, &dead);
    s_.ledger.set_op(kNoOp);
    Swap(k);
  }

  /// stage_backward_weight: each param group in turn, autograd.grad(its intermediates' kept grads,
  /// its parameters) without retain_graph (the nodes it runs release what they saved);
  /// weight.grad = dw, or += dw with dw kept by `dweights` until the next group's autograd.grad
  /// returns; the group's grads go when the next group starts. Then backward_state is popped:
  /// the rest of the graph and the stage output die.
  void WeightBackward(int j, int mb) {
    const PpStage& st = p_.local[j];
    const size_t k = Slot(j, mb);
    Swap(k);
    Split& sp = split_[k];
    std::vector<StorageId> grads, dweights;
    auto drop = [&](std::vector<StorageId>& v) {
      for (StorageId x : v) s_.ledger.Unref(x);
      v.clear();
    };
    std::vector<bool> dead(s_.g.ops.size(), false);
    for (size_t gi = 0; gi < sp.groups.size(); ++gi) {
      const Group& group = sp.groups[gi];
      // valid_edges = []: the earlier groups' intermediates are let go, and with them the nodes
      // only they reached; then valid_grad_outputs = [].
      std::vector<OpId> holders;
      for (size_t later = gi; later < sp.groups.size(); ++later)
        holders.insert(holders.end(), sp.groups[later].nodes.begin(), sp.groups[later].nodes.end());
      DestroyUnreached(st, holders, &dead);
      drop(grads);
      std::vector<OpId> roots;
      for (OpId o : group.nodes) {
        std::vector<Grad>& kept = sp.pass.captured[o];
        bool any = false;
        for (const Grad& gr : kept)
          if (gr.defined()) any = true, grads.push_back(gr.s);
        if (!any) continue;
        roots.push_back(o);
        s_.nodes[o].buffer = kept;  // GradientEdge(intermediate, i) with its grad
        for (const Grad& gr : kept)
          if (gr.defined()) s_.ledger.Ref(gr.s);
        kept.clear();
      }
      if (roots.empty()) continue;
      GradPass pass;
      pass.needed = ToParams(st, group.params);
      pass.weights = true;
      s_.param_buffer.assign(s_.param_buffer.size(), Grad{});
      RunGrad(s_, roots, &pass);
      drop(dweights);  // dweights = torch.autograd.grad(...)
      for (uint32_t q : group.params) {
        const Grad dw = std::exchange(s_.param_buffer[q], Grad{});
        if (!dw.defined()) continue;
        if (s_.param_grad[q] == kNoStorage) s_.param_grad[q] = dw.s;  // weight.grad = dw
        else dweights.push_back(dw.s);                                  // weight.grad += dw
      }
    }
    drop(grads);
    drop(dweights);
    std::vector<OpId> all;
    for (OpId o = st.end; o-- > st.begin;)
      if (s_.nodes[o].exists) all.push_back(o);
    DestroyNodes(s_, all);
    if (!p_.IsLast(st) && s_.storage[st.send] != kNoStorage) {  // backward_state popped: stage_output dies
      s_.ledger.Unref(s_.storage[st.send]);
      s_.storage[st.send] = kNoStorage;
    }
    s_.storage[st.recv] = kNoStorage;
    s_.ledger.set_op(kNoOp);
    Swap(k);
  }

 private:
  struct Context {
    std::vector<StorageId> storage;
    std::vector<Node> nodes;
  };

  size_t Slot(int j, int mb) const { return static_cast<size_t>(j) * m_ + mb; }
  /// What the stage module returns: the activation it sends, or on the last stage the model's
  /// output (the logits; the loss after it is the schedule's _maybe_compute_loss).
  TensorId StageOutput(const PpStage& st) const {
    if (!p_.IsLast(st)) return st.send;
    TensorId out = kNone;
    for (TensorId t : s_.g.outputs) {
      const OpId producer = s_.g.tensors[t].producer;
      if (t != s_.g.loss && producer != kNone && producer >= st.begin && producer < st.end &&
          (out == kNone || producer > s_.g.tensors[out].producer))
        out = t;
    }
    return out;
  }
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

  /// A param group of stage_backward_input (get_param_groups): its intermediates and parameters.
  struct Group {
    std::vector<OpId> nodes;
    std::vector<uint32_t> params;
  };
  /// What backward_state keeps of a stage's microbatch between I and W.
  struct Split {
    GradPass pass;  ///< I's autograd.grad: its exec_info, the intermediates, the grads they kept
    std::vector<Group> groups;
  };

  /// The node input |i| of op |o| reaches through its edge (kNone: a leaf, or no grad).
  OpId NodeOf(OpId o, size_t i) const {
    if (!s_.nodes[o].rg.test(i)) return kNone;
    const TensorId t = s_.g.ops[o].inputs[i];
    if (s_.param_index[t] != kNoStorage) return kNone;
    const OpId p = s_.g.tensors[t].producer;
    return p != kNone && s_.nodes[p].exists ? p : kNone;
  }

  /// The nodes of |st| that none of |holders| reaches through its edges (next_functions) are
  /// destroyed, the last created first; |dead| marks the destroyed ones.
  void DestroyUnreached(const PpStage& st, const std::vector<OpId>& holders, std::vector<bool>* dead) {
    std::vector<bool> alive(s_.g.ops.size(), false);
    std::vector<OpId> stack;
    for (OpId o : holders)
      if (!alive[o]) alive[o] = true, stack.push_back(o);
    while (!stack.empty()) {
      const OpId o = stack.back();
      stack.pop_back();
      for (size_t i = 0; i < s_.g.ops[o].inputs.size(); ++i) {
        const OpId n = NodeOf(o, i);
        if (n != kNone && !alive[n]) alive[n] = true, stack.push_back(n);
      }
    }
    std::vector<OpId> gone;
    for (OpId o = st.end; o-- > st.begin;)
      if (s_.nodes[o].exists && !alive[o] && !(*dead)[o]) gone.push_back(o), (*dead)[o] = true;
    DestroyNodes(s_, gone);
  }

  /// Per op of |st|: the input edges that lead to a leaf |target| accepts (exec_info).
  template <typename Target>
  std::vector<RgMask> EdgesTo(const PpStage& st, Target target) const {
    std::vector<RgMask> mask(s_.g.ops.size());
    std::vector<bool> leads(s_.g.ops.size(), false);
    for (OpId o = st.begin; o < st.end; ++o) {
      if (!s_.nodes[o].exists) continue;
      for (size_t i = 0; i < s_.g.ops[o].inputs.size(); ++i) {
        if (!s_.nodes[o].rg.test(i)) continue;
        const uint32_t leaf = s_.param_index[s_.g.ops[o].inputs[i]];
        const OpId n = NodeOf(o, i);
        if ((leaf != kNoStorage && target(leaf)) || (n != kNone && leads[n])) mask[o].set(i), leads[o] = true;
      }
    }
    return mask;
  }

  std::vector<RgMask> ToParams(const PpStage& st, const std::vector<uint32_t>& params) const {
    return EdgesTo(st, [&](uint32_t q) { return std::find(params.begin(), params.end(), q) != params.end(); });
  }

  /// get_param_groups: the nodes leading to the stage input (its closure); each parameter's
  /// intermediates, the closure nodes its uses reach through nodes outside it; groups keyed by
  /// intermediate, merged where one is shared, in the order of the stage's parameters.
  void AnalyzeSplit(const PpStage& st, Split* sp) const {
    const uint32_t input = s_.param_index[st.recv];
    sp->pass = GradPass{};
    sp->pass.needed = EdgesTo(st, [&](uint32_t q) { return q == input; });
    sp->pass.retain = true;
    sp->pass.capture.assign(s_.g.ops.size(), false);
    sp->pass.captured.assign(s_.g.ops.size(), {});
    sp->groups.clear();
    auto in_closure = [&](OpId o) { return sp->pass.needed[o].any(); };
    std::vector<std::vector<OpId>> consumers(s_.g.tensors.size());
    for (OpId o = st.begin; o < st.end; ++o)
      if (s_.nodes[o].exists)
        for (size_t i = 0; i < s_.g.ops[o].inputs.size(); ++i)
          if (s_.nodes[o].rg.test(i)) consumers[s_.g.ops[o].inputs[i]].push_back(o);
    std::vector<int> group_of(s_.g.ops.size(), -1);
    for (uint32_t q = 0; q < s_.g.parameters.size(); ++q) {
      if (!p_.params[q]) continue;
      std::vector<OpId> hit;  // reverse_closure([param], inputs_closure)
      std::vector<bool> seen(s_.g.ops.size(), false);
      std::vector<TensorId> frontier = {s_.g.parameters[q]};
      while (!frontier.empty()) {
        const TensorId t = frontier.back();
        frontier.pop_back();
        for (OpId c : consumers[t]) {
          if (seen[c]) continue;
          seen[c] = true;
          if (in_closure(c)) {
            hit.push_back(c);
            continue;
          }
          for (TensorId out : s_.g.ops[c].outputs) frontier.push_back(out);
        }
      }
      std::sort(hit.begin(), hit.end());
      int mine = -1;
      for (OpId n : hit) {
        sp->pass.capture[n] = true;
        if (group_of[n] >= 0) mine = group_of[n];
      }
      if (hit.empty()) continue;
      if (mine < 0) {
        mine = static_cast<int>(sp->groups.size());
        sp->groups.emplace_back();
      }
      Group& gr = sp->groups[mine];
      gr.params.push_back(q);
      for (OpId n : hit)
        if (group_of[n] < 0) group_of[n] = mine, gr.nodes.push_back(n);
    }
  }

  /// Enters (or, called again, leaves) slot |k|'s autograd graph and activations.
  void Swap(size_t k) {
    Context& c = contexts_[k];
    for (TensorId t : activations_) std::swap(s_.storage[t], c.storage[t]);
    std::swap(s_.nodes, c.nodes);
    s_.pass_slot = s_.pass_slot == k + 1 ? 0 : k + 1;
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
  StorageId output_ = kNoStorage;        ///< the single-stage schedules' `output` local
  std::vector<bool> popped_;
  std::vector<Split> split_;             ///< per slot: backward_state between I and W
  std::vector<StorageId> buffer_grads_;  ///< the recv buffers' .grad (stage_backward_input sets it)
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
  RunSchedule(p.schedule, p.ranks, static_cast<int>(p.local.size()), p.rank, p.microbatches, &rt, p.fsdp);
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
