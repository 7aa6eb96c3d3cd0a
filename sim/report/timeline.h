// Memory-over-time exports of a simulated step, every point tagged with its tensor, op, module,
// phase and category: a Chrome trace (open in Perfetto or chrome://tracing) and a
// self-contained HTML page (an SVG stacked-area plot by category, no scripts fetched). Pure,
// deterministic functions.
#ifndef MEMSIM_SIM_REPORT_TIMELINE_H_
#define MEMSIM_SIM_REPORT_TIMELINE_H_

#include <nlohmann/json.hpp>
#include <string>

#include "lib/stream/events.h"
#include "lib/analysis/peak.h"
#include "lib/ir/graph.h"

namespace memsim {

/// Chrome trace-event JSON: one counter track of live bytes per category, one slice per run of
/// events of the same op (forward or backward), an instant event per allocation of at least
/// |min_alloc_bytes| naming its tensor, and one at the peak. Time is the event index (µs).
nlohmann::ordered_json ChromeTrace(const Graph& g, const EventStream& s, const PeakReport& p,
                                   int64_t min_alloc_bytes);

/// A standalone HTML page: the stacked plot, phase bands, the peak, and the tensors alive then.
std::string HtmlTimeline(const Graph& g, const EventStream& s, const PeakReport& p, int top);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_TIMELINE_H_
