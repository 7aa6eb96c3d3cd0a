// The HTML timeline page (timeline.h): TimelineData computes what is drawn, the SVG is rendered
// from it here, and a small inline script shows a tooltip per point. Note [Timeline page].
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <sstream>

#include "sim/report/format.h"
#include "sim/report/timeline.h"

namespace memsim {
namespace {

using nlohmann::ordered_json;

std::string OpName(const Graph& g, uint32_t op) { return op < g.ops.size() ? g.ops[op].name : ""; }

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

// One colour per category, in CategoryName order (python/memsim/_plot.py uses the same).
constexpr std::array<const char*, kNumCategories> kColors = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                             "#b07aa1", "#9c755f", "#76b7b2"};
constexpr const char* kReservedColor = "#222222";
constexpr const char* kDeviceColor = "#7b2fbf";
constexpr const char* kCapacityColor = "#d00000";
constexpr const char* kBands[] = {"#f4f4f4", "#eaf2fb", "#fbf1e8", "#eef7ee"};

// The plot's geometry (SVG user units; the SVG scales to the window's width).
constexpr int kW = 1000, kH = 400, kLeft = 78, kRight = 12, kTop = 22, kBottom = 46;
constexpr int kMaxPoints = 1000;

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// plot()'s title (python/memsim/_plot.py), from the run's figures; |who| names the model (and
/// the panel's ranks).
std::string Headline(const Graph& g, const TimelinePanel& p, const std::string& who) {
  const TimelineLevels& lv = p.levels;
  if (!lv.figures) {
    std::string h = who + ": peak live " + HumanBytes(p.peak->peak_live_bytes) + " in " +
                    std::string(PhaseName(p.peak->peak_phase));
    return OpName(g, p.peak->peak_op).empty() ? h : h + " at " + OpName(g, p.peak->peak_op);
  }
  const double gib = 1024.0 * 1024.0 * 1024.0;
  return who + ": " + (lv.figures->oom ? "would need " : "") + "peak reserved " +
         Fmt("%.3g", static_cast<double>(lv.figures->peak_reserved_bytes) / gib) + " GiB, allocated " +
         Fmt("%.3g", static_cast<double>(lv.figures->peak_allocated_bytes) / gib) + " GiB";
}

/// The second line: the live peak and whether the step fits.
std::string Verdict(const Graph& g, const TimelinePanel& p) {
  const TimelineLevels& lv = p.levels;
  std::string v = "peak live " + HumanBytes(p.peak->peak_live_bytes) + " in " + std::string(PhaseName(p.peak->peak_phase));
  if (!OpName(g, p.peak->peak_op).empty()) v += " at op " + OpName(g, p.peak->peak_op);
  if (lv.oom_event >= 0)
    v += "; does not fit in " + HumanBytes(lv.capacity_bytes) + ", OOM" + (lv.oom_op.empty() ? "" : " at op " + lv.oom_op) +
         " (the lines after it: what the step would need)";
  else if (lv.capacity_bytes > 0)
    v += "; fits in " + HumanBytes(lv.capacity_bytes);
  return v;
}

/// The y axis: its unit (GiB from 1 GiB up, else MiB, else KiB), tick step and top.
struct Axis {
  std::string unit;
  int64_t unit_bytes = 1;
  double step = 1;  // in units
  int ticks = 1;    // the top tick is ticks * step
};

Axis YAxis(int64_t max_bytes) {
  Axis a;
  const int64_t gib = int64_t{1} << 30, mib = int64_t{1} << 20;
  a.unit = max_bytes >= gib ? "GiB" : max_bytes >= mib ? "MiB" : "KiB";
  a.unit_bytes = max_bytes >= gib ? gib : max_bytes >= mib ? mib : 1024;
  const double top = std::max(1e-9, static_cast<double>(max_bytes) / static_cast<double>(a.unit_bytes));
  const double raw = top / 5.0, mag = std::pow(10.0, std::floor(std::log10(raw)));
  a.step = mag * 10;
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (m * mag >= raw) {
      a.step = m * mag;
      break;
    }
  a.ticks = std::max(1, static_cast<int>(std::ceil(top / a.step - 1e-9)));
  return a;
}

/// The x axis: a step of about 8 ticks over |n| events (1, 2, 5 x 10^k).
int64_t XStep(size_t n) {
  const double raw = std::max(1.0, static_cast<double>(n) / 8.0), mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return static_cast<int64_t>(m * mag);
  return static_cast<int64_t>(10 * mag);
}

int64_t LevelsMax(const TimelineLevels& lv) {
  int64_t m = lv.capacity_bytes;
  for (int64_t r : lv.reserved) m = std::max(m, r + (lv.device ? lv.overhead_bytes : 0));
  return m;
}

/// The sampled points: per bucket of events, the event with the largest live total.
ordered_json Points(const Graph& g, const EventStream& s, const TimelineLevels& lv) {
  const size_t n = s.events.size();
  const size_t buckets = std::max<size_t>(1, std::min<size_t>(n, kMaxPoints));
  ordered_json event = ordered_json::array(), phase = ordered_json::array(), op = ordered_json::array(),
               tensor = ordered_json::array(), reserved = ordered_json::array();
  std::array<ordered_json, kNumCategories> cat;
  for (auto& c : cat) c = ordered_json::array();
  std::array<int64_t, kNumCategories> live{}, best{};
  int64_t best_total = -1;
  size_t best_i = 0;
  const bool has_reserved = lv.reserved.size() == n;
  for (size_t i = 0; i < n; ++i) {
    const MemEvent& e = s.events[i];
    const Buffer& b = s.buffers[e.buffer];
    live[static_cast<int>(b.category)] += e.kind == EventKind::kAlloc ? b.bytes : -b.bytes;
    int64_t total = 0;
    for (int64_t v : live) total += v;
    if (total > best_total) {
      best_total = total;
      best = live;
      best_i = i;
    }
    if ((i + 1) * buckets / n == i * buckets / n && i + 1 != n) continue;
    const MemEvent& be = s.events[best_i];
    event.push_back(best_i);
    phase.push_back(PhaseName(be.phase));
    op.push_back(OpName(g, be.op));
    tensor.push_back(std::string(be.kind == EventKind::kAlloc ? "alloc " : "free ") + s.buffers[be.buffer].name);
    for (int c = 0; c < kNumCategories; ++c) cat[c].push_back(best[c]);
    if (has_reserved) reserved.push_back(lv.reserved[best_i]);
    best_total = -1;
  }
  ordered_json pts;
  pts["event"] = event;
  pts["phase"] = phase;
  pts["op"] = op;
  pts["tensor"] = tensor;
  pts["live"] = ordered_json::object();
  for (int c = 0; c < kNumCategories; ++c) pts["live"][std::string(CategoryName(Category(c)))] = cat[c];
  pts["reserved"] = has_reserved ? reserved : ordered_json(nullptr);
  return pts;
}

ordered_json PanelData(const Graph& g, const TimelinePanel& p) {
  const EventStream& s = *p.events;
  const TimelineLevels& lv = p.levels;
  const size_t n = s.events.size();
  ordered_json d;
  d["label"] = p.label;
  d["headline"] = Headline(g, p, g.name);
  d["panel_headline"] = Headline(g, p, p.label.empty() ? g.name : g.name + ", " + p.label);
  d["verdict"] = Verdict(g, p);
  d["events"] = n;
  const Axis ax = YAxis(std::max(p.peak->peak_live_bytes, LevelsMax(lv)));
  d["y_unit"] = ax.unit;
  d["y_unit_bytes"] = ax.unit_bytes;
  d["y_tick_step"] = ax.step;
  d["y_max_bytes"] = static_cast<int64_t>(std::llround(ax.step * ax.ticks * static_cast<double>(ax.unit_bytes)));
  d["x_tick_step"] = XStep(n);
  ordered_json phases = ordered_json::array();
  for (size_t i = 0, start = 0; i < n; ++i)
    if (i + 1 == n || s.events[i + 1].phase != s.events[i].phase) {
      phases.push_back({{"phase", PhaseName(s.events[i].phase)}, {"first_event", start}, {"last_event", i}});
      start = i + 1;
    }
  d["phases"] = phases;
  ordered_json steps = ordered_json::array();
  for (size_t k = 0; k < s.step_starts.size(); ++k) steps.push_back({{"step", k + 1}, {"first_event", s.step_starts[k]}});
  d["steps"] = steps;
  d["peak"] = {{"event", p.peak->peak_event}, {"live_bytes", p.peak->peak_live_bytes},
               {"phase", PhaseName(p.peak->peak_phase)}, {"op", OpName(g, p.peak->peak_op)}};
  if (!lv.reserved.empty()) {
    const auto it = std::max_element(lv.reserved.begin(), lv.reserved.end());
    d["peak_reserved"] = {{"event", it - lv.reserved.begin()}, {"bytes", *it}};
  } else {
    d["peak_reserved"] = nullptr;
  }
  d["device_overhead_bytes"] = lv.device ? ordered_json(lv.overhead_bytes) : ordered_json(nullptr);
  d["capacity_bytes"] = lv.capacity_bytes > 0 ? ordered_json(lv.capacity_bytes) : ordered_json(nullptr);
  d["oom"] = lv.oom_event >= 0 ? ordered_json{{"event", lv.oom_event}, {"op", lv.oom_op}} : ordered_json(nullptr);
  d["points"] = Points(g, s, lv);
  return d;
}

/// The SVG of one panel, drawn from its data |d|.
class PanelSvg {
 public:
  PanelSvg(const ordered_json& d, int index) : d_(d), index_(index) {
    n_ = d["events"].get<size_t>();
    ymax_ = std::max<double>(1.0, static_cast<double>(d["y_max_bytes"].get<int64_t>()));
  }

