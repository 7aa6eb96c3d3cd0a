// FSDP2's parameter groups of one rank (fully_shard's FSDPParamGroups: each wrapped module, then
// the root) and each parameter's shard; Note [FSDP2] in docs/parallel.md.
#include <algorithm>
#include <utility>

#include "lib/autodiff/setups/fsdp2.h"
#include "lib/autodiff/setups/sharded.h"

namespace memsim {

Fsdp2Shard ShardDim(const std::vector<int64_t>& sizes, int dim, int world, int rank) {
  Fsdp2Shard s;
  s.dim = sizes.size() > static_cast<size_t>(dim) ? dim : 0;
  s.rows = sizes.empty() ? 1 : sizes[s.dim];
  s.row_numel = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (d != static_cast<size_t>(s.dim)) s.row_numel *= sizes[d];
  const int64_t w = std::max(world, 1);
  s.padded_rows = (s.rows + w - 1) / w;  // torch.chunk: chunks of ceil(rows / world) rows
  s.local_rows = std::clamp<int64_t>(s.rows - rank * s.padded_rows, 0, s.padded_rows);
  return s;
}

Fsdp2Shard ShardDim0(const std::vector<int64_t>& sizes, int world, int rank) { return ShardDim(sizes, 0, world, rank); }

namespace {

/// A call's expert weights as a group of their own, right after the call's first group.
void SplitExperts(const BoundGraph& b, const Graph& g, const Fsdp2Experts& e, std::vector<Fsdp2Group>* groups) {
  for (size_t u = 0; u < groups->size(); ++u) {
    Fsdp2Group& grp = (*groups)[u];
    Fsdp2Group ex = grp;
    ex.params.clear();
    ex.shards.clear();
    ex.shard_numel = 0;
    ex.world = e.world;
    Fsdp2Group dense = grp;
    dense.params.clear();
    dense.shards.clear();
    dense.shard_numel = 0;
    bool experts_first = false;
    for (size_t i = 0; i < grp.params.size(); ++i) {
      const TensorId t = g.parameters[grp.params[i]];
      const bool expert = std::find(e.params.begin(), e.params.end(), t) != e.params.end();
      if (expert && dense.params.empty()) experts_first = true;
      Fsdp2Group& to = expert ? ex : dense;
      to.params.push_back(grp.params[i]);
      to.shards.push_back(expert ? ShardDim(b.metas[t].sizes, e.dim, e.world, e.rank) : grp.shards[i]);
      to.shard_numel += to.shards.back().padded_numel();
    }
    if (ex.params.empty()) continue;
    if (dense.params.empty()) {  // the call's parameters are all experts: one group on efsdp
      grp = std::move(ex);
      continue;
    }
    grp = experts_first ? std::move(ex) : std::move(dense);
    groups->insert(groups->begin() + static_cast<std::ptrdiff_t>(u) + 1, experts_first ? std::move(dense) : std::move(ex));
    ++u;
  }
}

}  // namespace

std::vector<Fsdp2Group> MakeFsdp2Groups(const Graph& g, const BoundGraph& b, const std::vector<std::string>& wrapped,
                                        int world, int rank, OpId begin, OpId end, const Fsdp2Experts* experts) {
  const bool whole = begin == 0 && (end == kNone || end >= g.ops.size());
  if (end == kNone || end > g.ops.size()) end = static_cast<OpId>(g.ops.size());
  std::vector<Fsdp2Group> groups;
  for (const std::string& w : wrapped) {
    groups.emplace_back();
    groups.back().module = w;
  }
  groups.push_back(Fsdp2Group{});  // the root
  groups.back().root = true;
  auto innermost = [&](const std::string& module) -> size_t {
    size_t best = groups.size() - 1;
    for (size_t i = 0; i + 1 < groups.size(); ++i)
      if (WithinModule(module, groups[i].module) && (best == groups.size() - 1 || groups[i].module.size() > groups[best].module.size()))
        best = i;
    return best;
  };
  // A stage module holds the parameters its ops read (the whole model: every parameter).
  std::vector<bool> mine(g.tensors.size(), whole);
  for (OpId o = begin; !whole && o < end; ++o)
    for (TensorId t : g.ops[o].inputs) mine[t] = true;
  for (size_t k = 0; k < g.parameters.size(); ++k) {
    if (!mine[g.parameters[k]]) continue;
    Fsdp2Group& grp = groups[innermost(OwnerModule(g.tensors[g.parameters[k]].name))];
    grp.params.push_back(static_cast<uint32_t>(k));
    grp.shards.push_back(ShardDim0(b.metas[g.parameters[k]].sizes, world, rank));
    grp.shard_numel += grp.shards.back().padded_numel();
  }
  // The model's forward: up to the op producing its last output (the loss after it).
  OpId model_end = g.ops.empty() ? kNone : static_cast<OpId>(g.ops.size() - 1);
  if (!g.outputs.empty()) {
    model_end = 0;
    for (TensorId t : g.outputs)
      if (g.tensors[t].producer != kNone) model_end = std::max(model_end, g.tensors[t].producer);
  }
  if (model_end != kNone) model_end = std::min<OpId>(model_end, end - 1);
  for (OpId o = begin; o < end && model_end != kNone && o <= model_end; ++o) {
    Fsdp2Group& grp = groups[innermost(g.ops[o].module)];
    grp.ops.push_back(o);
    if (grp.first == kNone) grp.first = o;
    grp.last = o;
  }
  Fsdp2Group& root = groups.back();
  if (model_end != kNone && begin <= model_end) root.first = begin, root.last = model_end;
  // Wrapped modules without parameters are not FSDP modules of their own (no group).
  groups.erase(std::remove_if(groups.begin(), groups.end() - 1, [](const Fsdp2Group& x) { return x.params.empty(); }),
               groups.end() - 1);
  for (size_t u = 0; u < groups.size(); ++u) {
    groups[u].world = world;
    groups[u].call = static_cast<int>(u);
  }
  if (experts != nullptr) SplitExperts(b, g, *experts, &groups);
  return groups;
}


std::vector<bool> NestedGroups(const std::vector<Fsdp2Group>& groups) {
  std::vector<bool> out(groups.size(), false);
  for (size_t u = 0; u < groups.size(); ++u)
    out[u] = !groups[u].root && std::any_of(groups.begin(), groups.end(), [&](const Fsdp2Group& w) {
               return !w.root && w.module != groups[u].module && WithinModule(groups[u].module, w.module);
             });
  return out;
}

std::vector<size_t> NeighbourBlock(const std::vector<Fsdp2Group>& groups, const std::vector<bool>& nested, size_t u,
                                   bool next) {
  auto begins = [&](size_t w) { return w == 0 || groups[w - 1].call != groups[w].call; };
  auto call = [&](size_t w, std::vector<size_t>* out) {
    for (size_t v = w; v < groups.size() && groups[v].call == groups[w].call; ++v) out->push_back(v);
  };
  int best = -1;
  for (size_t w = 0; w < groups.size(); ++w) {
    if (w == u || !begins(w) || groups[w].root || groups[w].stage != groups[u].stage || nested[w]) continue;
    if ((groups[w].first > groups[u].first) != next) continue;
    if (best < 0 || (groups[w].first < groups[best].first) == next) best = static_cast<int>(w);
  }
  std::vector<size_t> out;
  if (best < 0) return out;
  call(best, &out);
  for (size_t w = 0; w < groups.size(); ++w)
    if (begins(w) && nested[w] && WithinModule(groups[w].module, groups[best].module)) call(w, &out);
  return out;
}

}  // namespace memsim
