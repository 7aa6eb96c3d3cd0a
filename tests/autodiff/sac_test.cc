// Selective activation checkpointing (--sac) and the 2.x checkpoint's early stop (Notes
// [Selective activation checkpointing], [Activation checkpointing] in docs/op-rules.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "lib/autodiff/setups/sac.h"
#include "lib/io/graph_json.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ZooGraph;

using ::testing::HasSubstr;
using testing::SimulateOk;


SimOptions Gpt2(const std::vector<std::string>& checkpoint, const std::string& sac = "") {
  SimOptions opt;
  opt.symbols = {{"batch", 2}, {"seq", 128}};
  opt.optimizer = "adamw";
  opt.checkpoint_globs = checkpoint;
  opt.sac = sac;
  return opt;
}

/// Allocations in backward of buffers named exactly |name| (a recomputed tensor).
size_t BackwardAllocs(const SimResult& r, const std::string& name) {
  size_t n = 0;
  for (const MemEvent& e : r.events.events)
    n += e.kind == EventKind::kAlloc && e.phase == Phase::kBackward && r.events.buffers[e.buffer].name == name;
  return n;
}

/// The output name of the op of |module| with kind |kind| (the first one).
std::string OutputOf(const Graph& g, const std::string& module, OpKind kind) {
  for (const Op& op : g.ops)
    if (op.module == module && op.kind == kind) return g.tensors[op.outputs[0]].name;
  return "";
}

TEST(SacPolicyTest, NamedPoliciesListsAndFiles) {
  auto titan = ParseSacPolicy("torchtitan");
  ASSERT_TRUE(titan.ok());
  EXPECT_TRUE(titan->every_other_mm);
  EXPECT_THAT(titan->save, ::testing::Contains("mm"));
  EXPECT_THAT(titan->save, ::testing::Contains("_scaled_dot_product_flash_attention"));
  auto ops = ParseSacPolicy("ops:mm,addmm");
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ops->save, (std::vector<std::string>{"mm", "addmm"}));
  EXPECT_FALSE(ops->every_other_mm);
  EXPECT_FALSE(ParseSacPolicy("ops:").ok());
  const std::string path = ::testing::TempDir() + "/sac_policy.json";
  std::ofstream(path) << R"({"save": ["bmm"], "every_other_mm": true})";
  auto file = ParseSacPolicy(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->save, (std::vector<std::string>{"bmm"}));
  std::ofstream(path) << R"({"save": [3]})";
  auto bad = ParseSacPolicy(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("/save/0"));
  std::remove(path.c_str());
  EXPECT_THAT(ParseSacPolicy("no_such_policy.json").status().message(), HasSubstr("torchtitan"));
}

TEST(SacPolicyTest, RecordedPoliciesDecidePerModuleCallAndOpCall) {
  const std::string path = ::testing::TempDir() + "/sac_recorded.json";
  std::ofstream(path) << R"({"recorded": {"a": [{"mm": [true, false, true]}, {}], "b": [{"bmm": [false, true]}]},
                            "policy": "policy_fn"})";
  auto p = ParseSacPolicy(path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->enabled());
  EXPECT_TRUE(p->Saves("a", 0, "mm", 0));
  EXPECT_FALSE(p->Saves("a", 0, "mm", 1));
  EXPECT_TRUE(p->Saves("a", 0, "mm", 2));
  EXPECT_FALSE(p->Saves("a", 0, "mm", 3));   // more calls than recorded: recomputed
  EXPECT_FALSE(p->Saves("a", 1, "mm", 0));   // the module's second call saved nothing
  EXPECT_FALSE(p->Saves("a", 2, "mm", 0));
  EXPECT_TRUE(p->Saves("b", 0, "bmm", 1));
  EXPECT_FALSE(p->Saves("c", 0, "mm", 0));
  for (const char* bad : {R"({"recorded": {"a": [{"mm": [true, 1]}]}})", R"({"recorded": {"a": {"mm": []}}})",
                          R"({"recorded": {}})", R"({"recorded": {"a": []}, "save": ["mm"]})"}) {
    std::ofstream(path) << bad;
    auto r = ParseSacPolicy(path);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(path + ": /")) << bad;
  }
  std::ofstream(path) << R"({"recorded": {"a": [{"mm": [true, 1]}]}})";
  EXPECT_THAT(ParseSacPolicy(path).status().message(), HasSubstr("/recorded/a/0/mm"));
  std::remove(path.c_str());
}

