#include "sim/report/plan_report.h"

#include "sim/plan/steady.h"

#include <cstdio>

#include "sim/advise.h"
#include "sim/plan/steady.h"
#include "sim/report/format.h"
#include "sim/report/sweep_report.h"

namespace memsim {
namespace {

std::string Seconds(double s) {
  char buf[32];
  if (s >= 10) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s >= 0.1 || s == 0) std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-4) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

nlohmann::ordered_json TimeJson(const StepTime& t) {
  nlohmann::ordered_json j;
  j["total_s"] = t.total();
  j["compute_s"] = t.compute_s;
  j["recompute_s"] = t.recompute_s;
  j["comm_s"] = t.comm_s;
  j["offload_s"] = t.offload_s;
  j["optimizer_s"] = t.optimizer_s;
  j["bubble_s"] = t.bubble_s;
  return j;
}

nlohmann::ordered_json RowJson(const PlanReport& r, const PlanRow& row) {
  const PlanCandidate& c = row.candidate;
  nlohmann::ordered_json j;
  j["plan"] = CandidateLabel(c);
  j["precision"] = PrecisionName(c.precision);
  j["world"] = c.world;
  j["sharding"] = ShardingName(c.sharding);
  j["checkpoint"] = CheckpointingName(c.checkpoint);
  j["micro_batch"] = c.micro_batch;
  j["accumulate"] = c.accumulate;
  j["step_time"] = TimeJson(row.time);
  j["floor_bytes"] = row.floor_bytes;
  j["figures"] = ToJson(row.row);
  j["args"] = row.args;
  j["run"] = RunCommandOf(r, row);
  return j;
}

const char* kTableHeader = "  #  plan                                                       step time   device used  peak live\n";

std::string TableLine(size_t i, const PlanRow& row, bool chosen) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "%c%2zu  %-58s %9s  %12s %10s\n", chosen ? '*' : ' ', i + 1,
                CandidateLabel(row.candidate).c_str(), Seconds(row.time.total()).c_str(),
                HumanBytes(row.row.used_bytes()).c_str(), HumanBytes(row.row.peak_live_bytes).c_str());
  return buf;
}

std::string HtmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : c == '"' ? "&quot;" : std::string(1, c);
  return o;
}

}  // namespace

std::string RunCommandOf(const PlanReport& r, const PlanRow& row) {
  std::vector<std::string> a = {"memsim", "run", r.graph_path};
  a.insert(a.end(), row.args.begin(), row.args.end());
  return ShellJoin(a);
}

nlohmann::ordered_json ToJson(const PlanReport& r) {
  const PlanResult& p = r.result;
  nlohmann::ordered_json j;
  j["model"] = p.model;
  j["gpu"] = p.gpu;
  j["gpus"] = p.gpus;
  j["global_batch"] = p.global_batch;
  j["seq"] = p.seq > 0 ? nlohmann::ordered_json(p.seq) : nlohmann::ordered_json();
  j["objective"] = ObjectiveName(p.objective);
  j["capacity_bytes"] = p.capacity_bytes;
  j["candidates"] = p.candidates;
  j["simulated"] = p.simulated;
  j["fitting"] = p.fitting;
  j["pruned_by_floor"] = p.pruned_by_floor;
  j["pruned_dominated"] = p.pruned_dominated;
  j["invalid"] = p.invalid;
  j["shortened"] = p.shortened;
  j["beyond_horizon"] = p.beyond_horizon;
  j["front_exact_below_s"] = p.front_exact_below_s > 0 ? nlohmann::ordered_json(p.front_exact_below_s) : nlohmann::ordered_json();
  if (r.timing) j["seconds"] = p.seconds;
  j["chosen"] = p.chosen ? RowJson(r, p.front[*p.chosen]) : nlohmann::ordered_json();
  j["front"] = nlohmann::ordered_json::array();
  for (const PlanRow& row : p.front) j["front"].push_back(RowJson(r, row));
  return j;
}

