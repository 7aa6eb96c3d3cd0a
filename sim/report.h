// Reports of a simulated step: JSON (stable key order, for tools and golden tests) and text
// (for people). Pure functions.
#ifndef MEMSIM_SIM_REPORT_H_
#define MEMSIM_SIM_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "sim/simulator.h"

namespace memsim {

/// The `memsim run --json` document: peak_live_bytes, phase_peaks, breakdown_at_peak,
/// top_tensors_at_peak, ... |top| limits the tensor list.
nlohmann::ordered_json RunReportJson(const Graph& g, const SimOptions& opt, const SimResult& r, int top);

/// The text form of the same report.
std::string RunReportText(const Graph& g, const SimOptions& opt, const SimResult& r, int top);

/// "1.23 GiB", "512 B".
std::string HumanBytes(int64_t bytes);

/// The event stream as text, one line per event: `A|F <phase> <bytes> <buffer> <category>`.
std::string EventsText(const EventStream& s);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_H_
