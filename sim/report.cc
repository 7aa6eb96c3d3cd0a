#include "sim/report.h"

#include <cstdio>
#include <sstream>

namespace memsim {
namespace {

std::string OpLabel(const Graph& g, uint32_t op) {
  if (op == kNoOp || op >= g.ops.size()) return "";
  return g.ops[op].name;
}

}  // namespace

std::string HumanBytes(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, kUnits[u]);
  return buf;
}

nlohmann::ordered_json RunReportJson(const Graph& g, const SimOptions& opt, const SimResult& r, int top) {
  nlohmann::ordered_json j;
  j["model"] = g.name;
  nlohmann::ordered_json cfg;
  for (const auto& [k, v] : opt.symbols) cfg["symbols"][k] = v;
  cfg["optimizer"] = opt.optimizer;
  cfg["step"] = opt.first_step ? "first" : "steady";
  cfg["profile"] = r.profile.name;
  cfg["inplace_activations"] = opt.inplace ? (*opt.inplace ? "on" : "off") : "keep";
  int64_t frozen = 0, trainable = 0, param_bytes = 0;
  for (size_t k = 0; k < g.parameters.size(); ++k) {
    const TensorMeta& m = r.bound.metas[g.parameters[k]];
    param_bytes += m.bytes();
    (r.frozen[k] ? frozen : trainable) += m.numel();
  }
  cfg["frozen_parameters"] = frozen;
  j["config"] = cfg;
  j["parameters"] = {{"count", frozen + trainable}, {"trainable", trainable}, {"bytes", param_bytes}};
  j["peak_live_bytes"] = r.peak.peak_live_bytes;
  j["peak_phase"] = PhaseName(r.peak.peak_phase);
  j["peak_op"] = OpLabel(g, r.peak.peak_op);
  j["setup_bytes"] = r.peak.setup_bytes;
  j["final_bytes"] = r.peak.final_bytes;
  j["phase_peaks"] = {{"forward", r.peak.phase_peaks[int(Phase::kForward)]},
                      {"backward", r.peak.phase_peaks[int(Phase::kBackward)]},
                      {"optimizer", r.peak.phase_peaks[int(Phase::kOptimizer)]}};
  nlohmann::ordered_json bd;
  for (int c = 0; c < kNumCategories; ++c) bd[std::string(CategoryName(Category(c)))] = r.peak.breakdown_at_peak[c];
  j["breakdown_at_peak"] = bd;
  nlohmann::ordered_json tops = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.peak.live_at_peak.size() && static_cast<int>(i) < top; ++i) {
    uint32_t id = r.peak.live_at_peak[i];
    const Buffer& b = r.events.buffers[id];
    nlohmann::ordered_json t = {{"name", b.name}, {"bytes", b.bytes}, {"category", CategoryName(b.category)},
                                {"op", OpLabel(g, b.op)}, {"module", b.module}};
    for (const Retention& ret : r.at_peak)
      if (ret.buffer == id) t["held_by"] = ret.held_by;
    tops.push_back(t);
  }
  j["top_tensors_at_peak"] = tops;
  j["tensors_alive_at_peak"] = r.peak.live_at_peak.size();
  return j;
}

std::string RunReportText(const Graph& g, const SimOptions& opt, const SimResult& r, int top) {
  std::ostringstream o;
  auto j = RunReportJson(g, opt, r, top);
  o << "memsim: " << g.name << "  (profile " << r.profile.name << ", optimizer " << opt.optimizer << ", "
    << (opt.first_step ? "first" : "steady") << " step";
  for (const auto& [k, v] : opt.symbols) o << ", " << k << "=" << v;
  o << ")\n";
  o << "parameters: " << j["parameters"]["count"].get<int64_t>() << " (" << j["parameters"]["trainable"].get<int64_t>()
    << " trainable), " << HumanBytes(j["parameters"]["bytes"].get<int64_t>()) << "\n\n";
  o << "peak live memory: " << HumanBytes(r.peak.peak_live_bytes) << " (" << r.peak.peak_live_bytes << " bytes) in "
    << PhaseName(r.peak.peak_phase);
  if (!OpLabel(g, r.peak.peak_op).empty()) o << " at " << OpLabel(g, r.peak.peak_op);
  o << "\n  forward peak   " << HumanBytes(r.peak.phase_peaks[int(Phase::kForward)])
    << "\n  backward peak  " << HumanBytes(r.peak.phase_peaks[int(Phase::kBackward)])
    << "\n  optimizer peak " << HumanBytes(r.peak.phase_peaks[int(Phase::kOptimizer)]) << "\n\n";
  o << "at the peak, by category:\n";
  for (int c = 0; c < kNumCategories; ++c) {
    int64_t v = r.peak.breakdown_at_peak[c];
    if (v == 0) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %-16s %12s  %5.1f %%\n", std::string(CategoryName(Category(c))).c_str(),
                  HumanBytes(v).c_str(), 100.0 * v / std::max<int64_t>(r.peak.peak_live_bytes, 1));
    o << buf;
  }
  o << "\nlargest tensors alive at the peak:\n";
  for (const auto& t : j["top_tensors_at_peak"]) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %12s  %-16s %s\n", HumanBytes(t["bytes"].get<int64_t>()).c_str(),
                  t["category"].get<std::string>().c_str(), t["name"].get<std::string>().c_str());
    o << buf;
    if (t.contains("held_by"))
      for (const auto& h : t["held_by"]) o << std::string(32, ' ') << "held by: " << h.get<std::string>() << "\n";
  }
  return o.str();
}

std::string EventsText(const EventStream& s) {
  std::ostringstream o;
  for (const MemEvent& e : s.events) {
    const Buffer& b = s.buffers[e.buffer];
    o << (e.kind == EventKind::kAlloc ? "A " : "F ") << PhaseName(e.phase) << " " << b.bytes << " " << b.name << " "
      << CategoryName(b.category) << "\n";
  }
  return o.str();
}

}  // namespace memsim
