// Memory-over-time exports of a simulated step, every point tagged with its tensor, op, module,
// phase and category: a Chrome trace (open in Perfetto or chrome://tracing) and a
// self-contained HTML page (an SVG stacked-area plot by category, no scripts fetched). With the
// device levels, both also draw reserved memory and device used (nvidia-smi) as lines and the
// capacity as a limit, so fragmentation and headroom show over the step. Pure, deterministic.
#ifndef MEMSIM_SIM_REPORT_TIMELINE_H_
#define MEMSIM_SIM_REPORT_TIMELINE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/stream/events.h"
#include "lib/analysis/peak.h"
#include "lib/ir/graph.h"
#include "sim/pipeline.h"

namespace memsim {

/// The levels above the live bytes (all empty/0: not drawn).
struct TimelineLevels {
  /// Per event: reserved bytes after it (the caching model; after an OOM, without the capacity
  /// limit: what the step would need, Note [Would need]).
  std::vector<int64_t> reserved;
  bool device = false;            ///< draw device used (cuda): reserved + |overhead_bytes|
  int64_t overhead_bytes = 0;     ///< CUDA context and libraries: device used = reserved + this
  int64_t capacity_bytes = 0;     ///< the device (0: none)
  int64_t oom_event = -1;         ///< where the capacity-limited allocator fails (-1: no OOM)
  std::string oom_op;             ///< its op ("" : none)
};

/// Reserved bytes after each event from the caching model's placement (per event, the bytes
/// its cudaMalloc obtained; the caching allocator returns none during a step without an OOM).
std::vector<int64_t> ReservedSeries(const std::vector<int64_t>& segment_bytes);

/// The levels of a run over |g| (the reserved line needs the recorded placement; the capacity and
/// the OOM are drawn whenever a capacity was given).
TimelineLevels LevelsOf(const Graph& g, const RunResult& r);

/// Chrome trace-event JSON: one counter track of live bytes per category, one slice per run of
/// events of the same op (forward or backward), an instant event per allocation of at least
/// |min_alloc_bytes| naming its tensor, and one at the peak. Time is the event index (µs).
nlohmann::ordered_json ChromeTrace(const Graph& g, const EventStream& s, const PeakReport& p,
                                   int64_t min_alloc_bytes, const TimelineLevels& levels = {});

/// A standalone HTML page: the stacked plot, phase bands, the peak, and the tensors alive then.
std::string HtmlTimeline(const Graph& g, const EventStream& s, const PeakReport& p, int top,
                         const TimelineLevels& levels = {});

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_TIMELINE_H_
