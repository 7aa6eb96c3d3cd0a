// Memory-over-time exports of a simulated step, every point tagged with its tensor, op, module,
// phase and category: a Chrome trace (open in Perfetto or chrome://tracing) and a
// self-contained HTML page (an SVG stacked-area plot by category with axes, labelled lines and
// per-point tooltips; one panel per distinct rank; no scripts fetched). With the device levels,
// both also draw reserved memory and device used (nvidia-smi) as lines and the capacity as a
// limit, so fragmentation and headroom show over the step. Pure, deterministic.
// docs/cli.md, Notes [Timeline page] and [Timeline clock].
#ifndef MEMSIM_SIM_REPORT_TIMELINE_H_
#define MEMSIM_SIM_REPORT_TIMELINE_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/analysis/peak.h"
#include "lib/ir/graph.h"
#include "lib/stream/events.h"
#include "sim/figures.h"
#include "sim/pipeline.h"
#include "sim/ranks.h"

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
  /// The run's figures (sim/figures.h): the page's headline is plot()'s ("peak reserved X GiB,
  /// allocated Y GiB", "would need" after an OOM). nullopt: the headline gives the live peak.
  std::optional<MemoryFigures> figures;
};

/// Reserved bytes after each event from the caching model's placement (per event, the bytes
/// its cudaMalloc obtained; the caching allocator returns none during a step without an OOM).
std::vector<int64_t> ReservedSeries(const std::vector<int64_t>& segment_bytes);

/// The levels of a run over |g| (the reserved line needs the recorded placement; the capacity and
/// the OOM are drawn whenever a capacity was given), with its figures against |capacity_bytes|
/// (the configuration's, as every report: c.alloc.capacity_bytes).
TimelineLevels LevelsOf(const Graph& g, const RunResult& r, int64_t capacity_bytes);

/// One panel of the page: a distinct rank (or the one GPU).
struct TimelinePanel {
  std::string label;  ///< "" on one GPU; "rank 0", "ranks 1-3"
  const EventStream* events = nullptr;
  const PeakReport* peak = nullptr;
  TimelineLevels levels;
};

/// The panel of run |r| of the ranks |ranks| (labelled only with c.sim.parallel on). It points
/// into |r|.
TimelinePanel PanelOf(const Graph& g, const RunConfig& c, const std::vector<int>& ranks, const RunResult& r);
/// One panel per distinct rank of |runs| (RunRanks; one unlabelled panel on one GPU). The
/// panels point into |runs|.
std::vector<TimelinePanel> PanelsOf(const Graph& g, const RunConfig& c, const std::vector<RankRun>& runs);

/// Chrome trace-event JSON: one counter track of live bytes per category, one slice per run of
/// events of the same op (forward or backward), an instant event per allocation of at least
/// |min_alloc_bytes| naming its tensor, and one at the peak. The time axis is a labelled
/// synthetic clock: op order, one op = 1 ms (Note [Timeline clock]).
/// StreamChromeTrace hands the text to |sink| in chunks of about 1 MiB as it is made (the
/// document is never held whole) and returns the sink's first error; ChromeTraceText collects
/// it; ChromeTrace parses it (for tests).
Status StreamChromeTrace(const Graph& g, const EventStream& s, const PeakReport& p, int64_t min_alloc_bytes,
                         const TimelineLevels& levels, const std::function<Status(std::string_view)>& sink);
std::string ChromeTraceText(const Graph& g, const EventStream& s, const PeakReport& p, int64_t min_alloc_bytes,
                            const TimelineLevels& levels = {});
nlohmann::ordered_json ChromeTrace(const Graph& g, const EventStream& s, const PeakReport& p,
                                   int64_t min_alloc_bytes, const TimelineLevels& levels = {});

/// What the page draws, as data (embedded in the page as JSON, golden-tested): per panel the
/// headline, the axis unit and ticks, phases, steps, the peak, capacity and OOM marks and the
/// sampled points (at most ~1000: each the largest total of its bucket of events).
nlohmann::ordered_json TimelineData(const Graph& g, const std::vector<TimelinePanel>& panels);

/// A standalone HTML page: per panel the stacked plot with GiB (or MiB) gridlines, labelled
/// phases, steps, peak, capacity and OOM, tooltips per point, and the tensors alive at the peak.
std::string HtmlTimeline(const Graph& g, const std::vector<TimelinePanel>& panels, int top);
/// One panel (a single GPU).
std::string HtmlTimeline(const Graph& g, const EventStream& s, const PeakReport& p, int top,
                         const TimelineLevels& levels = {});

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_TIMELINE_H_