std::string ToText(const PlanReport& r) {
  const PlanResult& p = r.result;
  std::string o = "plan " + p.model + " on " + std::to_string(p.gpus) + " x " + p.gpu + " (" +
                  HumanBytes(p.capacity_bytes) + " each), global batch " + std::to_string(p.global_batch) +
                  (p.seq > 0 ? ", seq " + std::to_string(p.seq) : "") + ", objective " +
                  std::string(ObjectiveName(p.objective)) + "\n";
  o += "searched " + std::to_string(p.candidates) + " candidates: " + std::to_string(p.simulated) + " simulated (" +
       std::to_string(p.fitting) + " fit" +
       (p.shortened ? ", " + std::to_string(p.shortened) + " from their first " + std::to_string(kSteadyPasses) + " passes" : "") +
       "), " + std::to_string(p.pruned_by_floor) + " pruned by the memory floor, " +
       std::to_string(p.pruned_dominated) + " by a faster plan that needs less, " + std::to_string(p.invalid) +
       " invalid" + (p.beyond_horizon ? ", " + std::to_string(p.beyond_horizon) + " left out once the answer was settled" : "") +
       (r.timing ? ", in " + Seconds(p.seconds) : "") + "\n";
  if (!p.chosen) {
    o += "no plan fits" + (p.first_error.empty() ? std::string() : " (first invalid candidate: " + p.first_error + ")") + "\n";
    return o;
  }
  o += "\nPareto front (peak device memory x estimated step time; * = chosen)" +
       (p.front_exact_below_s > 0 ? ", exact below a step time of " + Seconds(p.front_exact_below_s) : std::string()) + ":\n" +
       std::string(kTableHeader);
  for (size_t i = 0; i < p.front.size(); ++i) o += TableLine(i, p.front[i], i == *p.chosen);
  const PlanRow& c = p.front[*p.chosen];
  char buf[256];
  std::snprintf(buf, sizeof buf, "\nstep time %s = compute %s + recompute %s + communication %s + offload %s + optimizer %s\n",
                Seconds(c.time.total()).c_str(), Seconds(c.time.compute_s).c_str(), Seconds(c.time.recompute_s).c_str(),
                Seconds(c.time.comm_s).c_str(), Seconds(c.time.offload_s).c_str(), Seconds(c.time.optimizer_s).c_str());
  o += "\nchosen: " + CandidateLabel(c.candidate) + " (" + std::string(ShardingTitle(c.candidate.sharding)) + ")" + buf;
  o += "reproduce: " + RunCommandOf(r, c) + "\n";
  return o;
}

std::string ToHtml(const PlanReport& r) {
  const PlanResult& p = r.result;
  std::string o = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memsim plan " + HtmlEscape(p.model) +
                  "</title>\n<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
                  "padding:2px 6px;text-align:right}td.l{text-align:left}tr.chosen{background:#dfd}</style></head><body>\n";
  o += "<h1>memsim plan: " + HtmlEscape(p.model) + " on " + std::to_string(p.gpus) + " &times; " + HtmlEscape(p.gpu) + "</h1>\n";
  o += "<p>global batch " + std::to_string(p.global_batch) + ", objective " + std::string(ObjectiveName(p.objective)) + "; " +
       std::to_string(p.candidates) + " candidates, " + std::to_string(p.simulated) + " simulated, " +
       std::to_string(p.fitting) + " fit.</p>\n";
  o += "<table><tr><th>#</th><th>plan</th><th>step time (s)</th><th>device used</th><th>peak live</th><th>memsim run</th></tr>\n";
  for (size_t i = 0; i < p.front.size(); ++i) {
    const PlanRow& row = p.front[i];
    char t[32];
    std::snprintf(t, sizeof t, "%.4f", row.time.total());
    o += std::string("<tr") + (p.chosen && *p.chosen == i ? " class=\"chosen\"" : "") + "><td>" + std::to_string(i + 1) +
         "</td><td class=\"l\">" + HtmlEscape(CandidateLabel(row.candidate)) + "</td><td>" + t + "</td><td>" +
         HumanBytes(row.row.used_bytes()) + "</td><td>" + HumanBytes(row.row.peak_live_bytes) + "</td><td class=\"l\"><code>" +
         HtmlEscape(RunCommandOf(r, row)) + "</code></td></tr>\n";
  }
  o += "</table>\n";
  if (!p.chosen) o += "<p>No plan fits.</p>\n";
  return o + "</body></html>\n";
}

}  // namespace memsim
