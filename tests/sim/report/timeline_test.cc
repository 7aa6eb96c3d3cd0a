#include "sim/report/timeline.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "lib/io/graph_json.h"
#include "sim/simulator.h"

namespace memsim {
namespace {

struct SimRun {
  Graph g;
  SimResult r;
};

SimRun Mlp() {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
  EXPECT_TRUE(g.ok());
  SimOptions opt;
  opt.symbols["batch"] = 64;
  opt.optimizer = "adam";
  auto r = Simulate(*g, opt);
  EXPECT_TRUE(r.ok());
  return {std::move(g).value(), std::move(r).value()};
}

TEST(TimelineTest, StreamedChromeTraceIsTheDocumentsDumpInChunks) {
  SimRun run = Mlp();
  std::vector<std::string> chunks;
  ASSERT_TRUE(StreamChromeTrace(run.g, run.r.events, run.r.peak, 0, {}, [&](std::string_view c) {
                chunks.emplace_back(c);
                return Status::OK();
              }).ok());
  std::string text;
  for (const std::string& c : chunks) text += c;
  const auto doc = ChromeTrace(run.g, run.r.events, run.r.peak, 0);
  EXPECT_EQ(text, doc.dump() + "\n");  // the same bytes as dumping the whole document
  EXPECT_EQ(text, ChromeTraceText(run.g, run.r.events, run.r.peak, 0));
  // A sink's error (a full disk) ends the stream and is returned.
  int calls = 0;
  Status st = StreamChromeTrace(run.g, run.r.events, run.r.peak, 0, {}, [&](std::string_view) {
    ++calls;
    return Status::InvalidArgument("t.json: cannot write: No space left on device");
  });
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(calls, 1);
}

TEST(TimelineTest, ChromeTraceHasACounterPerEventAndSlicesPerOp) {
  SimRun run = Mlp();
  auto doc = ChromeTrace(run.g, run.r.events, run.r.peak, 0);
  int counters = 0, slices = 0, allocs = 0, peaks = 0;
  int64_t last_total = 0;
  for (const auto& e : doc["traceEvents"]) {
    std::string ph = e["ph"];
    if (ph == "C") {
      ++counters;
      last_total = 0;
      for (auto& [k, v] : e["args"].items()) last_total += v.get<int64_t>();
    }
    if (ph == "X") ++slices;
    if (ph == "i" && e["name"].get<std::string>().starts_with("alloc ")) {
      ++allocs;
      EXPECT_TRUE(e["args"].contains("category"));
      EXPECT_TRUE(e["args"].contains("op"));
    }
    if (ph == "i" && e["name"].get<std::string>().starts_with("peak ")) {
      ++peaks;
      EXPECT_EQ(e["args"]["peak_live_bytes"], run.r.peak.peak_live_bytes);
    }
  }
  EXPECT_EQ(counters, static_cast<int>(run.r.events.events.size()));
  EXPECT_EQ(last_total, run.r.peak.final_bytes);
  EXPECT_GT(slices, static_cast<int>(run.g.ops.size())) << "forward and backward slices";
  int n_alloc = 0;
  for (const MemEvent& e : run.r.events.events) n_alloc += e.kind == EventKind::kAlloc;
  EXPECT_EQ(allocs, n_alloc);
  EXPECT_EQ(peaks, 1);
}

TEST(TimelineTest, HtmlIsStandaloneAndNamesThePeak) {
  SimRun run = Mlp();
  std::string html = HtmlTimeline(run.g, run.r.events, run.r.peak, 5);
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_EQ(html.find("<script src"), std::string::npos) << "one inline script, nothing fetched";
  EXPECT_EQ(html.find("http://", html.find(">", html.find("<svg"))), std::string::npos) << "nothing fetched";
  EXPECT_NE(html.find("viewBox=\"0 0 "), std::string::npos) << "the width follows the window";
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Largest tensors alive at the peak"), std::string::npos);
  const Buffer& top = run.r.events.buffers[run.r.peak.live_at_peak[0]];
  EXPECT_NE(html.find(top.name), std::string::npos);
  EXPECT_EQ(html, HtmlTimeline(run.g, run.r.events, run.r.peak, 5)) << "deterministic";
}

TEST(TimelineTest, ReservedSeriesAccumulatesTheSegmentsObtained) {
  EXPECT_EQ(ReservedSeries({2, 0, 0, 20, 0}), (std::vector<int64_t>{2, 2, 2, 22, 22}));
  EXPECT_TRUE(ReservedSeries({}).empty());
}

TEST(TimelineTest, DeviceLevelsAreDrawnAsLinesAndACounterTrack) {
  SimRun run = Mlp();
  const size_t n = run.r.events.events.size();
  TimelineLevels lv;
  lv.reserved.assign(n, 0);
  for (size_t i = 0; i < n; ++i) lv.reserved[i] = static_cast<int64_t>(i / 10 + 1) << 20;
  lv.device = true;
  lv.overhead_bytes = int64_t{100} << 20;
  lv.capacity_bytes = int64_t{200} << 20;
  std::string html = HtmlTimeline(run.g, run.r.events, run.r.peak, 5, lv);
  EXPECT_NE(html.find("<title>reserved (max_memory_reserved)</title></polyline>"), std::string::npos);
  EXPECT_NE(html.find("<title>device used (nvidia-smi)</title></polyline>"), std::string::npos);
  EXPECT_NE(html.find("<title>capacity</title></line>"), std::string::npos);
  EXPECT_NE(html.find(">capacity 200.00 MiB</text>"), std::string::npos) << "the capacity line is labelled";
  EXPECT_NE(html.find("class=\"reserved-label\""), std::string::npos) << "the peak reserved is labelled";
  EXPECT_NE(html.find("device used = reserved + 100.00 MiB"), std::string::npos);
  EXPECT_EQ(HtmlTimeline(run.g, run.r.events, run.r.peak, 5).find("<polyline"), std::string::npos)
      << "no lines without levels";
  auto doc = ChromeTrace(run.g, run.r.events, run.r.peak, 0, lv);
  size_t levels = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["name"] == "device levels") {
      ++levels;
      EXPECT_EQ(e["args"]["device used"].get<int64_t>(),
                e["args"]["reserved"].get<int64_t>() + lv.overhead_bytes);
      EXPECT_EQ(e["args"]["capacity"].get<int64_t>(), lv.capacity_bytes);
    }
  EXPECT_EQ(levels, n);
}

TEST(TimelineTest, TheOomIsMarkedWhereTheCapacityLimitedAllocatorFails) {
  SimRun run = Mlp();
  TimelineLevels lv;
  lv.capacity_bytes = int64_t{1} << 20;
  lv.oom_event = 7;
  lv.oom_op = run.g.ops[0].name;
  const std::string html = HtmlTimeline(run.g, run.r.events, run.r.peak, 5, lv);
  EXPECT_NE(html.find("<title>OOM at op " + lv.oom_op + "</title></line>"), std::string::npos);
  EXPECT_NE(html.find("class=\"oom-label\""), std::string::npos);
  EXPECT_NE(html.find("<title>capacity</title></line>"), std::string::npos);
  EXPECT_NE(html.find("does not fit in 1.00 MiB, OOM at op " + lv.oom_op), std::string::npos);
  auto doc = ChromeTrace(run.g, run.r.events, run.r.peak, 0, lv);
  int marks = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["name"] == "OOM at op " + lv.oom_op) {
      ++marks;
      EXPECT_EQ(e["args"]["event"].get<int64_t>(), 7);
    }
  EXPECT_EQ(marks, 1);
  EXPECT_EQ(doc["otherData"]["oom"], true);
  EXPECT_EQ(doc["otherData"]["oom_op"], lv.oom_op);
}

