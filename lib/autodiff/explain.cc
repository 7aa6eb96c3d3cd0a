// Explain: who holds each live storage at one moment of the step (run --explain).
#include <map>

#include "lib/autodiff/state.h"
#include "lib/ir/compiled_recompute.h"

namespace memsim {
namespace {

using Why = std::map<StorageId, std::vector<std::string>>;

/// Holders named by the graph: parameters, buffers, inputs, the caller's and Python's names.
void TensorHolders(const StepState& s, Why* why) {
  const Graph& g = s.g;
  const uint32_t op = s.ledger.op();
  const bool forward = s.phase == Phase::kForward;
  for (TensorId t = 0; t < g.tensors.size(); ++t) {
    StorageId st = s.storage[t];
    if (st == kNoStorage) continue;
    const Tensor& tensor = g.tensors[t];
    switch (tensor.role) {
      case TensorRole::kParameter: (*why)[st].push_back("parameter " + tensor.name); break;
      case TensorRole::kBuffer: (*why)[st].push_back("module buffer " + tensor.name); break;
      case TensorRole::kInput: (*why)[st].push_back("input " + tensor.name + " (held by the caller)"); break;
      case TensorRole::kActivation:
        if (s.held[t]) {
          (*why)[st].push_back("\"" + tensor.name + "\" held by the caller until after backward (model output / loss)");
        } else if (forward && s.bound.last_use[t] != kNone && s.bound.last_use[t] >= op && tensor.producer <= op) {
          (*why)[st].push_back("Python name \"" + tensor.name + "\", used until " + g.ops[s.bound.last_use[t]].name);
        }
        break;
    }
  }
}

/// Holders inside autograd and the optimizer: saved tensors, InputBuffers, .grad, state.
void EngineHolders(const StepState& s, Why* why) {
  const Graph& g = s.g;
  for (OpId o = 0; o < s.nodes.size(); ++o) {
    const Node& n = s.nodes[o];
    for (size_t k = 0; k < n.saved.size(); ++k)
      if (!n.released[k]) (*why)[n.saved[k]].push_back("saved by " + g.ops[o].name + " for its backward");
    for (size_t slot = 0; slot < n.buffer.size(); ++slot)
      if (n.buffer[slot].defined())
        (*why)[n.buffer[slot].s].push_back("grad of \"" + g.tensors[g.ops[o].outputs[slot]].name + "\" waiting for " +
                                           g.ops[o].name + "'s backward");
  }
  for (size_t k = 0; k < g.parameters.size(); ++k) {
    const std::string& name = g.tensors[g.parameters[k]].name;
    if (s.param_grad[k] != kNoStorage) (*why)[s.param_grad[k]].push_back(".grad of " + name + " (until zero_grad)");
    if (s.param_buffer[k].defined()) (*why)[s.param_buffer[k].s].push_back("grad of " + name + " being accumulated");
  }
  for (StorageId st : s.states) (*why)[st].push_back("optimizer state");
  if (auto w = s.workspaces.of(LibraryWorkspaces::kMainThread))
    (*why)[*w].push_back("cuBLAS workspace (kept for the process lifetime)");
  if (auto w = s.workspaces.of(LibraryWorkspaces::kAutogradThread))
    (*why)[*w].push_back("cuBLAS workspace of the autograd thread (kept for the process lifetime)");
  if (auto w = s.workspaces.lt_of(LibraryWorkspaces::kMainThread))
    (*why)[*w].push_back("cuBLASLt workspace (kept for the process lifetime)");
  if (auto w = s.workspaces.lt_of(LibraryWorkspaces::kAutogradThread))
    (*why)[*w].push_back("cuBLASLt workspace of the autograd thread (kept for the process lifetime)");
}

/// What holds a storage only the running op uses: the op itself, or, for a compiled region's
/// backward buffer that holds recomputed forward values, the recomputation (Note [Compiled regions]).
std::string InUse(const StepState& s, StorageId st) {
  const uint32_t op = s.ledger.op();
  if (op >= s.g.ops.size()) return "in use inside " + std::string(PhaseName(s.phase));
  const Op& o = s.g.ops[op];
  const std::string_view name = s.ledger.name(st);
  if (s.phase == Phase::kBackward && o.kind == OpKind::kCompiled && name.size() > o.name.size() + 1 &&
      name.substr(0, o.name.size()) == o.name && name[o.name.size()] == ':')
    if (auto nodes = RecomputedNodesOf(o, name.substr(o.name.size() + 1)))
      return "recomputed in backward by " + o.name + " (" + *nodes + ")";
  return "in use inside " + o.name + " (" + std::string(PhaseName(s.phase)) + ")";
}

}  // namespace

std::vector<Retention> ExplainState(const StepState& s) {
  Why why;
  TensorHolders(s, &why);
  EngineHolders(s, &why);
  std::vector<Retention> out;
  for (StorageId st : s.ledger.Live()) {
    Retention r{st, why.count(st) ? why[st] : std::vector<std::string>{}};
    if (r.held_by.empty()) r.held_by.push_back(InUse(s, st));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace memsim
