#include "sim/report/rank_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "sim/report/figures_report.h"
#include "sim/report/format.h"

namespace memsim {

/// The live bytes at the start of each pipeline action and its peak, up to the next action
/// (the last one's up to the optimizer), of the first step.
static std::vector<RankReport::Action> ScheduleTimeline(const EventStream& s) {
  std::vector<RankReport::Action> out;
  int64_t live = 0;
  size_t next = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    if (e.phase == Phase::kOptimizer && next > 0) break;
    for (; next < s.actions.size() && s.actions[next].event == i; ++next) out.push_back({s.actions[next].label, live, live});
    live += e.kind == EventKind::kAlloc ? s.bytes(e) : -s.bytes(e);
    if (!out.empty()) out.back().peak = std::max(out.back().peak, live);
  }
  return out;
}

RanksReport MakeRanksReport(const Graph& g, const RunConfig& c, const std::vector<RankRun>& runs) {
  RanksReport rep;
  const ParallelOptions& p = c.sim.parallel;
  rep.world = p.world;
  if (p.ddp) rep.scheme = "ddp";
  if (p.zero_stage > 0) rep.scheme += std::string(rep.scheme.empty() ? "" : "+") + "zero" + std::to_string(p.zero_stage);
  if (!p.fsdp.empty()) rep.scheme = "fsdp-" + p.fsdp;
  if (p.data_parallel) rep.scheme = "data-parallel";
  if (p.mesh.enabled()) rep.scheme = "mesh " + p.mesh.ToString();  // FSDP2 / HSDP (Note [FSDP2])
  if (!p.offload.empty()) rep.scheme += "+offload-" + p.offload;
  for (const RankRun& run : runs) {
    const RunResult& r = run.result;
    RankReport k;
    static_cast<MemoryFigures&>(k) = FiguresOf(g, r, c.alloc.capacity_bytes);
    k.ranks = run.ranks;
    k.phase_peaks = r.sim.peak.phase_peaks;
    k.breakdown_at_peak = r.sim.peak.breakdown_at_peak;
    k.host_bytes = r.sim.events.host_bytes;
    k.schedule = ScheduleTimeline(r.sim.events);
    rep.ranks.push_back(k);
  }
  return rep;
}

nlohmann::ordered_json ToJson(const RanksReport& r) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const RankReport& k : r.ranks) {
    nlohmann::ordered_json j;
    if (k.ranks.size() == 1) j["rank"] = k.ranks[0];
    j["ranks"] = k.ranks;
    const nlohmann::ordered_json figures = FiguresJson(k);  // named: items() refers to it
    for (auto& [key, v] : figures.items()) j[key] = v;
    j["phase_peaks"] = {{"setup", k.phase_peaks[int(Phase::kSetup)]},
                        {"forward", k.phase_peaks[int(Phase::kForward)]},
                        {"backward", k.phase_peaks[int(Phase::kBackward)]},
                        {"optimizer", k.phase_peaks[int(Phase::kOptimizer)]}};
    nlohmann::ordered_json bd;
    for (int c = 0; c < kNumCategories; ++c) bd[std::string(CategoryName(Category(c)))] = k.breakdown_at_peak[c];
    j["breakdown_at_peak"] = bd;
    j["host_bytes"] = k.host_bytes;
    if (!k.schedule.empty()) {  // a pipeline stage's timeline (Note [Pipeline parallel])
      nlohmann::ordered_json sched = nlohmann::ordered_json::array();
      for (const RankReport::Action& x : k.schedule)
        sched.push_back({{"action", x.label}, {"start_live_bytes", x.start}, {"peak_live_bytes", x.peak}});
      j["schedule"] = sched;
    }
    a.push_back(j);
  }
  return a;
}

std::string ToText(const RanksReport& r) {
  std::ostringstream o;
  o << "per rank (" << r.scheme << ", world " << r.world << "):\n";
  const bool device = !r.ranks.empty() && r.ranks[0].peak_device_used_bytes > 0;
  const bool cap = !r.ranks.empty() && r.ranks[0].capacity_bytes > 0;
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-10s %12s %12s %12s %12s %12s%s\n",
                r.scheme == "data-parallel" ? "devices" : "ranks", "peak live", "allocated", "reserved",
                device ? "device used" : "", "host", cap ? "  fits" : "");
  o << buf;
  for (const RankReport& k : r.ranks) {
    const std::string fits = !cap ? "" : k.oom ? "  no, OOM at op " + (k.oom_op.empty() ? "-" : k.oom_op) : "  yes";
    std::snprintf(buf, sizeof buf, "  %-10s %12s %12s %12s %12s %12s%s\n", RankList(k.ranks).c_str(),
                  HumanBytes(k.peak_live_bytes).c_str(), HumanBytes(k.peak_allocated_bytes).c_str(),
                  HumanBytes(k.peak_reserved_bytes).c_str(),
                  device ? HumanBytes(k.peak_device_used_bytes).c_str() : "", HumanBytes(k.host_bytes).c_str(),
                  fits.c_str());
    o << buf;
  }
  const bool oom = std::any_of(r.ranks.begin(), r.ranks.end(), [](const RankReport& k) { return k.oom; });
  if (oom) o << "  (after an OOM the figures are what the rank would need without the capacity limit)\n";
  // A pipeline stage's timeline: each action's peak live memory, in schedule order.
  for (const RankReport& k : r.ranks) {
    if (k.schedule.empty()) continue;
    o << "  schedule of rank " << RankList(k.ranks) << " (action: peak live):";
    for (size_t i = 0; i < k.schedule.size(); ++i)
      o << (i % 4 == 0 ? "\n    " : "  ") << k.schedule[i].label << ": " << HumanBytes(k.schedule[i].peak);
    o << "\n";
  }
  return o.str();
}

}  // namespace memsim
