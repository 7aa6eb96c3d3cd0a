#include "sim/report/recorded_report.h"

#include <cstdio>
#include <set>

#include "sim/report/format.h"

namespace memsim {
namespace {

std::string Label(const Op& op) { return op.name + " (" + op.attrs.GetString("target", "?") + ")"; }

}  // namespace

std::optional<RecordedRulesReport> MakeRecordedRulesReport(const Graph& g, const SimResult& s) {
  RecordedRulesReport r;
  std::set<uint32_t> recorded;
  for (size_t k = 0; k < g.ops.size(); ++k)
    if (g.ops[k].kind == OpKind::kRecorded) {
      recorded.insert(static_cast<uint32_t>(k));
      r.ops.push_back(Label(g.ops[k]));
    }
  if (recorded.empty()) return std::nullopt;
  for (uint32_t b : s.peak.live_at_peak)
    if (recorded.count(s.events.buffers[b].op)) r.bytes_at_peak += s.events.buffers[b].bytes;
  for (const MemEvent& e : s.events.events) {
    if (e.kind != EventKind::kAlloc || !recorded.count(s.events.buffers[e.buffer].op)) continue;
    if (e.phase == Phase::kForward) r.forward_allocated += s.events.buffers[e.buffer].bytes;
    if (e.phase == Phase::kBackward) r.backward_allocated += s.events.buffers[e.buffer].bytes;
  }
  if (s.peak.peak_live_bytes > 0) r.share_of_peak = static_cast<double>(r.bytes_at_peak) / s.peak.peak_live_bytes;
  return r;
}

Status RefuseRecordedRules(const Graph& g) {
  size_t n = 0;
  const Op* first = nullptr;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::kRecorded && n++ == 0) first = &op;
  if (!first) return Status::OK();
  return Status::InvalidArgument("--strict: " + std::to_string(n) + " op(s) run on recorded rules (measured by the "
                                 "exporter, no memsim rule), first " + Label(*first) + " at " + first->pointer +
                                 ": drop --strict to accept the measured approximation");
}

nlohmann::ordered_json ToJson(const RecordedRulesReport& r) {
  return {{"ops", r.ops},
          {"bytes_at_peak", r.bytes_at_peak},
          {"share_of_peak", r.share_of_peak},
          {"allocated", {{"forward", r.forward_allocated}, {"backward", r.backward_allocated}}}};
}

std::string ToText(const RecordedRulesReport& r) {
  std::string ops;
  for (const std::string& s : r.ops) ops += (ops.empty() ? "" : ", ") + s;
  char share[32];
  std::snprintf(share, sizeof share, "%.1f", 100.0 * r.share_of_peak);
  return "recorded rules: " + std::to_string(r.ops.size()) + " op" + (r.ops.size() == 1 ? "" : "s") + " (" + ops +
         "): " + HumanBytes(r.bytes_at_peak) + " at the peak (" + share + " % of it)\n";
}

}  // namespace memsim