// Note [Timeline clock]: trace time is op order, labelled as such; never one event per µs.
TEST(TimelineTest, ChromeTraceTimeIsTheOpIndexAndSaysSo) {
  SimRun run = Mlp();
  auto doc = ChromeTrace(run.g, run.r.events, run.r.peak, 0);
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  EXPECT_NE(doc["otherData"]["time_axis"].get<std::string>().find("not measured or estimated time"), std::string::npos);
  EXPECT_NE(doc["traceEvents"][0]["args"]["name"].get<std::string>().find("time axis: op order"), std::string::npos);
  int64_t slices = 0;
  double last_ts = -1;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      EXPECT_EQ(e["ts"].get<double>(), 1000.0 * static_cast<double>(e["args"]["op_index"].get<int64_t>()));
      EXPECT_EQ(e["dur"].get<double>(), 1000.0);
      EXPECT_EQ(e["args"]["op_index"].get<int64_t>(), slices++);
    }
    if (e["ph"] == "C" && e["name"] == "live bytes") {
      EXPECT_GE(e["ts"].get<double>(), last_ts) << "events in order";
      last_ts = e["ts"].get<double>();
    }
  }
  EXPECT_EQ(doc["otherData"]["ops"].get<int64_t>(), slices);
  EXPECT_LT(last_ts, 1000.0 * static_cast<double>(slices));
}

