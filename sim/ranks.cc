#include "sim/ranks.h"

#include <algorithm>

namespace memsim {
namespace {

/// Whether the ranks' streams can differ: the greedy whole-parameter partition of
/// ZeroRedundancyOptimizer (Note [ZeRO]).
bool RanksDiffer(const RunConfig& c) {
  // FSDP2: a parameter whose dim 0 the world does not divide leaves the last ranks fewer rows
  // (Note [FSDP2]); every rank is simulated and identical ones merged.
  if (c.sim.parallel.mesh.dp_shard > 1) return true;
  // Context parallel: each rank's ring takes its own branches (Note [Context parallel]).
  if (c.sim.parallel.mesh.cp > 1) return true;
  if (c.sim.parallel.zero_stage == 0 || c.sim.parallel.world <= 1) return false;
  auto profile = FindProfile(c.sim.profile, c.sim.torch);
  return profile && profile->zero_whole_parameters;
}

}  // namespace

/// Tensor parallel: the tp group's first rank scatters every shard (Note [Tensor parallel]).
bool TpSourceDiffers(const RunConfig& c) { return c.sim.parallel.mesh.tp > 1; }

/// Expert parallel: every rank receives its own rows, and the first one scatters the experts'
/// shards (Note [Expert parallel]): every rank is simulated, identical ones merged.
bool ExpertsDiffer(const RunConfig& c) { return c.sim.parallel.mesh.ep > 1; }

/// Pipeline parallel: every stage holds other ops (Note [Pipeline parallel]).
bool StagesDiffer(const RunConfig& c) { return c.sim.parallel.mesh.pp > 1; }

bool RanksMayDiffer(const RunConfig& c) {
  return RanksDiffer(c) || ExpertsDiffer(c) || TpSourceDiffers(c) || StagesDiffer(c) || (c.sim.parallel.data_parallel && c.sim.parallel.world > 1);
}

bool SameStream(const EventStream& a, const EventStream& b) {
  if (a.events.size() != b.events.size()) return false;
  for (size_t i = 0; i < a.events.size(); ++i) {
    const MemEvent& x = a.events[i];
    const MemEvent& y = b.events[i];
    if (x.kind != y.kind || x.phase != y.phase || a.bytes(x) != b.bytes(y)) return false;
  }
  return true;
}

namespace {

int64_t ChunkOf(int64_t batch, int world, int d) { return DataParallelChunk(batch, world, d); }

Result<RankRun> RunRank(const Graph& g, const RunConfig& c, int rank) {
  RunConfig rc = c;
  rc.sim.parallel.rank = rank;
  MEMSIM_ASSIGN_OR_RETURN(RunResult r, RunPipeline(g, rc));
  return RankRun{{rank}, std::move(r)};
}

}  // namespace

Result<std::vector<RankRun>> RunRanks(const Graph& g, const RunConfig& c) {
  std::vector<RankRun> runs;
  const ParallelOptions& p = c.sim.parallel;
  const int world = p.enabled() ? p.world : 1;
  // The ranks to simulate: all when partitions differ; under DataParallel device 0 and one
  // device per distinct chunk size; otherwise rank 0 alone.
  std::vector<int> simulate = {0};
  // FSDP2 × TP or × PP, PP × TP (the 2-D and 3-D meshes): a rank's shards follow its dp_shard
  // coordinate, its setup its tp one (the group's first rank scatters), its stage its pp one: tp 0
  // and 1 of each distinct dp_shard coordinate of each stage.
  const bool mesh2d = (RanksDiffer(c) && (TpSourceDiffers(c) || StagesDiffer(c))) || (TpSourceDiffers(c) && StagesDiffer(c));
  const int shards = static_cast<int>(std::min<size_t>(static_cast<size_t>(p.mesh.dp_shard), g.parameters.size() + 1));
  auto stand_in = [&](int rank) {  // the simulated rank a 2-D mesh rank is identical to
    MeshCoord k = CoordOf(p.mesh, rank);
    return ((k.pp * p.mesh.dp_replicate * p.mesh.dp_shard + std::min(k.dp_shard, shards - 1)) * p.mesh.cp) * p.mesh.tp +
           std::min(k.tp, 1);
  };
  if (mesh2d) {
    for (int r = 1; r < world; ++r)
      if (stand_in(r) == r) simulate.push_back(r);
  } else if (ExpertsDiffer(c)) {
    for (int r = 1; r < world; ++r) simulate.push_back(r);
  } else if (RanksDiffer(c)) {
    // Ranks beyond the parameter count get an empty partition each: one of them is simulated.
    const int distinct = static_cast<int>(std::min<size_t>(static_cast<size_t>(world), g.parameters.size() + 1));
    for (int r = 1; r < distinct; ++r) simulate.push_back(r);
  } else if (StagesDiffer(c)) {  // the first rank of each stage (the others are its copies)
    for (int r = 1; r < world; ++r)
      if (CoordOf(p.mesh, r).pp != CoordOf(p.mesh, r - 1).pp) simulate.push_back(r);
  } else if (TpSourceDiffers(c)) {
    simulate.push_back(1);  // stands for every rank but the tp groups' first ones
  } else if (p.data_parallel) {
    auto it = c.sim.symbols.find("batch");
    if (it == c.sim.symbols.end()) return Status::InvalidArgument("--data-parallel needs --batch (the whole batch)");
    const int64_t batch = it->second;
    for (int d = 1; d < world; ++d) {
      const int64_t chunk = ChunkOf(batch, world, d);
      bool seen = chunk == 0;
      for (int q : simulate) seen = seen || (q > 0 && ChunkOf(batch, world, q) == chunk);
      if (!seen) simulate.push_back(d);
    }
  }
  for (int rank : simulate) {
    MEMSIM_ASSIGN_OR_RETURN(RankRun run, RunRank(g, c, rank));
    bool merged = false;
    for (RankRun& other : runs)
      if (SameStream(other.result.sim.events, run.result.sim.events) && !p.data_parallel) {
        other.ranks.push_back(rank);
        merged = true;
        break;
      }
    if (!merged) runs.push_back(std::move(run));
  }
  // The ranks not simulated stand with the simulated one they are identical to.
  for (int rank = 0; rank < world; ++rank) {
    if (std::find(simulate.begin(), simulate.end(), rank) != simulate.end()) continue;
    RankRun* same = RanksDiffer(c) ? &runs.back() : &runs.front();  // ZeRO-1: empty partitions
    if (TpSourceDiffers(c)) same = CoordOf(p.mesh, rank).tp == 0 ? &runs.front() : &runs.back();
    if (mesh2d)
      for (RankRun& run : runs)
        if (std::find(run.ranks.begin(), run.ranks.end(), stand_in(rank)) != run.ranks.end()) same = &run;
    if (StagesDiffer(c) && !mesh2d)
      for (RankRun& run : runs)
        if (CoordOf(p.mesh, run.ranks.front()).pp == CoordOf(p.mesh, rank).pp) same = &run;
    if (p.data_parallel) {
      auto it = c.sim.symbols.find("batch");
      const int64_t chunk = ChunkOf(it->second, world, rank);
      if (chunk == 0) continue;  // DataParallel uses only the devices that get a chunk
      for (RankRun& run : runs)
        if (run.ranks.front() > 0 && ChunkOf(it->second, world, run.ranks.front()) == chunk) same = &run;
    }
    same->ranks.push_back(rank);
  }
  for (RankRun& run : runs) std::sort(run.ranks.begin(), run.ranks.end());
  return runs;
}

}  // namespace memsim