  std::string Render() {
    o_ << "<svg class=\"timeline\" data-panel=\"" << index_ << "\" viewBox=\"0 0 " << kW << " " << kH
       << "\" preserveAspectRatio=\"xMinYMin meet\" xmlns=\"http://www.w3.org/2000/svg\">\n";
    Bands();
    Grid();
    Areas();
    Lines();
    Marks();
    o_ << "<line class=\"cursor\" x1=\"0\" y1=\"" << kTop << "\" x2=\"0\" y2=\"" << kH - kBottom
       << "\" stroke=\"#000\" stroke-width=\"1\" visibility=\"hidden\"/>\n";
    o_ << "<rect class=\"hover\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kW - kLeft - kRight
       << "\" height=\"" << kH - kTop - kBottom << "\" fill=\"transparent\"/>\n</svg>\n";
    return o_.str();
  }

 private:
  double X(double i) const { return kLeft + (n_ > 1 ? i * (kW - kLeft - kRight) / static_cast<double>(n_ - 1) : 0.0); }
  double Y(double v) const { return (kH - kBottom) - v * (kH - kBottom - kTop) / ymax_; }
  void Put(const char* f, ...) __attribute__((format(printf, 2, 3))) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    o_ << buf;
  }

  void Bands() {
    for (const auto& ph : d_["phases"]) {
      const std::string name = ph["phase"];
      int k = 0;
      for (int i = 0; i < kNumPhases; ++i)
        if (PhaseName(Phase(i)) == name) k = i;
      // A band reaches the next one's first event (no gap between phases).
      const double last = std::min(ph["last_event"].get<double>() + 1, static_cast<double>(n_ > 0 ? n_ - 1 : 0));
      const double x0 = X(ph["first_event"].get<double>()), x1 = X(last);
      Put("<rect class=\"phase-band\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>", x0, kTop,
          std::max(1.0, x1 - x0), kH - kTop - kBottom, kBands[k % 4]);
      if (x1 - x0 >= 24)
        Put("<text class=\"phase-label\" x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#555\">%s</text>\n", x0 + 3,
            kTop + 12, Escape(name).c_str());
      else
        o_ << "\n";
    }
  }

