// Frozen parameters (--freeze globs, --freeze-params): no grads, no optimizer state, and fewer
// saved activations (docs/op-rules.md, Note [Saved tensors]: what a node saves depends on which
// inputs require grad).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/autodiff/mlp_fixture.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace testing;  // NOLINT

SimOptions Frozen(std::vector<std::string> globs, const std::string& opt = "adam") {
  SimOptions o = Opts("cuda", opt);
  o.freeze_globs = std::move(globs);
  return o;
}

TEST(FreezeTest, FrozenParametersGetNoGradAndNoOptimizerState) {
  auto run = testing::Simulate(MlpBody(), Frozen({"l1.*"}));
  ASSERT_TRUE(run.ok) << run.error;
  const auto& s = run.r.events;
  EXPECT_TRUE(BuffersNamed(s, "l1.weight.grad").empty());
  EXPECT_TRUE(BuffersNamed(s, "l1.bias.grad").empty());
  EXPECT_TRUE(BuffersContaining(s, "l1.weight.exp_avg").empty());
  EXPECT_EQ(BuffersNamed(s, "l2.weight.grad").size(), 1u);
  EXPECT_EQ(AllocatedBytes(s, Category::kOptimizerState), 2 * (kW2 + kB2));
  EXPECT_THAT(run.r.frozen, ElementsAre(true, true, false, false));
}

TEST(FreezeTest, FreezeParamsCountMatchesGlob) {
  SimOptions o = Opts("cuda", "adam");
  o.freeze_params = 2;
  auto by_count = testing::Simulate(MlpBody(), o);
  auto by_glob = testing::Simulate(MlpBody(), Frozen({"l1.*"}));
  ASSERT_TRUE(by_count.ok && by_glob.ok);
  EXPECT_EQ(by_count.r.frozen, by_glob.r.frozen);
  EXPECT_EQ(by_count.r.peak.peak_live_bytes, by_glob.r.peak.peak_live_bytes);
}

TEST(FreezeTest, LinearWithFrozenWeightSavesNoInput) {
  auto run = testing::Simulate(MlpBody(), Frozen({"l2.weight"}));
  ASSERT_TRUE(run.ok) << run.error;
  // r requires grad (l1 trainable) but l2.weight is frozen: only W (a parameter) is kept.
  EXPECT_THAT(SavedNames(run, "logits"), ElementsAre("l2.weight"));
  EXPECT_EQ(SavedActivationBytes(run, "logits"), 0);
}

TEST(FreezeTest, FirstTrainableLayerKeepsItsInputAndFrozenPrefixSavesNothing) {
  auto run = testing::Simulate(MlpBody(), Frozen({"l1.*"}));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedBy(run, "h"), IsEmpty());
  EXPECT_THAT(SavedBy(run, "r"), IsEmpty());  // relu of a frozen prefix: no node
  EXPECT_THAT(SavedNames(run, "logits"), ElementsAre("r"));
  // No grad flows into the prefix.
  EXPECT_TRUE(BuffersNamed(run.r.events, "h.grad").empty());
  EXPECT_TRUE(BuffersNamed(run.r.events, "r.grad").empty());
}

TEST(FreezeTest, FrozenPrefixLowersForwardMemory) {
  auto all = testing::Simulate(MlpBody(), Opts("cuda", "sgd"));
  auto frozen = testing::Simulate(MlpBody(), Frozen({"l1.*"}, "sgd"));
  ASSERT_TRUE(all.ok && frozen.ok);
  // Trainable: relu keeps r (also kept by l2). Frozen prefix: l2 keeps r. Same r; but l1 saved x
  // (an input, no new bytes) -- the end-of-forward difference is zero here, yet the backward
  // has fewer grads.
  EXPECT_LT(AllocatedBytes(frozen.r.events, Category::kGradient), AllocatedBytes(all.r.events, Category::kGradient));
  EXPECT_LE(LiveAfterPhase(frozen.r.events, Phase::kForward), LiveAfterPhase(all.r.events, Phase::kForward));
}

TEST(FreezeTest, EverythingFrozenHasNoBackward) {
  auto run = testing::Simulate(MlpBody(), Frozen({"*"}));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kGradient), 0);
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState), 0);
  for (const char* op : {"h", "r", "logits", "loss"}) EXPECT_THAT(SavedBy(run, op), IsEmpty()) << op;
}

TEST(FreezeTest, GlobMatchingNothingIsAnError) {
  auto run = testing::Simulate(MlpBody(), Frozen({"encoder.*"}));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("encoder.*"));
}

TEST(FreezeTest, FreezeParamsOutOfRangeIsAnError) {
  SimOptions o = Opts();
  o.freeze_params = 5;
  auto run = testing::Simulate(MlpBody(), o);
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("--freeze-params"));
}

TEST(FreezeTest, RequiresGradFalseInFileActsAsFrozen) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [8, 32]}],
    "parameters": [{"name": "w", "shape": [16, 32], "requires_grad": false}, {"name": "v", "shape": [4, 16]}],
    "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]}, {"op": "linear", "inputs": ["h", "v"], "outputs": ["y"]},
            {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")", Opts("cuda", "adam"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(BuffersNamed(run.r.events, "w.grad").empty());
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState), 2 * 4 * 16 * 4);
}

}  // namespace
}  // namespace memsim
