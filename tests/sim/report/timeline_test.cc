#include "sim/report/timeline.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://", html.find("<svg") + 60), std::string::npos) << "nothing fetched";
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Largest tensors alive at the peak"), std::string::npos);
  const Buffer& top = run.r.events.buffers[run.r.peak.live_at_peak[0]];
  EXPECT_NE(html.find(top.name), std::string::npos);
  EXPECT_EQ(html, HtmlTimeline(run.g, run.r.events, run.r.peak, 5)) << "deterministic";
}

}  // namespace
}  // namespace memsim