// The page's data: ticks cover the plot in a GiB/MiB unit, phases tile the events, the points
// are at most 1000 and keep the peak.
TEST(TimelineTest, PageDataHasAxesPhasesAndPoints) {
  SimRun run = Mlp();
  TimelinePanel panel{"", &run.r.events, &run.r.peak, {}};
  auto d = TimelineData(run.g, {panel});
  ASSERT_EQ(d["panels"].size(), 1u);
  const auto& p = d["panels"][0];
  EXPECT_EQ(p["y_unit"], "MiB");
  EXPECT_GE(p["y_max_bytes"].get<int64_t>(), run.r.peak.peak_live_bytes);
  const double step = p["y_tick_step"].get<double>();
  EXPECT_GE(p["y_max_bytes"].get<double>() / (step * 1048576.0), 3.0);
  EXPECT_LE(p["y_max_bytes"].get<double>() / (step * 1048576.0), 10.0);
  const size_t n = run.r.events.events.size();
  EXPECT_EQ(p["phases"][0]["first_event"], 0);
  EXPECT_EQ(p["phases"].back()["last_event"].get<size_t>(), n - 1);
  const auto& ev = p["points"]["event"];
  EXPECT_LE(ev.size(), 1000u);
  EXPECT_NE(std::find(ev.begin(), ev.end(), run.r.peak.peak_event), ev.end()) << "the peak is a point";
  EXPECT_EQ(p["headline"].get<std::string>().rfind(run.g.name + ": peak live ", 0), 0u) << "no figures given";
  EXPECT_TRUE(p["points"]["reserved"].is_null());
  EXPECT_TRUE(p["oom"].is_null());
}

TEST(TimelineTest, YTicksUseGiBFromOneGiB) {
  SimRun run = Mlp();
  TimelineLevels lv;
  lv.capacity_bytes = int64_t{24} << 30;
  TimelinePanel panel{"rank 0", &run.r.events, &run.r.peak, lv};
  auto p = TimelineData(run.g, {panel, panel})["panels"][1];
  EXPECT_EQ(p["y_unit"], "GiB");
  EXPECT_EQ(p["y_tick_step"].get<double>(), 5.0);
  EXPECT_EQ(p["y_max_bytes"].get<int64_t>(), int64_t{25} << 30);
  const std::string html = HtmlTimeline(run.g, {panel, panel}, 3);
  EXPECT_NE(html.find(">20 GiB</text>"), std::string::npos);
  EXPECT_NE(html.find("id=\"panel-1\""), std::string::npos);
  EXPECT_NE(html.find("class=\"panel-headline\">mlp, rank 0: "), std::string::npos);
}

}  // namespace
}  // namespace memsim
