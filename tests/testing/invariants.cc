#include "tests/testing/invariants.h"

#include <algorithm>
#include <string>

namespace memsim::testing {
namespace {

Status Bad(const std::string& what) { return Status::Internal(what); }

Status CheckRoleList(const Graph& g, const std::vector<TensorId>& list, TensorRole role, const char* name) {
  for (TensorId t : list)
    if (t >= g.tensors.size() || g.tensors[t].role != role)
      return Bad(std::string(name) + " lists tensor " + std::to_string(t) + " of another role");
  size_t n = 0;
  for (const Tensor& t : g.tensors) n += t.role == role;
  if (n != list.size()) return Bad(std::string(name) + " misses tensors of its role");
  return Status::OK();
}

}  // namespace

Status VerifyGraph(const Graph& g) {
  std::vector<OpId> made_by(g.tensors.size(), kNone);
  for (OpId o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    for (TensorId t : op.inputs) {
      if (t >= g.tensors.size()) return Bad(op.name + ": input id out of range");
      if (g.tensors[t].role == TensorRole::kActivation && (made_by[t] == kNone || made_by[t] >= o))
        return Bad(op.name + ": input " + g.tensors[t].name + " is not produced before it");
    }
    for (TensorId t : op.outputs) {
      if (t >= g.tensors.size()) return Bad(op.name + ": output id out of range");
      if (made_by[t] != kNone) return Bad(g.tensors[t].name + " is produced twice");
      if (g.tensors[t].producer != o) return Bad(g.tensors[t].name + ": producer disagrees with " + op.name);
      made_by[t] = o;
    }
  }
  for (TensorId t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].role == TensorRole::kActivation && made_by[t] == kNone)
      return Bad(g.tensors[t].name + ": activation without a producer");
  MEMSIM_RETURN_IF_ERROR(CheckRoleList(g, g.inputs, TensorRole::kInput, "inputs"));
  MEMSIM_RETURN_IF_ERROR(CheckRoleList(g, g.parameters, TensorRole::kParameter, "parameters"));
  MEMSIM_RETURN_IF_ERROR(CheckRoleList(g, g.buffers, TensorRole::kBuffer, "buffers"));
  if (g.loss != kNone && g.loss >= g.tensors.size()) return Bad("loss id out of range");
  return Status::OK();
}

Status VerifyBoundGraph(const Graph& g, const BoundGraph& b) {
  if (b.metas.size() != g.tensors.size() || b.owner.size() != g.tensors.size() ||
      b.last_use.size() != g.tensors.size())
    return Bad("bound graph sizes differ from the graph's");
  for (TensorId t = 0; t < g.tensors.size(); ++t) {
    TensorId o = b.owner[t];
    if (o >= g.tensors.size() || b.owner[o] != o) return Bad(g.tensors[t].name + ": owner is not a fresh storage");
    if (o != t && g.tensors[t].role != TensorRole::kActivation)
      return Bad(g.tensors[t].name + ": a leaf tensor aliases another");
    if (o != t && g.tensors[o].producer != kNone && g.tensors[o].producer > g.tensors[t].producer)
      return Bad(g.tensors[t].name + ": aliases a storage made after it");
    if (b.metas[t].bytes() < 0) return Bad(g.tensors[t].name + ": negative size");
    if (b.last_use[t] != kNone && g.tensors[t].producer != kNone && b.last_use[t] < g.tensors[t].producer)
      return Bad(g.tensors[t].name + ": last used before it is produced");
  }
  return Status::OK();
}

Status VerifyEventStream(const EventStream& s) {
  std::vector<uint8_t> state(s.buffers.size(), 0);  // 0 never allocated, 1 live, 2 freed
  Phase last = Phase::kSetup;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    std::string at = "events[" + std::to_string(i) + "]";
    if (e.buffer >= s.buffers.size()) return Bad(at + ": buffer out of range");
    // Phases run in order; an accumulation goes back from backward to forward for its next pass,
    // and a new training step (EventStream::step_starts, --steps) starts over.
    bool new_step = std::find(s.step_starts.begin(), s.step_starts.end(), i) != s.step_starts.end();
    if (new_step) last = Phase::kForward;
    if (e.phase < last && !(last == Phase::kBackward && e.phase == Phase::kForward)) return Bad(at + ": phase goes back");
    last = e.phase;
    if (s.buffers[e.buffer].bytes < 0) return Bad(at + ": negative size");
    if (e.kind == EventKind::kAlloc) {
      if (state[e.buffer] != 0) return Bad(at + ": " + s.buffers[e.buffer].name + " allocated twice");
      state[e.buffer] = 1;
    } else {
      if (state[e.buffer] != 1) return Bad(at + ": " + s.buffers[e.buffer].name + " freed while not live");
      state[e.buffer] = 2;
    }
  }
  return Status::OK();
}

}  // namespace memsim::testing