  void Grid() {
    const double step = d_["y_tick_step"].get<double>();
    const int64_t unit = d_["y_unit_bytes"].get<int64_t>();
    const std::string u = d_["y_unit"];
    for (int k = 0; step * k * static_cast<double>(unit) <= ymax_ * (1 + 1e-9); ++k) {
      const double y = Y(step * k * static_cast<double>(unit));
      Put("<line class=\"gridline\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\"/>"
          "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s %s</text>\n",
          kLeft, y, kW - kRight, y, k == 0 ? "#333" : "#ddd", kLeft - 6, y + 4, Fmt("%.4g", step * k).c_str(),
          u.c_str());
    }
    const int64_t xs = d_["x_tick_step"].get<int64_t>();
    for (int64_t e = 0; n_ > 0 && e <= static_cast<int64_t>(n_ - 1); e += xs)
      Put("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/><text class=\"xtick\" x=\"%.1f\" "
          "y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%lld</text>\n",
          X(static_cast<double>(e)), kH - kBottom, X(static_cast<double>(e)), kH - kBottom + 4,
          X(static_cast<double>(e)), kH - kBottom + 16, static_cast<long long>(e));
    Put("<text class=\"axis-label\" id=\"x-label-%d\" x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">"
        "memory events in order (each an allocation or a free; not time)</text>\n",
        index_, (kLeft + kW - kRight) / 2, kH - 8);
    Put("<text class=\"axis-label\" id=\"y-label-%d\" transform=\"rotate(-90)\" x=\"%d\" y=\"14\" font-size=\"12\" "
        "text-anchor=\"middle\">%s</text>\n",
        index_, -(kTop + kH - kBottom) / 2, u.c_str());
  }

