#include "sim/report/timeline.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

#include "sim/report/format.h"

namespace memsim {
namespace {

std::string OpName(const Graph& g, uint32_t op) { return op < g.ops.size() ? g.ops[op].name : ""; }
std::string OpModule(const Graph& g, uint32_t op) { return op < g.ops.size() ? g.ops[op].module : ""; }

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// One colour per category, in CategoryName order.
constexpr std::array<const char*, kNumCategories> kColors = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                             "#b07aa1", "#9c755f", "#76b7b2"};

// Reserved, device used and capacity lines.
constexpr const char* kReservedColor = "#222222";
constexpr const char* kDeviceColor = "#7b2fbf";
constexpr const char* kCapacityColor = "#d00000";

int64_t LevelsMax(const TimelineLevels& lv) {
  int64_t m = lv.capacity_bytes;
  for (int64_t r : lv.reserved) m = std::max(m, r + lv.overhead_bytes);
  return m;
}

std::string OomLabel(const TimelineLevels& lv) { return "OOM" + (lv.oom_op.empty() ? "" : " at op " + lv.oom_op); }

/// A polyline of |v| shifted by |add|, through the sampled event indices |xs|.
template <typename XF, typename YF>
std::string Polyline(const std::vector<int64_t>& v, int64_t add, const std::vector<size_t>& xs, XF X, YF Y,
                     const char* color, const char* title) {
  std::ostringstream o;
  o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
  char buf[64];
  for (size_t i : xs) {
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(i), Y(static_cast<double>(v[i] + add)));
    o << buf;
  }
  o << "\"><title>" << title << "</title></polyline>\n";
  return o.str();
}

/// The reserved and device-used lines and the capacity limit line.
template <typename XF, typename YF>
std::string LevelLines(const TimelineLevels& lv, const std::vector<size_t>& xs, XF X, YF Y, int left, int width) {
  std::string o;
  if (!lv.reserved.empty()) {
    o += Polyline(lv.reserved, 0, xs, X, Y, kReservedColor, "reserved (max_memory_reserved)");
    if (lv.device) o += Polyline(lv.reserved, lv.overhead_bytes, xs, X, Y, kDeviceColor, "device used (nvidia-smi)");
  }
  if (lv.oom_event >= 0) {
    char oom[512];
    const double x = X(static_cast<size_t>(lv.oom_event));
    std::snprintf(oom, sizeof oom,
                  "<line x1=\"%.1f\" y1=\"20\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\">"
                  "<title>%s</title></line><text x=\"%.1f\" y=\"36\" font-size=\"11\" fill=\"%s\">%s</text>\n",
                  x, x, Y(0), kCapacityColor, Escape(OomLabel(lv)).c_str(), x + 3, kCapacityColor,
                  Escape(OomLabel(lv)).c_str());
    o += oom;
  }
  if (lv.capacity_bytes > 0) {
    char cap[256];
    const double y = Y(static_cast<double>(lv.capacity_bytes));
    std::snprintf(cap, sizeof cap, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\">"
                  "<title>capacity</title></line>\n", left, y, width - 10, y, kCapacityColor);
    o += cap;
  }
  return o;
}

/// The category breakdown and the largest tensors alive at the peak.
std::string PeakTables(const Graph& g, const EventStream& s, const PeakReport& p, int top) {
  std::ostringstream o;
  o << "<h3>At the peak</h3>\n<table><tr><th>category</th><th>bytes</th></tr>\n";
  for (int c = 0; c < kNumCategories; ++c)
    if (p.breakdown_at_peak[c])
      o << "<tr><td>" << CategoryName(Category(c)) << "</td><td class=\"n\">" << HumanBytes(p.breakdown_at_peak[c]) << "</td></tr>\n";
  o << "</table>\n<h3>Largest tensors alive at the peak</h3>\n<table><tr><th>tensor</th><th>bytes</th><th>category</th>"
       "<th>op</th><th>module</th></tr>\n";
  for (size_t i = 0; i < p.live_at_peak.size() && static_cast<int>(i) < top; ++i) {
    const Buffer& b = s.buffers[p.live_at_peak[i]];
    o << "<tr><td>" << Escape(b.name) << "</td><td class=\"n\">" << HumanBytes(b.bytes) << "</td><td>"
      << CategoryName(b.category) << "</td><td>" << Escape(OpName(g, b.op)) << "</td><td>" << Escape(b.module)
      << "</td></tr>\n";
  }
  return o.str();
}

}  // namespace

