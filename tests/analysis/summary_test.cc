// Per-layer summary (lib/analysis/summary.h): saved bytes per module and parameter counts.
#include "lib/analysis/summary.h"

#include <gtest/gtest.h>

#include "tests/autodiff/mlp_fixture.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using namespace testing;  // NOLINT

const LayerRow* Row(const LayerTable& t, const std::string& module) {
  for (const LayerRow& r : t.rows)
    if (r.module == module) return &r;
  return nullptr;
}

TEST(SummaryTest, SavedBytesPerLayerFollowTheRules) {
  auto run = testing::Simulate(MlpBody());
  ASSERT_TRUE(run.ok) << run.error;
  LayerTable t = SummarizeLayers(run.graph, run.r.bound, run.r.profile, run.r.frozen);
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(Row(t, "l1")->saved_bytes, 8 * 32 * 4);           // x (W requires grad)
  EXPECT_EQ(Row(t, "act")->saved_bytes, 8 * 64 * 4);          // relu result
  EXPECT_EQ(Row(t, "l2")->saved_bytes, 8 * 64 * 4);           // r
  EXPECT_EQ(Row(t, "loss")->saved_bytes, 8 * 10 * 4 + 8 * 8 + 4);  // log_softmax, the int64 target, total_weight
  EXPECT_EQ(Row(t, "l1")->params, 64 * 32 + 64);
  EXPECT_EQ(t.total_params, kParamBytes / 4);
  EXPECT_EQ(t.trainable_params, t.total_params);
  EXPECT_EQ(Row(t, "l2")->output_shape, "[8, 10]");
}

TEST(SummaryTest, FrozenPrefixSavesNothingAndIsNotTrainable) {
  SimOptions o = Opts();
  o.freeze_globs = {"l1.*"};
  auto run = testing::Simulate(MlpBody(), o);
  ASSERT_TRUE(run.ok) << run.error;
  LayerTable t = SummarizeLayers(run.graph, run.r.bound, run.r.profile, run.r.frozen);
  EXPECT_EQ(Row(t, "l1")->saved_bytes, 0);
  EXPECT_EQ(Row(t, "act")->saved_bytes, 0);
  EXPECT_EQ(Row(t, "l2")->saved_bytes, 8 * 64 * 4);
  EXPECT_EQ(t.trainable_params, (kW2 + kB2) / 4);
}

}  // namespace
}  // namespace memsim