  void Areas() {
    const ordered_json& pts = d_["points"];
    const auto& ev = pts["event"];
    if (ev.empty()) return;
    std::vector<double> cum(ev.size(), 0.0);
    std::vector<std::string> polys;
    for (int c = 0; c < kNumCategories; ++c) {
      const auto& v = pts["live"][std::string(CategoryName(Category(c)))];
      std::ostringstream poly;
      poly << "<polygon class=\"area\" fill=\"" << kColors[c] << "\" fill-opacity=\"0.85\" points=\"";
      for (size_t k = 0; k < ev.size(); ++k) {
        cum[k] += v[k].get<double>();
        poly << Fmt("%.1f,", X(ev[k].get<double>())) << Fmt("%.1f ", Y(cum[k]));
      }
      poly << Fmt("%.1f,", X(ev.back().get<double>())) << Fmt("%.1f ", Y(0)) << Fmt("%.1f,", X(ev.front().get<double>()))
           << Fmt("%.1f", Y(0)) << "\"><title>" << CategoryName(Category(c)) << "</title></polygon>\n";
      polys.push_back(poly.str());
    }
    for (int c = kNumCategories - 1; c >= 0; --c) o_ << polys[c];  // top first, lower ones paint over
  }

  void Polyline(const ordered_json& v, double add, const char* color, const char* cls, const char* title) {
    const auto& ev = d_["points"]["event"];
    o_ << "<polyline class=\"" << cls << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (size_t k = 0; k < ev.size(); ++k)
      o_ << Fmt("%.1f,", X(ev[k].get<double>())) << Fmt("%.1f ", Y(v[k].get<double>() + add));
    o_ << "\"><title>" << title << "</title></polyline>\n";
  }

  void Lines() {
    const ordered_json& reserved = d_["points"]["reserved"];
    if (reserved.is_null()) return;
    Polyline(reserved, 0, kReservedColor, "reserved-line", "reserved (max_memory_reserved)");
    if (!d_["device_overhead_bytes"].is_null())
      Polyline(reserved, d_["device_overhead_bytes"].get<double>(), kDeviceColor, "device-line", "device used (nvidia-smi)");
    const ordered_json& pr = d_["peak_reserved"];
    const double x = X(pr["event"].get<double>()), y = Y(pr["bytes"].get<double>());
    Put("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/><text class=\"reserved-label\" x=\"%.1f\" y=\"%.1f\" "
        "font-size=\"11\" text-anchor=\"%s\" fill=\"%s\">peak reserved %s</text>\n",
        x, y, kReservedColor, x < kW / 2 ? x + 6 : x - 6, y - 5, x < kW / 2 ? "start" : "end", kReservedColor,
        HumanBytes(pr["bytes"].get<int64_t>()).c_str());
  }