TEST(SacTest, ARecordedTorchtitanPolicyRunsAsTheNamedOne) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  const std::string path = ::testing::TempDir() + "/sac_titan.json";
  {
    std::ofstream f(path);
    f << R"({"recorded": {)";
    for (int i = 0; i < 12; ++i)
      f << (i ? "," : "") << "\"transformer.h." << i << R"(": [{"mm": [true, false, true, false]}])";
    f << "}}";
  }
  SimResult recorded = SimulateOk(g, Gpt2({"transformer.h.*"}, path));
  SimResult titan = SimulateOk(g, Gpt2({"transformer.h.*"}, "torchtitan"));
  ASSERT_EQ(recorded.events.events.size(), titan.events.events.size());
  for (size_t i = 0; i < titan.events.events.size(); ++i) {
    const MemEvent& a = recorded.events.events[i];
    const MemEvent& b = titan.events.events[i];
    ASSERT_EQ(a.kind, b.kind) << "event " << i;
    ASSERT_EQ(recorded.events.buffers[a.buffer].bytes, titan.events.buffers[b.buffer].bytes) << "event " << i;
  }
  std::remove(path.c_str());
}

TEST(SacTest, SavedMatmulsAreKeptFromTheForwardAndNotRunAgain) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  const std::string fc = OutputOf(g, "transformer.h.0.mlp.c_fc", OpKind::kLinear);
  ASSERT_FALSE(fc.empty());
  SimResult none = SimulateOk(g, Gpt2({}));
  SimResult full = SimulateOk(g, Gpt2({"transformer.h.*"}));
  SimResult sac = SimulateOk(g, Gpt2({"transformer.h.*"}, "ops:mm,addmm"));
  EXPECT_EQ(BackwardAllocs(full, fc), 1u);  // recomputed
  EXPECT_EQ(BackwardAllocs(sac, fc), 0u);   // cached in forward
  const auto fwd = [](const SimResult& r) { return r.peak.phase_peaks[int(Phase::kForward)]; };
  EXPECT_LT(fwd(full), fwd(sac));
  EXPECT_LT(fwd(sac), fwd(none));
}

TEST(SacTest, TorchtitanRecomputesEveryOtherMm) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimResult all = SimulateOk(g, Gpt2({"transformer.h.*"}, "ops:mm"));
  SimResult titan = SimulateOk(g, Gpt2({"transformer.h.*"}, "torchtitan"));
  SimResult full = SimulateOk(g, Gpt2({"transformer.h.*"}));
  const auto fwd = [](const SimResult& r) { return r.peak.phase_peaks[int(Phase::kForward)]; };
  EXPECT_LT(fwd(titan), fwd(all));
  EXPECT_LT(fwd(full), fwd(titan));
}

TEST(SacTest, NeedsNonReentrantCheckpointRegions) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  auto no_regions = Simulate(g, Gpt2({}, "torchtitan"));
  ASSERT_FALSE(no_regions.ok());
  EXPECT_THAT(no_regions.status().message(), HasSubstr("add --checkpoint GLOB"));
  SimOptions reentrant = Gpt2({"transformer.h.*"}, "torchtitan");
  reentrant.checkpoint_impl = "reentrant";
  auto r = Simulate(g, reentrant);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("non-reentrant"));
}

TEST(EarlyStopTest, TrailingOpsThatSaveNothingAreNotRecomputed) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  // A GPT block ends with the residual add, which saves nothing.
  std::string residual;
  for (const Op& op : g.ops)
    if (op.module == "transformer.h.0" && op.kind == OpKind::kAdd) residual = g.tensors[op.outputs[0]].name;
  ASSERT_FALSE(residual.empty());
  SimOptions on = Gpt2({"transformer.h.*"});
  SimOptions off = on;
  off.checkpoint_early_stop = false;
  EXPECT_EQ(BackwardAllocs(SimulateOk(g, on), residual), 0u);
  EXPECT_EQ(BackwardAllocs(SimulateOk(g, off), residual), 1u);
  SimOptions v113 = on;
  v113.torch = "1.13";
  EXPECT_EQ(BackwardAllocs(SimulateOk(g, v113), residual), 1u);  // 1.13 recomputes the whole region
}

}  // namespace
}  // namespace memsim
