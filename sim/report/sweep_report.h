// Reports of the many-configuration commands: a sweep's table (JSON, CSV, text), `fit`'s
// largest batch and `advise`'s ranked changes (JSON, text). Typed values in, bytes out; pure.
#ifndef MEMSIM_SIM_REPORT_SWEEP_REPORT_H_
#define MEMSIM_SIM_REPORT_SWEEP_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/advise.h"
#include "sim/fit.h"
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

// Streaming: a sweep written row by row (ToText is the header then every row). Files written
// with --out carry the configuration index first (kCsv/kJsonl with |index|) and a metadata line
// (SweepMetaLine) so that they can be resumed and merged.
enum class SweepFormat : uint8_t { kText, kCsv, kJsonl };
/// The column header line of |f| ("" for kJsonl).
std::string SweepHeaderLine(const SweepSpec& spec, SweepFormat f, bool index);
/// Row |i| of |spec| as one line (ends with '\n').
std::string SweepRowLine(const SweepSpec& spec, size_t i, const SweepRow& r, SweepFormat f, bool index);
/// What a sweep file is: which sweep (a fingerprint of the model and the axes), how many
/// configurations it has in all, and which shard of them the file holds.
struct SweepMeta {
  std::string model;
  size_t configurations = 0;
  std::string fingerprint;
  size_t shard = 1, shards = 1;  ///< 1-based: shard K of N
  std::string options;  ///< ConfigOptions::Canonical: what a differing fingerprint is explained with
};
/// The fingerprint of a sweep: 16 hex digits over the graph file's content and the canonical
/// options (every option given, ConfigOptions::Canonical), so that any change of either changes it.
std::string SweepFingerprint(const std::string& graph_content, const std::string& options);
/// Why sweep file |file| is not of the sweep |run| describes (the first difference: model,
/// configurations, shards, an option, else the graph's content); "" when they are the same sweep.
std::string SweepMetaMismatch(const SweepMeta& file, const SweepMeta& run);
/// The first line of a sweep file: "# memsim sweep ..." (kCsv) or {"memsim_sweep": ...} (kJsonl).
std::string SweepMetaLine(const SweepMeta& m, SweepFormat f);
/// Parses a line written by SweepMetaLine; error if it is not one.
Result<SweepMeta> ParseSweepMetaLine(const std::string& line, SweepFormat f);

struct FitReport {
  std::string model;
  std::string gpu;  ///< --gpu's name ("" : none)
  int64_t capacity_bytes = 0;
  int64_t max_batch_limit = 0;  ///< the upper end of the search
  FitResult fit;
  std::vector<FitProposal> proposals;  ///< when not even 1 fits: the changes that make it fit
};
nlohmann::ordered_json ToJson(const FitReport& r);
std::string ToText(const FitReport& r);

nlohmann::ordered_json ToJson(const AdviseReport& r);
std::string ToText(const AdviseReport& r);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_SWEEP_REPORT_H_
