#include "sim/report/timeline.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <sstream>

#include "sim/report/format.h"

namespace memsim {
namespace {

std::string OpName(const Graph& g, uint32_t op) { return op < g.ops.size() ? g.ops[op].name : ""; }
std::string OpModule(const Graph& g, uint32_t op) { return op < g.ops.size() ? g.ops[op].module : ""; }

// The op clock (Note [Timeline clock]): each run of events of one op (or of one phase outside
// the ops) takes one unit, its events spread evenly inside it.
constexpr double kOpMicros = 1000.0;  // one op = 1 ms of trace time

std::string OomLabel(const TimelineLevels& lv) { return "OOM" + (lv.oom_op.empty() ? "" : " at op " + lv.oom_op); }

bool RunEnds(const EventStream& s, size_t i) {
  return i + 1 == s.events.size() || s.events[i + 1].op != s.events[i].op ||
         s.events[i + 1].phase != s.events[i].phase;
}

/// Per event, its time on the op clock (µs); |runs|: the number of op runs.
std::vector<double> OpClock(const EventStream& s, size_t* runs) {
  std::vector<double> ts(s.events.size());
  size_t run = 0, start = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    if (!RunEnds(s, i)) continue;
    const double k = static_cast<double>(i + 1 - start);
    for (size_t j = start; j <= i; ++j) ts[j] = (static_cast<double>(run) + static_cast<double>(j - start) / k) * kOpMicros;
    ++run;
    start = i + 1;
  }
  *runs = run;
  return ts;
}

}  // namespace

std::vector<int64_t> ReservedSeries(const std::vector<int64_t>& segment_bytes) {
  std::vector<int64_t> r(segment_bytes.size());
  int64_t total = 0;
  for (size_t i = 0; i < segment_bytes.size(); ++i) r[i] = total += segment_bytes[i];
  return r;
}

