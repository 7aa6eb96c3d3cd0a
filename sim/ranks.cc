#include "sim/ranks.h"

namespace memsim {
namespace {

/// Whether the ranks' streams can differ: the greedy whole-parameter partition of
/// ZeroRedundancyOptimizer (Note [ZeRO]).
bool RanksDiffer(const RunConfig& c) {
  if (c.sim.parallel.zero_stage == 0 || c.sim.parallel.world <= 1) return false;
  auto profile = FindProfile(c.sim.profile);
  return profile && profile->zero_whole_parameters;
}

}  // namespace

bool SameStream(const EventStream& a, const EventStream& b) {
  if (a.events.size() != b.events.size()) return false;
  for (size_t i = 0; i < a.events.size(); ++i) {
    const MemEvent& x = a.events[i];
    const MemEvent& y = b.events[i];
    if (x.kind != y.kind || x.phase != y.phase || a.bytes(x) != b.bytes(y)) return false;
  }
  return true;
}

Result<std::vector<RankRun>> RunRanks(const Graph& g, const RunConfig& c) {
  std::vector<RankRun> runs;
  const int world = c.sim.parallel.enabled() ? c.sim.parallel.world : 1;
  const int simulated = RanksDiffer(c) ? world : 1;
  for (int rank = 0; rank < simulated; ++rank) {
    RunConfig rc = c;
    rc.sim.parallel.rank = rank;
    MEMSIM_ASSIGN_OR_RETURN(RunResult r, RunPipeline(g, rc));
    bool merged = false;
    for (RankRun& run : runs)
      if (SameStream(run.result.sim.events, r.sim.events)) {
        run.ranks.push_back(rank);
        merged = true;
        break;
      }
    if (!merged) runs.push_back(RankRun{{rank}, std::move(r)});
  }
  // Ranks not simulated (identical to rank 0 by construction) are listed with it.
  for (int rank = simulated; rank < world; ++rank) runs.front().ranks.push_back(rank);
  return runs;
}

}  // namespace memsim
