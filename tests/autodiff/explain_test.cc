#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/simulator.h"

namespace memsim {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr char kMlp[] = R"({"format": "memsim-graph", "version": 1, "name": "t",
  "inputs": [{"name": "x", "shape": [4, 32]}, {"name": "y", "shape": [4], "dtype": "int64"}],
  "parameters": [{"name": "w1", "shape": [128, 32]}, {"name": "w2", "shape": [10, 128]}],
  "ops": [{"op": "linear", "inputs": ["x", "w1"], "outputs": ["h"]},
          {"op": "relu", "inputs": ["h"], "outputs": ["r"]},
          {"op": "linear", "inputs": ["r", "w2"], "outputs": ["o"]},
          {"op": "cross_entropy", "inputs": ["o", "y"], "outputs": ["loss"]}],
  "outputs": ["o"], "loss": "loss"})";

std::vector<std::string> HeldBy(const SimResult& r, const std::string& name) {
  for (const Retention& ret : r.at_peak)
    if (r.events.buffers[ret.buffer].name == name) return ret.held_by;
  return {"<not alive at the peak>"};
}

TEST(ExplainTest, EveryBufferAliveAtThePeakHasAHolder) {
  auto g = ParseGraph(kMlp, "t.json");
  ASSERT_TRUE(g.ok());
  for (const char* profile : {"cuda", "cpu"}) {
    SimOptions opt;
    opt.profile = profile;
    opt.optimizer = "adam";
    opt.explain = true;
    auto r = Simulate(*g, opt);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->at_peak.size(), r->peak.live_at_peak.size()) << profile;
    int64_t bytes = 0;
    for (const Retention& ret : r->at_peak) {
      EXPECT_FALSE(ret.held_by.empty()) << r->events.buffers[ret.buffer].name;
      bytes += r->events.buffers[ret.buffer].bytes;
    }
    EXPECT_EQ(bytes, r->peak.peak_live_bytes) << profile;
  }
}

TEST(ExplainTest, NamesSavedTensorsGradsAndState) {
  auto g = ParseGraph(kMlp, "t.json");
  ASSERT_TRUE(g.ok());
  SimOptions opt;
  opt.profile = "cpu";
  opt.torch = "1.13";
  opt.optimizer = "adam";
  opt.explain = true;
  auto r = Simulate(*g, opt);
  ASSERT_TRUE(r.ok());
  // The cpu Adam first step peaks in optimizer.step(): grads and new state are alive.
  ASSERT_EQ(r->peak.peak_phase, Phase::kOptimizer);
  EXPECT_THAT(HeldBy(*r, "w1"), Contains(HasSubstr("parameter w1")));
  EXPECT_THAT(HeldBy(*r, "w1.grad"), Contains(HasSubstr(".grad of w1")));
  EXPECT_THAT(HeldBy(*r, "w1.exp_avg"), Contains("optimizer state"));

  // Stopping at the forward peak instead: the relu output is saved for backward.
  opt.optimizer = "sgd";
  auto f = Simulate(*g, opt);
  ASSERT_TRUE(f.ok());
  auto g2 = ParseGraph(kMlp, "t.json");
  StepConfig cfg;
  cfg.profile = &f->profile;
  cfg.optimizer = f->optimizer;
  cfg.frozen = f->frozen;
  size_t fwd_end = 0;
  for (size_t i = 0; i < f->events.events.size(); ++i)
    if (f->events.events[i].phase == Phase::kForward) fwd_end = i;
  auto fwd = ExplainAtEvent(*g2, f->bound, cfg, fwd_end);
  bool relu_saved = false;
  for (const Retention& ret : fwd)
    if (f->events.buffers[ret.buffer].name == "r")
      for (const std::string& h : ret.held_by) relu_saved |= h.find("saved by") != std::string::npos;
  EXPECT_TRUE(relu_saved);
}

}  // namespace
}  // namespace memsim