  void Marks() {
    const ordered_json& pk = d_["peak"];
    const double px = X(pk["event"].get<double>());
    const bool left = px > kW * 0.6;
    std::string label = "peak live " + HumanBytes(pk["live_bytes"].get<int64_t>()) + " (" + pk["phase"].get<std::string>() +
                        (pk["op"].get<std::string>().empty() ? "" : ", op " + pk["op"].get<std::string>()) + ")";
    Put("<line class=\"peak-line\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#d00\" stroke-dasharray=\"4 3\"/>"
        "<text class=\"peak-label\" x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"%s\" fill=\"#a00\">%s</text>\n",
        px, kTop, px, kH - kBottom, left ? px - 4 : px + 4, kTop + 26, left ? "end" : "start", Escape(label).c_str());
    if (!d_["capacity_bytes"].is_null()) {
      const int64_t cap = d_["capacity_bytes"].get<int64_t>();
      const double y = Y(static_cast<double>(cap));
      Put("<line class=\"capacity-line\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\">"
          "<title>capacity</title></line><text class=\"capacity-label\" x=\"%d\" y=\"%.1f\" font-size=\"11\" "
          "text-anchor=\"end\" fill=\"%s\">capacity %s</text>\n",
          kLeft, y, kW - kRight, y, kCapacityColor, kW - kRight - 4, y - 4, kCapacityColor, HumanBytes(cap).c_str());
    }
    if (!d_["oom"].is_null()) {
      const double x = X(d_["oom"]["event"].get<double>());
      const std::string op = d_["oom"]["op"];
      const std::string label = Escape("OOM" + (op.empty() ? "" : " at op " + op));
      const bool l = x > kW * 0.6;
      Put("<line class=\"oom-marker\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\">"
          "<title>%s</title></line><text class=\"oom-label\" x=\"%.1f\" y=\"%d\" font-size=\"12\" font-weight=\"bold\" "
          "text-anchor=\"%s\" fill=\"%s\">%s</text>\n",
          x, kTop, x, kH - kBottom, kCapacityColor, label.c_str(), l ? x - 4 : x + 4, kTop + 40, l ? "end" : "start",
          kCapacityColor, label.c_str());
    }
    for (const auto& st : d_["steps"]) {
      const double x = X(st["first_event"].get<double>());
      Put("<line class=\"step-line\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#555\" stroke-dasharray=\"2 2\"/>"
          "<text class=\"step-label\" x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#333\">step %lld</text>\n",
          x, kTop, x, kH - kBottom, x + 3, kTop - 6, static_cast<long long>(st["step"].get<int64_t>()));
    }
  }

  const ordered_json& d_;
  int index_;
  size_t n_ = 0;
  double ymax_ = 1;
  std::ostringstream o_;
};

std::string Legend(const ordered_json& d) {
  std::ostringstream o;
  o << "<p class=\"legend\">";
  for (int c = 0; c < kNumCategories; ++c)
    o << "<span style=\"color:" << kColors[c] << "\">&#9632;</span> " << CategoryName(Category(c)) << " &nbsp; ";
  if (!d["points"]["reserved"].is_null()) o << "<span style=\"color:" << kReservedColor << "\">&#9472;</span> reserved &nbsp; ";
  if (!d["points"]["reserved"].is_null() && !d["device_overhead_bytes"].is_null())
    o << "<span style=\"color:" << kDeviceColor << "\">&#9472;</span> device used = reserved + "
      << HumanBytes(d["device_overhead_bytes"].get<int64_t>()) << " CUDA context and libraries &nbsp; ";
  if (!d["capacity_bytes"].is_null()) o << "<span style=\"color:" << kCapacityColor << "\">&#9472;</span> capacity &nbsp; ";
  o << "<br>y: live bytes (requested sizes) stacked by category; the lines: the caching allocator model. "
       "Hover for each point's event, op and bytes.</p>\n";
  return o.str();
}