Status StreamChromeTrace(const Graph& g, const EventStream& s, const PeakReport& p, int64_t min_alloc_bytes,
                         const TimelineLevels& levels, const std::function<Status(std::string_view)>& sink) {
  // Each event is dumped as it is made and the text handed on in chunks: the bytes are those of
  // the whole document's dump(), without holding the document (Note [Timeline clock]).
  std::string buf = "{\"traceEvents\":[";
  bool first = true;
  Status status;
  auto emit = [&](const nlohmann::ordered_json& e) {
    if (!first) buf += ',';
    first = false;
    buf += e.dump();
    if (buf.size() >= (1u << 20) && status.ok()) {
      status = sink(buf);
      buf.clear();
    }
  };
  size_t runs = 0;
  const std::vector<double> ts = OpClock(s, &runs);
  auto at = [&](int64_t i) { return i >= 0 && static_cast<size_t>(i) < ts.size() ? ts[static_cast<size_t>(i)] : 0.0; };
  emit({{"name", "process_name"}, {"ph", "M"}, {"pid", 1},
                    {"args", {{"name", "memsim: " + g.name + " (time axis: op order, 1 ms per op; not measured time)"}}}});
  emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "ops"}}}});
  std::array<int64_t, kNumCategories> live{};
  size_t run_start = 0, run = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    const Buffer& b = s.buffers[e.buffer];
    live[static_cast<int>(b.category)] += e.kind == EventKind::kAlloc ? b.bytes : -b.bytes;
    nlohmann::ordered_json args;
    for (int c = 0; c < kNumCategories; ++c) args[std::string(CategoryName(Category(c)))] = live[c];
    emit({{"name", "live bytes"}, {"ph", "C"}, {"pid", 1}, {"ts", ts[i]}, {"args", args}});
    if (i < levels.reserved.size()) {
      nlohmann::ordered_json lv = {{"reserved", levels.reserved[i]}};
      if (levels.device) lv["device used"] = levels.reserved[i] + levels.overhead_bytes;
      lv["capacity"] = levels.capacity_bytes;
      emit({{"name", "device levels"}, {"ph", "C"}, {"pid", 1}, {"ts", ts[i]}, {"args", lv}});
    }
    if (e.kind == EventKind::kAlloc && b.bytes >= min_alloc_bytes)
      emit({{"name", "alloc " + b.name}, {"ph", "i"}, {"s", "t"}, {"pid", 1}, {"tid", 1}, {"ts", ts[i]},
                        {"args", {{"bytes", b.bytes}, {"category", CategoryName(b.category)}, {"op", OpName(g, b.op)},
                                  {"module", b.module}, {"event", i}}}});
    if (RunEnds(s, i)) {
      std::string name = e.op == kNoOp ? std::string(PhaseName(e.phase)) : OpName(g, e.op);
      emit({{"name", name}, {"cat", PhaseName(e.phase)}, {"ph", "X"}, {"pid", 1}, {"tid", 1},
                        {"ts", static_cast<double>(run) * kOpMicros}, {"dur", kOpMicros},
                        {"args", {{"phase", PhaseName(e.phase)}, {"module", OpModule(g, e.op)}, {"op_index", run},
                                  {"first_event", run_start}, {"events", i + 1 - run_start}}}});
      run_start = i + 1;
      ++run;
    }
  }
  emit({{"name", "peak " + HumanBytes(p.peak_live_bytes)}, {"ph", "i"}, {"s", "g"}, {"pid", 1}, {"tid", 1},
                    {"ts", at(p.peak_event)},
                    {"args", {{"peak_live_bytes", p.peak_live_bytes}, {"op", OpName(g, p.peak_op)}, {"event", p.peak_event}}}});
  if (levels.oom_event >= 0)
    emit({{"name", OomLabel(levels)}, {"ph", "i"}, {"s", "g"}, {"pid", 1}, {"tid", 1},
                      {"ts", at(levels.oom_event)},
                      {"args", {{"oom_op", levels.oom_op}, {"capacity_bytes", levels.capacity_bytes},
                                {"event", levels.oom_event}}}});
  nlohmann::ordered_json other = {{"model", g.name},
                      {"time_axis", "synthetic op clock, not measured or estimated time: each run of memory events "
                                    "of one op (or of one phase outside the ops) takes 1 ms, its events spread "
                                    "evenly inside it; ts / 1000 = op index (args op_index)"},
                      {"ops", runs},
                      {"events", s.events.size()}};
  if (levels.capacity_bytes > 0) {
    other["capacity_bytes"] = levels.capacity_bytes;
    other["oom"] = levels.oom_event >= 0;
    other["oom_op"] = levels.oom_event >= 0 ? nlohmann::ordered_json(levels.oom_op) : nlohmann::ordered_json();
  }
  buf += "],\"displayTimeUnit\":\"ms\",\"otherData\":" + other.dump() + "}\n";
  if (status.ok()) status = sink(buf);
  return status;
}

std::string ChromeTraceText(const Graph& g, const EventStream& s, const PeakReport& p, int64_t min_alloc_bytes,
                            const TimelineLevels& levels) {
  std::string text;
  (void)StreamChromeTrace(g, s, p, min_alloc_bytes, levels, [&](std::string_view chunk) {
    text += chunk;
    return Status::OK();
  });
  return text;
}

nlohmann::ordered_json ChromeTrace(const Graph& g, const EventStream& s, const PeakReport& p,
                                   int64_t min_alloc_bytes, const TimelineLevels& levels) {
  return nlohmann::ordered_json::parse(ChromeTraceText(g, s, p, min_alloc_bytes, levels));
}

TimelineLevels LevelsOf(const Graph& g, const RunResult& r, int64_t capacity_bytes) {
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
  lv.figures = FiguresOf(g, r, capacity_bytes);
  return lv;
}

TimelinePanel PanelOf(const Graph& g, const RunConfig& c, const std::vector<int>& ranks, const RunResult& r) {
  TimelinePanel p;
  if (c.sim.parallel.enabled()) {
    const bool one = ranks.size() == 1;
    p.label = (c.sim.parallel.data_parallel ? (one ? "device " : "devices ") : (one ? "rank " : "ranks ")) +
              RankList(ranks);
  }
  p.events = &r.sim.events;
  p.peak = &r.sim.peak;
  p.levels = LevelsOf(g, r, c.alloc.capacity_bytes);
  return p;
}

std::vector<TimelinePanel> PanelsOf(const Graph& g, const RunConfig& c, const std::vector<RankRun>& runs) {
  std::vector<TimelinePanel> panels;
  for (const RankRun& k : runs) panels.push_back(PanelOf(g, c, k.ranks, k.result));
  return panels;
}

}  // namespace memsim
