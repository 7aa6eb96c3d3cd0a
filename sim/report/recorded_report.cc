#include "sim/report/recorded_report.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "sim/report/format.h"

namespace memsim {
namespace {

std::string Target(const Op& op) {
  return op.kind == OpKind::kRecorded ? op.attrs.GetString("target", "?") : std::string(OpKindName(op.kind));
}

std::string Label(const Op& op) { return op.name + " (" + Target(op) + ")"; }

/// "name (target)" labels grouped by target, in order of first appearance: a target that several
/// labels share is written "target ×N".
std::string Grouped(const std::vector<std::string>& labels) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::string& l : labels) {
    const size_t open = l.rfind(" (");
    std::string target = open == std::string::npos ? l : l.substr(open + 2, l.size() - open - 3);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == target; });
    if (it == groups.end()) groups.push_back({target, {l}});
    else it->second.push_back(l);
  }
  std::string out;
  for (const auto& [target, ls] : groups)
    out += (out.empty() ? "" : ", ") + (ls.size() == 1 ? ls[0] : target + " \u00d7" + std::to_string(ls.size()));
  return out;
}

}  // namespace

std::optional<RecordedRulesReport> MakeRecordedRulesReport(const Graph& g, const SimResult& s) {
  RecordedRulesReport r;
  std::set<uint32_t> recorded;
  for (size_t k = 0; k < g.ops.size(); ++k) {
    if (g.ops[k].kind == OpKind::kRecorded) {
      recorded.insert(static_cast<uint32_t>(k));
      r.ops.push_back(Label(g.ops[k]));
    }
    if (g.ops[k].attrs.GetBool("data_dependent", false)) r.data_dependent.push_back(Label(g.ops[k]));
  }
  if (recorded.empty() && r.data_dependent.empty()) return std::nullopt;
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
  nlohmann::ordered_json j = {{"ops", r.ops},
                              {"bytes_at_peak", r.bytes_at_peak},
                              {"share_of_peak", r.share_of_peak},
                              {"allocated", {{"forward", r.forward_allocated}, {"backward", r.backward_allocated}}}};
  if (!r.data_dependent.empty()) j["data_dependent"] = r.data_dependent;
  return j;
}

std::string ToText(const RecordedRulesReport& r) {
  std::string out;
  if (!r.ops.empty()) {
    char share[32];
    std::snprintf(share, sizeof share, "%.1f", 100.0 * r.share_of_peak);
    out += "recorded rules: " + std::to_string(r.ops.size()) + " op" + (r.ops.size() == 1 ? "" : "s") + " (" +
           Grouped(r.ops) + "): " + HumanBytes(r.bytes_at_peak) + " at the peak (" + share + " % of it)\n";
  }
  if (!r.data_dependent.empty())
    out += "data-dependent sizes: " + std::to_string(r.data_dependent.size()) + " op" +
           (r.data_dependent.size() == 1 ? "" : "s") + " (" + Grouped(r.data_dependent) +
           ") kept the sizes of the input the graph was exported with; another input may give other sizes\n";
  return out;
}

}  // namespace memsim
