// The step driver: setup, forward, backward, optimizer.step() and zero_grad(), with the
// training setups called at each hook point (lib/autodiff/setup.h).
#include "lib/autodiff/step.h"

#include <algorithm>

#include "lib/autodiff/state.h"
#include "lib/util/check.h"

namespace memsim {

StepState::StepState(const Graph& graph, const BoundGraph& b, const StepConfig& c)
    : g(graph), bound(b), cfg(c), profile(*c.profile), workspaces(*c.profile), setups(c.setups) {
  rg = PropagateRequiresGrad(g, bound, cfg.frozen);
  storage.assign(g.tensors.size(), kNoStorage);
  param_index.assign(g.tensors.size(), kNoStorage);
  for (size_t k = 0; k < g.parameters.size(); ++k) param_index[g.parameters[k]] = uint32_t(k);
  held.assign(g.tensors.size(), false);
  held_prev.assign(g.tensors.size(), kNoStorage);
  if (!cfg.loop_drops_output)
    for (TensorId t : g.outputs) held[t] = true;
  if (g.loss != kNone) held[g.loss] = true;
  nodes.assign(g.ops.size(), Node{});
  param_buffer.assign(g.parameters.size(), Grad{});
  param_deps.assign(g.parameters.size(), 0);
  param_grad.assign(g.parameters.size(), kNoStorage);
  // Pipeline parallel: each stage's received activation is a leaf requiring grad (the recv
  // buffer); its output is held by fwd_cache.
  for (const PpStage& st : cfg.pipeline ? cfg.pipeline->local : std::vector<PpStage>{}) {
    if (st.recv != kNone) {
      param_index[st.recv] = static_cast<uint32_t>(g.parameters.size() + extra_leaves.size());
      extra_leaves.push_back(st.recv);
      param_buffer.emplace_back();
      param_deps.push_back(0);
      param_grad.push_back(kNoStorage);
    }
    if (st.send != kNone) held[st.send] = true;
  }
}

void StepState::StartPass() {
  for (TensorId t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].role != TensorRole::kActivation) continue;
    // Note [Training loop]: the loop's names still hold the last `out` and `loss`.
    if (cfg.loop_holds_output && held[t] && storage[t] != kNoStorage) held_prev[t] = storage[t];
    storage[t] = kNoStorage;
  }
  nodes.assign(g.ops.size(), Node{});
  param_buffer.assign(param_buffer.size(), Grad{});
  param_deps.assign(param_deps.size(), 0);
}

OptParam StepState::OptParamOf(size_t k) const {
  const TensorId t = g.parameters[k];
  const TensorMeta& m = bound.metas[t];
  return OptParam{g.tensors[t].name, m.bytes(), param_grad[k], m.sizes, ElementSize(m.dtype)};
}

std::vector<OptParam> StepState::OptParams() const {
  std::vector<OptParam> ps;
  for (size_t k = 0; k < g.parameters.size(); ++k)
    if (rg[g.parameters[k]]) ps.push_back(OptParamOf(k));
  for (TrainingSetup* s : setups) s->OnOptimizerParams(*this, &ps);
  return ps;
}

namespace {

bool HasGemm(const Graph& g) {
  return std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return IsGemm(op.kind); });
}

/// model.to(device), the optimizer state and workspaces that exist before the step, the batch.
void Setup(StepState& s) {
  s.SetPhase(Phase::kSetup);
  // model.to(device): module by module, children first (see ModuleApplyOrder).
  const std::vector<TensorId> computed = s.cfg.apply_order.empty() ? ModuleApplyOrder(s.g) : std::vector<TensorId>{};
  for (TensorId t : s.cfg.apply_order.empty() ? computed : s.cfg.apply_order) {
    bool made = false;
    for (TrainingSetup* setup : s.setups) made = made || setup->AllocateParameter(s, t);
    if (!made) s.storage[t] = s.ledger.Alloc(s.bound.metas[t].bytes(), s.g.tensors[t].name, Category::kParameter);
  }
  CreateResidentState(s.cfg.optimizer, s.profile, s.cfg.first_step, s.OptParams(), &s.ledger, &s.states);
  if (!s.cfg.first_step && HasGemm(s.g))
    s.workspaces.CreateFromEarlierStep(&s.ledger, std::any_of(s.g.ops.begin(), s.g.ops.end(), IsLtGemm));
  s.Hook(&TrainingSetup::OnSetup);
  for (TensorId t : s.g.inputs) {
    bool made = false;
    for (TrainingSetup* setup : s.setups) made = made || setup->AllocateInput(s, t);
    if (!made) s.storage[t] = s.ledger.Alloc(s.bound.metas[t].bytes(), s.g.tensors[t].name, Category::kInput);
  }
  s.Hook(&TrainingSetup::OnSetupBatch);
  for (size_t j = 0; s.cfg.pipeline && j < s.cfg.pipeline->local.size(); ++j)
    s.Hook(&TrainingSetup::OnParallelizeStage, static_cast<int>(j));
  // A steady-state step of a pipeline stage: the first step() made its recv buffers.
  if (s.cfg.pipeline && !s.cfg.first_step) AllocatePipelineBuffers(s);
}

