// The per-rank part of the run report (--ddp, --zero): one entry per distinct rank, with the
// ranks it stands for, its peaks and its breakdown at the peak, rendered into `memsim run`'s
// JSON (`ranks`) and text.
#ifndef MEMSIM_SIM_REPORT_RANK_REPORT_H_
#define MEMSIM_SIM_REPORT_RANK_REPORT_H_

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/figures.h"
#include "sim/ranks.h"

namespace memsim {

/// One distinct rank: its figures (sim/figures.h, as every report names them) and more.
struct RankReport : MemoryFigures {
  std::vector<int> ranks;  ///< the ranks whose streams this one stands for
  std::array<int64_t, kNumPhases> phase_peaks{};
  std::array<int64_t, kNumCategories> breakdown_at_peak{};
  int64_t host_bytes = 0;  ///< host (CPU) memory the rank needs beyond the device (offload)
  /// A pipeline stage's timeline (Note [Pipeline parallel]): each schedule action in order with
  /// the live bytes at its start and its peak; empty without pipeline parallelism.
  struct Action {
    std::string label;
    int64_t start = 0, peak = 0;
  };
  std::vector<Action> schedule;
};

/// The distributed setup of a run: the world, the scheme, and every distinct rank.
struct RanksReport {
  int world = 1;
  std::string scheme;  ///< "ddp", "zero1", "zero2", "ddp+zero1", "mesh tp=2"
  std::vector<RankReport> ranks;
};

RanksReport MakeRanksReport(const Graph& g, const RunConfig& c, const std::vector<RankRun>& runs);
nlohmann::ordered_json ToJson(const RanksReport& r);
std::string ToText(const RanksReport& r);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_RANK_REPORT_H_