std::vector<int64_t> ReservedSeries(const std::vector<int64_t>& segment_bytes) {
  std::vector<int64_t> r(segment_bytes.size());
  int64_t total = 0;
  for (size_t i = 0; i < segment_bytes.size(); ++i) r[i] = total += segment_bytes[i];
  return r;
}

nlohmann::ordered_json ChromeTrace(const Graph& g, const EventStream& s, const PeakReport& p,
                                   int64_t min_alloc_bytes, const TimelineLevels& levels) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "memsim: " + g.name}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "ops"}}}});
  std::array<int64_t, kNumCategories> live{};
  size_t run_start = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    const Buffer& b = s.buffers[e.buffer];
    live[static_cast<int>(b.category)] += e.kind == EventKind::kAlloc ? b.bytes : -b.bytes;
    nlohmann::ordered_json args;
    for (int c = 0; c < kNumCategories; ++c) args[std::string(CategoryName(Category(c)))] = live[c];
    events.push_back({{"name", "live bytes"}, {"ph", "C"}, {"pid", 1}, {"ts", i}, {"args", args}});
    if (i < levels.reserved.size()) {
      nlohmann::ordered_json lv = {{"reserved", levels.reserved[i]}};
      if (levels.device) lv["device used"] = levels.reserved[i] + levels.overhead_bytes;
      lv["capacity"] = levels.capacity_bytes;
      events.push_back({{"name", "device levels"}, {"ph", "C"}, {"pid", 1}, {"ts", i}, {"args", lv}});
    }
    if (e.kind == EventKind::kAlloc && b.bytes >= min_alloc_bytes)
      events.push_back({{"name", "alloc " + b.name}, {"ph", "i"}, {"s", "t"}, {"pid", 1}, {"tid", 1}, {"ts", i},
                        {"args", {{"bytes", b.bytes}, {"category", CategoryName(b.category)}, {"op", OpName(g, b.op)},
                                  {"module", b.module}}}});
    bool run_ends = i + 1 == s.events.size() || s.events[i + 1].op != e.op || s.events[i + 1].phase != e.phase;
    if (run_ends) {
      std::string name = e.op == kNoOp ? std::string(PhaseName(e.phase)) : OpName(g, e.op);
      events.push_back({{"name", name}, {"cat", PhaseName(e.phase)}, {"ph", "X"}, {"pid", 1}, {"tid", 1},
                        {"ts", run_start}, {"dur", i + 1 - run_start},
                        {"args", {{"phase", PhaseName(e.phase)}, {"module", OpModule(g, e.op)}}}});
      run_start = i + 1;
    }
  }
  events.push_back({{"name", "peak " + HumanBytes(p.peak_live_bytes)}, {"ph", "i"}, {"s", "g"}, {"pid", 1}, {"tid", 1},
                    {"ts", p.peak_event}, {"args", {{"peak_live_bytes", p.peak_live_bytes}, {"op", OpName(g, p.peak_op)}}}});
  if (levels.oom_event >= 0)
    events.push_back({{"name", OomLabel(levels)}, {"ph", "i"}, {"s", "g"}, {"pid", 1}, {"tid", 1},
                      {"ts", levels.oom_event},
                      {"args", {{"oom_op", levels.oom_op}, {"capacity_bytes", levels.capacity_bytes}}}});
  nlohmann::ordered_json doc;
  doc["traceEvents"] = events;
  doc["displayTimeUnit"] = "ns";
  doc["otherData"] = {{"model", g.name}, {"time_unit", "one microsecond per memory event"}};
  if (levels.capacity_bytes > 0) {
    doc["otherData"]["capacity_bytes"] = levels.capacity_bytes;
    doc["otherData"]["oom"] = levels.oom_event >= 0;
    doc["otherData"]["oom_op"] =
        levels.oom_event >= 0 ? nlohmann::ordered_json(levels.oom_op) : nlohmann::ordered_json();
  }
  return doc;
}