/// optimizer.step(), then zero_grad(set_to_none=True).
void OptimizerAndZeroGrad(StepState& s) {
  if (s.cfg.optimizer.name == "none") return;
  s.Hook(&TrainingSetup::BeforeOptimizerStep);
  RecordFunctionScratch(s);
  RunOptimizerStep(s.cfg.optimizer, s.profile, s.first_step, s.OptParams(), &s.ledger, &s.states);
  s.Hook(&TrainingSetup::AfterOptimizerStep);
  RecordFunctionScratch(s);
  // zero_grad(set_to_none=True) frees the grads; zeros / none keep them for the next step.
  if (s.cfg.zero_grad != StepConfig::ZeroGrad::kSetToNone) return;
  for (StorageId& st : s.param_grad) {
    if (st != kNoStorage) s.ledger.Unref(st);
    st = kNoStorage;
  }
}

/// One training step: the passes (forward, backward), then optimizer.step() and zero_grad().
void RunOneStep(StepState& s, bool first) {
  // A pipeline stage runs its schedule's microbatches instead (Note [Pipeline parallel]).
  if (s.cfg.pipeline) RunPipelinePasses(s);
  for (int pass = 0; !s.cfg.pipeline && pass < std::max(1, s.cfg.passes); ++pass) {
    if (!first || pass > 0) s.StartPass();
    s.SetPhase(Phase::kForward);
    for (OpId o = 0; o < s.g.ops.size(); ++o) RunForwardOp(s, o);
    s.ledger.set_op(kNoOp);
    FlushPendingWaits(s);
    s.Hook(&TrainingSetup::AfterForwardPass);
    s.SetPhase(Phase::kBackward);
    RunBackwardPass(s);
  }
  s.SetPhase(Phase::kOptimizer);
  s.ledger.set_op(kNoOp);
  OptimizerAndZeroGrad(s);
  if (s.cfg.loop_holds_step) DropCallerNames(s, /*forget=*/true);  // a step function returns
}

void RunStep(StepState& s) {
  Setup(s);
  const int steps = std::max(1, s.cfg.steps);
  for (int k = 0; k < steps; ++k) {
    if (steps > 1) s.ledger.MarkStep();
    s.first_step = s.cfg.first_step && k == 0;
    RunOneStep(s, k == 0);
  }
}

}  // namespace

void RecordFunctionScratch(StepState& s) {
  if (!s.profile.record_function_scratch) return;
  StorageId z = s.ledger.Alloc(4, "record_function zeros", Category::kTemporary);
  StorageId h = s.ledger.Alloc(288, "record_function handle", Category::kTemporary);
  s.ledger.Unref(h);
  s.ledger.Unref(z);
}

Result<EventStream> SimulateStep(const Graph& g, const BoundGraph& bound, const StepConfig& cfg) {
  return SimulateStep(g, bound, cfg, StepRecording{});
}

Result<EventStream> SimulateStep(const Graph& g, const BoundGraph& bound, const StepConfig& cfg,
                                 const StepRecording& rec) {
  MEMSIM_CHECK(cfg.profile != nullptr);
  StepState s(g, bound, cfg);
  s.ledger.set_record_names(rec.names);
  s.ledger.Reserve(rec.reserve_buffers, rec.reserve_events);
  RunStep(s);
  MEMSIM_RETURN_IF_ERROR(s.ledger.CheckBytes());
  return std::move(s.ledger).Finish();
}

std::vector<Retention> ExplainAtEvent(const Graph& g, const BoundGraph& bound, const StepConfig& cfg,
                                      size_t event_index) {
  MEMSIM_CHECK(cfg.profile != nullptr);
  StepState s(g, bound, cfg);
  std::vector<Retention> explained;
  s.ledger.set_probe(event_index, [&] { explained = ExplainState(s); });
  RunStep(s);
  return explained;
}

}  // namespace memsim
