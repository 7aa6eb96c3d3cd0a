#include "lib/autodiff/setups/pipeline.h"

#include <algorithm>
#include <map>
#include <set>

#include "lib/autodiff/state.h"
#include "lib/ir/module_paths.h"

namespace memsim {

std::vector<int> TorchtitanSplit(int blocks, int stages) {
  const int total = blocks + 2, per = total / stages, extra = total % stages;
  std::vector<int> split;
  int assigned = 0;
  for (int s = 0; s < stages; ++s) {
    int n = per + (s < extra ? 1 : 0) - (s == 0 ? 1 : 0);
    if (s == stages - 1) n = blocks - assigned;
    n = std::max(0, std::min(n, blocks - assigned));
    split.push_back(n);
    assigned += n;
  }
  return split;
}

namespace {

/// Each op's stage: its block's, or (outside the blocks) the first stage before them, the last
/// after them, the previous op's in between.
Result<std::vector<int>> StageOfOps(const Graph& g, int stages, const std::vector<int>& split) {
  const std::vector<std::string> blocks = RepeatedBlocks(g);
  if (blocks.empty())
    return Status::InvalidArgument("--mesh pp: " + g.name + " has no repeated blocks (modules P.0, P.1, ...) to split into stages");
  int sum = 0;
  for (int n : split) sum += n;
  if (static_cast<int>(split.size()) != stages || sum != static_cast<int>(blocks.size()) ||
      std::any_of(split.begin(), split.end(), [](int n) { return n < 0; }))
    return Status::InvalidArgument("--pp-split: give " + std::to_string(stages) + " block counts summing to " +
                                   std::to_string(blocks.size()) + " (the blocks of " + g.name + ")");
  std::map<std::string, int> stage_of_block;
  for (int s = 0, b = 0; s < stages; ++s)
    for (int k = 0; k < split[s]; ++k) stage_of_block[blocks[b++]] = s;
  auto block_stage = [&](const std::string& module) {
    for (const auto& [path, s] : stage_of_block)
      if (module == path || module.rfind(path + ".", 0) == 0) return s;
    return -1;
  };
  std::vector<int> stage(g.ops.size(), -1);
  OpId first = kNone, last = kNone;
  for (OpId o = 0; o < g.ops.size(); ++o) {
    stage[o] = block_stage(g.ops[o].module);
    if (stage[o] >= 0) {
      if (first == kNone) first = o;
      last = o;
    }
  }
  for (OpId o = 0; o < g.ops.size(); ++o) {
    if (stage[o] >= 0) continue;
    stage[o] = o < first ? 0 : o > last ? stages - 1 : stage[o - 1];
  }
  for (OpId o = 1; o < g.ops.size(); ++o)
    if (stage[o] < stage[o - 1])
      return Status::InvalidArgument("--mesh pp: op " + g.ops[o].name + " (" + g.ops[o].module + ") of stage " +
                                     std::to_string(stage[o]) + " runs after stage " + std::to_string(stage[o - 1]) +
                                     "'s ops: the blocks do not run in order");
  return stage;
}

/// Per tensor: made from buffers and tensor factories alone (no input, no parameter), so that
/// any stage can make it again.
std::vector<bool> Replicable(const Graph& g) {
  std::vector<bool> r(g.tensors.size(), false);
  for (TensorId t = 0; t < g.tensors.size(); ++t) r[t] = g.tensors[t].role == TensorRole::kBuffer;
  for (const Op& op : g.ops)
    if (std::all_of(op.inputs.begin(), op.inputs.end(), [&](TensorId t) { return r[t]; }))
      for (TensorId t : op.outputs) r[t] = true;
  return r;
}

/// The activations produced before op |begin| that ops [begin, end) read, less the replicable ones.
std::vector<TensorId> Crossing(const Graph& g, OpId begin, OpId end, const std::vector<bool>& replicable) {
  std::vector<TensorId> in;
  for (OpId o = begin; o < end; ++o)
    for (TensorId t : g.ops[o].inputs) {
      const Tensor& x = g.tensors[t];
      if (x.role == TensorRole::kActivation && x.producer < begin && !replicable[t] &&
          std::find(in.begin(), in.end(), t) == in.end())
        in.push_back(t);
    }
  return in;
}

/// The earlier ops that make the replicable activations ops [begin, end) read, in graph order.
std::vector<OpId> Prologue(const Graph& g, OpId begin, OpId end, const std::vector<bool>& replicable) {
  std::vector<bool> in(g.ops.size(), false);
  std::vector<OpId> todo;
  for (OpId o = begin; o < end; ++o)
    for (TensorId t : g.ops[o].inputs)
      if (const OpId p = g.tensors[t].producer; replicable[t] && p != kNone && p < begin && !in[p]) {
        in[p] = true;
        todo.push_back(p);
      }
  while (!todo.empty()) {
    const OpId o = todo.back();
    todo.pop_back();
    for (TensorId t : g.ops[o].inputs)
      if (const OpId p = g.tensors[t].producer; p != kNone && !in[p]) {
        in[p] = true;
        todo.push_back(p);
      }
  }
  std::vector<OpId> out;
  for (OpId o = 0; o < begin; ++o)
    if (in[o]) out.push_back(o);
  return out;
}

/// A buffer no op reads (transformers' rotary original_inv_freq) stays with its module: on the
/// stages whose ops run in that module (pipeline_llm keeps a stage's modules whole). The root
/// module's own buffers (torchtitan's freqs_cis) stay on every stage: pipeline_llm makes a stage
/// from the whole model by deleting the modules it does not own (layers, embedding, norm, head).
void KeepUnreadBuffers(const Graph& g, PipelineStagePlan* p) {
  for (TensorId t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].role == TensorRole::kBuffer && g.tensors[t].name.find('.') == std::string::npos) p->buffers[t] = true;
  std::vector<bool> read(g.tensors.size(), false);
  for (const Op& op : g.ops)
    for (TensorId t : op.inputs) read[t] = true;
  for (TensorId t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].role != TensorRole::kBuffer || read[t]) continue;
    const std::string& name = g.tensors[t].name;
    const std::string owner = name.substr(0, name.rfind('.') == std::string::npos ? 0 : name.rfind('.'));
    auto runs = [&](const PpStage& st, OpId o) {
      return o >= st.begin || std::binary_search(st.prologue.begin(), st.prologue.end(), o);
    };
    for (const PpStage& st : p->local)
      for (OpId o = 0; o < st.end && !p->buffers[t]; ++o) {
        const std::string& m = g.ops[o].module;
        if (runs(st, o) && !owner.empty() && (m == owner || m.rfind(owner + ".", 0) == 0)) p->buffers[t] = true;
      }
  }
}