std::string HtmlTimeline(const Graph& g, const EventStream& s, const PeakReport& p, int top,
                         const TimelineLevels& levels) {
  const int W = 1000, H = 360, L = 70, B = 30;
  const size_t n = s.events.size();
  // Stacked series, sampled at most W times (keeping each bucket's maximum total).
  std::vector<std::array<int64_t, kNumCategories>> pts;
  std::vector<size_t> xs;
  std::array<int64_t, kNumCategories> live{};
  size_t buckets = std::max<size_t>(1, std::min<size_t>(n, W));
  std::array<int64_t, kNumCategories> best{};
  int64_t best_total = -1;
  size_t best_i = 0;
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = s.buffers[s.events[i].buffer];
    live[static_cast<int>(b.category)] += s.events[i].kind == EventKind::kAlloc ? b.bytes : -b.bytes;
    int64_t total = 0;
    for (int64_t v : live) total += v;
    if (total > best_total) {
      best_total = total;
      best = live;
      best_i = i;
    }
    if ((i + 1) * buckets / std::max<size_t>(n, 1) != i * buckets / std::max<size_t>(n, 1) || i + 1 == n) {
      pts.push_back(best);
      xs.push_back(best_i);
      best_total = -1;
    }
  }
  const bool lines = (levels.reserved.size() == n && n > 0) || levels.capacity_bytes > 0 || levels.oom_event >= 0;
  double ymax = std::max<double>(1.0, static_cast<double>(std::max(p.peak_live_bytes, lines ? LevelsMax(levels) : 0)));
  auto X = [&](size_t i) { return L + (n > 1 ? static_cast<double>(i) * (W - L - 10) / static_cast<double>(n - 1) : 0.0); };
  auto Y = [&](double v) { return H - B - v * (H - B - 20) / ymax; };
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memsim: " << Escape(g.name)
    << "</title>\n<style>body{font:14px sans-serif;margin:24px}table{border-collapse:collapse}"
       "td,th{padding:2px 10px;text-align:left}td.n{text-align:right}</style></head><body>\n";
  o << "<h2>" << Escape(g.name) << ": peak " << HumanBytes(p.peak_live_bytes) << " in " << PhaseName(p.peak_phase);
  if (!OpName(g, p.peak_op).empty()) o << " at " << Escape(OpName(g, p.peak_op));
  if (levels.oom_event >= 0)
    o << "; does not fit in " << HumanBytes(levels.capacity_bytes) << ", " << Escape(OomLabel(levels))
      << " (the lines after it: what the step would need)";
  else if (levels.capacity_bytes > 0)
    o << "; fits in " << HumanBytes(levels.capacity_bytes);
  o << "</h2>\n<svg width=\"" << W << "\" height=\"" << H << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  // Phase bands.
  const char* band[] = {"#f4f4f4", "#eaf2fb", "#fbf1e8", "#eef7ee"};
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i + 1 == n || s.events[i + 1].phase != s.events[i].phase) {
      int ph = static_cast<int>(s.events[i].phase);
      char buf[256];
      std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"10\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
                    "<text x=\"%.1f\" y=\"24\" font-size=\"11\" fill=\"#666\">%s</text>\n",
                    X(start), std::max(1.0, X(i) - X(start)), H - B - 10, band[ph], X(start) + 3,
                    std::string(PhaseName(Phase(ph))).c_str());
      o << buf;
      start = i + 1;
    }
  }
  // Stacked areas, top category first so lower ones paint over.
  for (int c = kNumCategories - 1; c >= 0; --c) {
    o << "<polygon fill=\"" << kColors[c] << "\" fill-opacity=\"0.85\" points=\"";
    char buf[64];
    for (size_t k = 0; k < pts.size(); ++k) {
      int64_t cum = 0;
      for (int d = 0; d <= c; ++d) cum += pts[k][d];
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(xs[k]), Y(static_cast<double>(cum)));
      o << buf;
    }
    std::snprintf(buf, sizeof buf, "%.1f,%.1f %.1f,%.1f", X(xs.empty() ? 0 : xs.back()), Y(0), X(xs.empty() ? 0 : xs.front()), Y(0));
    o << buf << "\"><title>" << CategoryName(Category(c)) << "</title></polygon>\n";
  }
  if (lines) o << LevelLines(levels, xs, X, Y, L, W);
  char buf[512];
  std::snprintf(buf, sizeof buf, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text x=\"4\" y=\"%.1f\" font-size=\"11\">%s</text><text x=\"4\" y=\"%.1f\" font-size=\"11\">0</text>"
                "<line x1=\"%.1f\" y1=\"20\" x2=\"%.1f\" y2=\"%d\" stroke=\"#d00\" stroke-dasharray=\"4 3\"/>\n",
                L, Y(0), W - 10, Y(0), Y(ymax) + 4, HumanBytes(static_cast<int64_t>(ymax)).c_str(), Y(0), X(p.peak_event),
                X(p.peak_event), H - B);
  o << buf << "</svg>\n<p>";
  for (int c = 0; c < kNumCategories; ++c)
    o << "<span style=\"color:" << kColors[c] << "\">&#9632;</span> " << CategoryName(Category(c)) << " &nbsp; ";
  const bool reserved = !levels.reserved.empty();
  if (reserved) o << "<span style=\"color:" << kReservedColor << "\">&#9472;</span> reserved &nbsp; ";
  if (reserved && levels.device) o << "<span style=\"color:" << kDeviceColor << "\">&#9472;</span> device used &nbsp; ";
  if (levels.capacity_bytes > 0)
    o << "<span style=\"color:" << kCapacityColor << "\">&#9472;</span> capacity"
      << (levels.oom_event >= 0 ? " (the vertical line: the OOM)" : "");
  o << "<br>x: memory events in order (forward, backward, optimizer); y: live bytes (requested sizes)"
    << (reserved && levels.device ? "; lines: reserved, device used = reserved + " + HumanBytes(levels.overhead_bytes) +
                                        " CUDA context and libraries"
        : reserved                ? "; line: reserved"
                                  : "")
    << ".</p>\n";
  o << PeakTables(g, s, p, top) << "</table>\n</body></html>\n";
  return o.str();
}

TimelineLevels LevelsOf(const Graph& g, const RunResult& r) {
  TimelineLevels lv;
  lv.device = r.device.modelled;
  lv.overhead_bytes = r.device.modelled ? r.device.overhead.bytes : 0;
  lv.capacity_bytes = r.device.modelled ? r.device.capacity_bytes : r.alloc.capacity_bytes;
  if (r.alloc.oom) {
    lv.oom_event = r.alloc.oom->event_index;
    if (r.alloc.oom->op < g.ops.size()) lv.oom_op = g.ops[r.alloc.oom->op].name;
  }
  // The reserved line: the cuda profile's, and any run with a capacity (what it is measured against).
  if (r.alloc.placement && (r.device.modelled || lv.capacity_bytes > 0))
    lv.reserved = ReservedSeries(r.alloc.placement->segment_bytes);
  return lv;
}

}  // namespace memsim
