// The renderings of sim/figures.h's MemoryFigures shared by every report: the same JSON keys in
// `run --json`, sweep rows (JSON, JSONL), fit, advise and the per-rank entries; the CSV and text
// sweep columns of the same names; and the verdict line. Pure functions.
#ifndef MEMSIM_SIM_REPORT_FIGURES_REPORT_H_
#define MEMSIM_SIM_REPORT_FIGURES_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/figures.h"

namespace memsim {

/// peak_live_bytes, peak_phase, peak_allocated_bytes, peak_reserved_bytes,
/// peak_device_used_bytes, capacity_bytes, oom, oom_op, oom_phase, verdict (null: not known).
nlohmann::ordered_json FiguresJson(const MemoryFigures& f);

/// The sweep table's figure columns (CSV header and text), named as the JSON keys.
std::vector<std::string> FigureColumns();
/// |f|'s cells of those columns: bytes as integers (|csv|) or human-readable.
std::vector<std::string> FigureCells(const MemoryFigures& f, bool csv);

/// "fits on V100-16GB: device used X of Y" or "does not fit on V100-16GB: would need X of Y,
/// OOM at op Z (phase)", with the uncertainty range's verdict after it; "" without a capacity.
/// |gpu|: --gpu's name ("" : "the device").
std::string VerdictLine(const MemoryFigures& f, const std::string& gpu);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_FIGURES_REPORT_H_
