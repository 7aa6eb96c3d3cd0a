// Reports of the many-configuration commands: a sweep's table (JSON, CSV, text), `fit`'s
// largest batch and `advise`'s ranked changes (JSON, text). Typed values in, bytes out; pure.
#ifndef MEMSIM_SIM_REPORT_SWEEP_REPORT_H_
#define MEMSIM_SIM_REPORT_SWEEP_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/advise.h"
#include "sim/sweep.h"

namespace memsim {

/// A finished sweep: its spec (axes, base) and one row per configuration, in product order.
struct SweepTable {
  std::string model;
  const SweepSpec* spec = nullptr;
  std::vector<SweepRow> rows;
};

/// One row's results as JSON ({"error"} or the peaks and the OOM message).
nlohmann::ordered_json ToJson(const SweepRow& r);
/// {"model", "capacity_bytes", "configurations": [every axis value + the row's results]}.
nlohmann::ordered_json ToJson(const SweepTable& t);
/// Text (|csv| false: human bytes, two-space separated) or CSV (bytes as integers); shows the
/// axes that vary, and the batch.
std::string ToText(const SweepTable& t, bool csv);

struct FitReport {
  std::string model;
  int64_t capacity_bytes = 0;
  int64_t max_batch_limit = 0;  ///< the upper end of the search
  FitResult fit;
};
nlohmann::ordered_json ToJson(const FitReport& r);
std::string ToText(const FitReport& r);

nlohmann::ordered_json ToJson(const AdviseReport& r);
std::string ToText(const AdviseReport& r);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_SWEEP_REPORT_H_