/// The category breakdown and the largest tensors alive at the peak.
std::string PeakTables(const Graph& g, const EventStream& s, const PeakReport& p, int top) {
  std::ostringstream o;
  o << "<h3>At the peak</h3>\n<table><tr><th>category</th><th>bytes</th></tr>\n";
  for (int c = 0; c < kNumCategories; ++c)
    if (p.breakdown_at_peak[c])
      o << "<tr><td>" << CategoryName(Category(c)) << "</td><td class=\"n\">" << HumanBytes(p.breakdown_at_peak[c])
        << "</td></tr>\n";
  o << "</table>\n<h3>Largest tensors alive at the peak</h3>\n<table><tr><th>tensor</th><th>bytes</th><th>category</th>"
       "<th>op</th><th>module</th></tr>\n";
  for (size_t i = 0; i < p.live_at_peak.size() && static_cast<int>(i) < top; ++i) {
    const Buffer& b = s.buffers[p.live_at_peak[i]];
    o << "<tr><td>" << Escape(b.name) << "</td><td class=\"n\">" << HumanBytes(b.bytes) << "</td><td>"
      << CategoryName(b.category) << "</td><td>" << Escape(OpName(g, b.op)) << "</td><td>" << Escape(b.module)
      << "</td></tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

/// JSON safe inside a <script> element: '<', '>' and '&' (only ever inside strings) escaped.
std::string ScriptJson(const ordered_json& d) {
  std::string out;
  for (char c : d.dump()) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

// The tooltip: the point nearest the pointer, its event, phase, op, tensor and bytes. Everything
// is looked up inside the script's own page (a notebook may show several pages).
constexpr const char* kScript = R"JS(
(function () {
  var root = document.currentScript.closest(".memsim-page");
  var data = JSON.parse(root.querySelector("script.memsim-data").textContent);
  var tip = root.querySelector(".memsim-tip");
  function fmt(b, p) { return (b / p.y_unit_bytes).toFixed(3) + " " + p.y_unit; }
  root.querySelectorAll("svg.timeline").forEach(function (svg) {
    var p = data.panels[+svg.getAttribute("data-panel")], pts = p.points, cur = svg.querySelector(".cursor");
    var n = pts.event.length, g = data.geometry;
    function xOf(e) { return g.left + (p.events > 1 ? e * (g.width - g.left - g.right) / (p.events - 1) : 0); }
    svg.addEventListener("mousemove", function (ev) {
      if (!n) return;
      var q = svg.createSVGPoint(); q.x = ev.clientX; q.y = ev.clientY;
      q = q.matrixTransform(svg.getScreenCTM().inverse());
      var lo = 0, hi = n - 1;
      while (lo < hi) { var m = (lo + hi) >> 1; if (xOf(pts.event[m]) < q.x) lo = m + 1; else hi = m; }
      if (lo > 0 && Math.abs(xOf(pts.event[lo - 1]) - q.x) < Math.abs(xOf(pts.event[lo]) - q.x)) lo--;
      var total = 0, rows = "";
      for (var c in pts.live) { var v = pts.live[c][lo]; total += v; if (v) rows += "<br>&nbsp; " + c + " " + fmt(v, p); }
      var t = "event " + pts.event[lo] + " (" + pts.phase[lo] + (pts.op[lo] ? ", op " + pts.op[lo] : "") + ")<br>" +
              pts.tensor[lo].replace(/&/g, "&amp;").replace(/</g, "&lt;") + "<br>live " + fmt(total, p) + rows;
      if (pts.reserved) t += "<br>reserved " + fmt(pts.reserved[lo], p);
      if (p.device_overhead_bytes !== null && pts.reserved) t += "<br>device used " + fmt(pts.reserved[lo] + p.device_overhead_bytes, p);
      tip.innerHTML = t; tip.style.display = "block";
      var r = root.getBoundingClientRect();
      tip.style.left = (ev.clientX - r.left + 14) + "px"; tip.style.top = (ev.clientY - r.top + 14) + "px";
      var x = xOf(pts.event[lo]); cur.setAttribute("x1", x); cur.setAttribute("x2", x); cur.setAttribute("visibility", "visible");
    });
    svg.addEventListener("mouseleave", function () { tip.style.display = "none"; cur.setAttribute("visibility", "hidden"); });
  });
  root.setAttribute("data-memsim-ready", "1");
})();
)JS";

}  // namespace

nlohmann::ordered_json TimelineData(const Graph& g, const std::vector<TimelinePanel>& panels) {
  ordered_json d;
  d["model"] = g.name;
  d["geometry"] = {{"width", kW}, {"height", kH}, {"left", kLeft}, {"right", kRight}, {"top", kTop}, {"bottom", kBottom}};
  d["panels"] = ordered_json::array();
  for (const TimelinePanel& p : panels) d["panels"].push_back(PanelData(g, p));
  return d;
}

std::string HtmlTimeline(const Graph& g, const std::vector<TimelinePanel>& panels, int top) {
  const ordered_json data = TimelineData(g, panels);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memsim: " << Escape(g.name)
    << "</title>\n<style>.memsim-page{font:14px sans-serif;margin:24px;position:relative}"
       ".memsim-page table{border-collapse:collapse}.memsim-page td,.memsim-page th{padding:2px 10px;text-align:left}"
       ".memsim-page td.n{text-align:right}.memsim-page svg.timeline{width:100%;height:auto;display:block}"
       ".memsim-tip{position:absolute;display:none;background:#fff;border:1px solid #999;padding:4px 8px;"
       "font:12px sans-serif;pointer-events:none;box-shadow:1px 1px 4px #aaa;z-index:10}"
       ".memsim-page .verdict{color:#333;margin-top:0}.memsim-page nav a{margin-right:12px}</style></head><body>\n"
       "<div class=\"memsim-page\">\n";
  const auto& ps = data["panels"];
  if (!ps.empty()) o << "<h2 class=\"headline\">" << Escape(ps[0]["headline"]) << "</h2>\n";
  if (ps.size() > 1) {
    o << "<nav>distinct ranks:";
    for (size_t k = 0; k < ps.size(); ++k)
      o << " <a href=\"#panel-" << k << "\">" << Escape(ps[k]["label"]) << "</a>";
    o << "</nav>\n";
  }
  for (size_t k = 0; k < ps.size(); ++k) {
    o << "<section class=\"panel\" id=\"panel-" << k << "\">\n";
    if (ps.size() > 1 || !ps[k]["label"].get<std::string>().empty())
      o << "<h3 class=\"panel-headline\">" << Escape(ps[k]["panel_headline"]) << "</h3>\n";
    o << "<p class=\"verdict\">" << Escape(ps[k]["verdict"]) << "</p>\n";
    o << PanelSvg(ps[k], static_cast<int>(k)).Render() << Legend(ps[k]);
    o << PeakTables(g, *panels[k].events, *panels[k].peak, top) << "</section>\n";
  }
  o << "<div class=\"memsim-tip\" id=\"memsim-tip\"></div>\n<script type=\"application/json\" class=\"memsim-data\" "
       "id=\"memsim-data\">"
    << ScriptJson(data) << "</script>\n<script>" << kScript << "</script>\n</div>\n</body></html>\n";
  return o.str();
}

std::string HtmlTimeline(const Graph& g, const EventStream& s, const PeakReport& p, int top,
                         const TimelineLevels& levels) {
  TimelinePanel panel;
  panel.events = &s;
  panel.peak = &p;
  panel.levels = levels;
  return HtmlTimeline(g, {panel}, top);
}

}  // namespace memsim