Result<TensorId> Boundary(const Graph& g, OpId begin, OpId end, int stage, const std::vector<bool>& replicable) {
  std::vector<TensorId> in = Crossing(g, begin, end, replicable);
  if (in.size() == 1) return in.front();
  std::string names;
  for (size_t k = 0; k < in.size() && k < 3; ++k) names += (k ? ", " : "") + g.tensors[in[k]].name;
  return Status::InvalidArgument("--mesh pp: stage " + std::to_string(stage) + " of " + g.name + " reads " +
                                 std::to_string(in.size()) + " activations of earlier stages (" + names +
                                 (in.size() > 3 ? ", ..." : "") + "); a stage boundary must pass one (the blocks' hidden state)");
}

}  // namespace

Result<PipelineStagePlan> PlanPipelineStage(const Graph& g, PpSchedule schedule, int ranks, int per_rank, int rank,
                                            const std::vector<int>& split) {
  const int stages = ranks * per_rank;
  const std::vector<int> blocks = split.empty() ? TorchtitanSplit(static_cast<int>(RepeatedBlocks(g).size()), stages) : split;
  MEMSIM_ASSIGN_OR_RETURN(std::vector<int> of, StageOfOps(g, stages, blocks));
  PipelineStagePlan p;
  p.rank = rank;
  p.ranks = ranks;
  p.stages = stages;
  p.schedule = schedule;
  p.blocks = blocks;
  std::vector<OpId> begin(stages + 1, kNone);
  for (int s = 0; s <= stages; ++s)
    begin[s] = static_cast<OpId>(std::lower_bound(of.begin(), of.end(), s) - of.begin());
  for (int s = 0; s < stages; ++s)
    if (begin[s] == begin[s + 1])
      return Status::InvalidArgument("--mesh pp: stage " + std::to_string(s) + " of " + g.name + " gets no ops (" +
                                     std::to_string(blocks[s]) + " blocks); give --pp-split or fewer stages");
  const std::optional<PpMulti> multi = MultiStage(schedule);
  const std::vector<bool> replicable = Replicable(g);
  for (int stage : multi ? PpStagesOfRank(*multi, ranks, per_rank, rank) : std::vector<int>{rank}) {
    PpStage st;
    st.index = stage;
    st.begin = begin[stage];
    st.end = begin[stage + 1];
    st.prologue = Prologue(g, st.begin, st.end, replicable);
    if (stage > 0) { MEMSIM_ASSIGN_OR_RETURN(st.recv, Boundary(g, st.begin, st.end, stage, replicable)); }
    if (stage < stages - 1) {
      MEMSIM_ASSIGN_OR_RETURN(st.send, Boundary(g, st.end, begin[stage + 2], stage + 1, replicable));
    }
    if (st.send != kNone && (g.tensors[st.send].producer < st.begin || g.tensors[st.send].producer >= st.end))
      return Status::InvalidArgument("--mesh pp: stage " + std::to_string(stage + 1) + " of " + g.name + " reads " +
                                     g.tensors[st.send].name + ", which stage " + std::to_string(stage) + " does not make");
    p.local.push_back(st);
  }
  p.params.assign(g.parameters.size(), false);
  p.param_stage.assign(g.parameters.size(), -1);
  p.buffers.assign(g.tensors.size(), false);
  p.inputs.assign(g.tensors.size(), false);
  std::vector<uint32_t> index(g.tensors.size(), kNone);
  for (size_t k = 0; k < g.parameters.size(); ++k) index[g.parameters[k]] = static_cast<uint32_t>(k);
  for (size_t j = 0; j < p.local.size(); ++j)
    for (OpId o = 0; o < p.local[j].end; ++o) {
      const PpStage& st = p.local[j];
      if (o < st.begin && !std::binary_search(st.prologue.begin(), st.prologue.end(), o)) continue;
      for (TensorId t : g.ops[o].inputs) {
        const TensorRole role = g.tensors[t].role;
        if (role == TensorRole::kParameter && index[t] != kNone && !p.params[index[t]]) {
          p.params[index[t]] = true;
          p.param_stage[index[t]] = static_cast<int>(j);
        }
        if (role == TensorRole::kBuffer) p.buffers[t] = true;
        if (role == TensorRole::kInput) p.inputs[t] = true;
      }
    }
  KeepUnreadBuffers(g, &p);
  return p;
}

