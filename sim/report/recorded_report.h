// Ops that ran on recorded rules (Note [Recorded rules] in docs/op-rules.md): rules the exporter
// measured for ops memsim has no rule for. The run report names them and the share of the peak
// held by the tensors they made; `memsim run --strict` refuses a graph that has any.
#ifndef MEMSIM_SIM_REPORT_RECORDED_REPORT_H_
#define MEMSIM_SIM_REPORT_RECORDED_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/simulator.h"

namespace memsim {

struct RecordedRulesReport {
  std::vector<std::string> ops;  ///< "name (target)" of each op on a recorded rule, in graph order
  int64_t bytes_at_peak = 0;     ///< bytes alive at the peak that these ops allocated
  double share_of_peak = 0;      ///< bytes_at_peak / the peak live bytes
  /// Bytes these ops allocated over the step (outputs, buffers, grads), in the forward and the backward.
  int64_t forward_allocated = 0, backward_allocated = 0;
  /// Ops whose output sizes depend on their inputs' values (nms, nonzero, unique: attribute
  /// "data_dependent"), kept at the sizes of the input the graph was exported by execution with
  /// (Note [Data-dependent sizes] in docs/exporter.md), "name (target or op)", in graph order.
  std::vector<std::string> data_dependent;
};

/// The recorded and data-dependent ops of |g| and the recorded ops' share of |s|'s peak; nullopt
/// when |g| has neither.
std::optional<RecordedRulesReport> MakeRecordedRulesReport(const Graph& g, const SimResult& s);

/// --strict: an error naming the first recorded op when |g| has any (exit 2), else OK.
Status RefuseRecordedRules(const Graph& g);

nlohmann::ordered_json ToJson(const RecordedRulesReport& r);
/// "recorded rules: N ops (...): X at the peak (Y % of it)", and "data-dependent sizes: ..." when
/// the graph has such ops; a target that several ops share is written once, "target ×N".
std::string ToText(const RecordedRulesReport& r);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_RECORDED_REPORT_H_