namespace {

class PipelineStage : public TrainingSetup {
 public:
  explicit PipelineStage(const PipelineStagePlan& plan) : p_(plan) {}

  /// model.to(): the stage module holds its own parameters and buffers only.
  bool AllocateParameter(StepState& s, TensorId t) override {
    if (s.g.tensors[t].role == TensorRole::kBuffer) return !p_.buffers[t];
    const uint32_t k = s.param_index[t];
    return k != kNoStorage && k < p_.params.size() && !p_.params[k];
  }

  /// The whole batch on the rank that uses it (the first stage the ids, the last the targets):
  /// step() splits it into microbatch views (torch.tensor_split).
  bool AllocateInput(StepState& s, TensorId t) override {
    if (!p_.inputs[t]) return true;
    s.storage[t] = s.ledger.Alloc(s.bound.metas[t].bytes() * p_.microbatches, s.g.tensors[t].name, Category::kInput);
    return true;
  }

  /// The optimizer over the stage module's parameters.
  void OnOptimizerParams(const StepState& s, std::vector<OptParam>* ps) override {
    std::set<std::string> own;
    for (size_t k = 0; k < p_.params.size(); ++k)
      if (p_.params[k]) own.insert(s.g.tensors[s.g.parameters[k]].name);
    std::erase_if(*ps, [&](const OptParam& q) { return !own.count(q.name); });
  }

 private:
  const PipelineStagePlan& p_;
};

}  // namespace

std::unique_ptr<TrainingSetup> MakePipelineStage(const PipelineStagePlan& plan) {
  return std::make_unique<PipelineStage>(plan);
}

}  // namespace memsim
