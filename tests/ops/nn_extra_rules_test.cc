// Rules of lib/ops/rules_nn_extra.cc: the margin losses over class indices, bilinear and
// CrossMapLRN2d (Notes [Margin losses], [Bilinear], [CrossMapLRN2d] in docs/op-rules.md), and
// channel_shuffle (rules_shape.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::AllocBytes;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::Opts;
using testing::SavedNames;


// x [8, 10] (a parameter) and int64 targets -> <loss> -> loss.
std::string LossBody(const std::string& op, const std::string& target_shape, const std::string& attrs = "{}") {
  return R"("inputs": [{"name": "t", "shape": )" + target_shape + R"(, "dtype": "int64"}],
      "parameters": [{"name": "x", "shape": [8, 10]}],
      "ops": [{"op": ")" + op + R"(", "inputs": ["x", "t"], "outputs": ["l"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["l"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(MarginLossRuleTest, MultiMarginKeepsInputAndTargetOnly) {
  auto run = testing::Simulate(LossBody("multi_margin_loss", "[8]"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(run.r.bound.metas[run.graph.FindTensor("l")].sizes, IsEmpty());
  EXPECT_THAT(SavedNames(run, "l"), UnorderedElementsAre("x", "t"));
  EXPECT_THAT(AllocBytes(run, "x.grad"), ElementsAre(8 * 10 * 4));
  auto none = testing::Simulate(LossBody("multi_margin_loss", "[8]", R"({"reduction": "none"})"), Opts("cpu"));
  ASSERT_TRUE(none.ok) << none.error;
  EXPECT_THAT(none.r.bound.metas[none.graph.FindTensor("l")].sizes, ElementsAre(8));
}

TEST(MarginLossRuleTest, MultilabelMarginKeepsIsTargetAndChecksTheRanges) {
  auto run = testing::Simulate(LossBody("multilabel_margin_loss", "[8, 10]"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "l"), UnorderedElementsAre("x", "t", "extra:is_target"));
  EXPECT_THAT(AllocBytes(run, "l:is_target"), ElementsAre(8 * 10 * 4));
  EXPECT_THAT(AllocBytes(run, "l:target.min()"), ElementsAre(8));
  EXPECT_THAT(AllocBytes(run, "l:range check"), ElementsAre(8, 8, 4, 4));
}

TEST(MarginLossRuleTest, RefusesFloatTargetsAndMismatchedShapes) {
  std::string body = LossBody("multi_margin_loss", "[8]");
  body.replace(body.find(R"("int64")"), 7, R"("float32")");
  auto f = testing::Simulate(body);
  ASSERT_FALSE(f.ok);
  EXPECT_THAT(f.error, HasSubstr("class indices"));
  auto m = testing::Simulate(LossBody("multilabel_margin_loss", "[8]"));
  ASSERT_FALSE(m.ok);
  EXPECT_THAT(m.error, HasSubstr("input's shape"));
}

// x1 [6, 4], x2 [6, 3], weight [5, 4, 3] -> bilinear [6, 5] -> mean.
std::string BilinearBody(bool inputs_rg) {
  const std::string rg = inputs_rg ? "true" : "false";
  return R"("inputs": [], "parameters": [{"name": "a", "shape": [6, 4], "requires_grad": )" + rg +
         R"(}, {"name": "b", "shape": [6, 3], "requires_grad": )" + rg + R"(}, {"name": "w", "shape": [5, 4, 3]}],
      "ops": [{"op": "bilinear", "inputs": ["a", "b", "w"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(BilinearRuleTest, TwoTemporariesPerOutputFeatureAndThreeGradTrilinears) {
  auto run = testing::Simulate(BilinearBody(true), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(run.r.bound.metas[run.graph.FindTensor("y")].sizes, ElementsAre(6, 5));
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("a", "b", "w"));
  EXPECT_EQ(AllocBytes(run, "y:x1 . W[k]").size(), 5u);
  EXPECT_THAT(AllocBytes(run, "y:x1 . W[k]")[0], 6 * 3 * 4);
  // per output feature and grad: x1: grad[:, k] (x) W[k] [6, 4, 3] and [6, 4]; W: [6, 4] and [4, 3];
  // x2: [6, 3] twice
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "y:trilinear buf", &n),
            5 * (6 * 4 * 3 + 6 * 4 + 6 * 4 + 4 * 3 + 6 * 3 + 6 * 3) * 4);
  EXPECT_EQ(n, 30u);
}

TEST(BilinearRuleTest, TwoXSavesOnlyWhatAnotherGradNeedsAndOneThirteenAll) {
  auto run = testing::Simulate(BilinearBody(false), Opts("cpu"));  // only the weight requires grad
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("a", "b"));
  auto all = testing::Simulate(BilinearBody(false), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(all.ok) << all.error;
  EXPECT_THAT(SavedNames(all, "y"), UnorderedElementsAre("a", "b", "w"));
}

TEST(CrossMapLrnRuleTest, KeepsInputOutputAndScaleAndScratchesInBackward) {
  std::string body = R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 6, 4, 4]}],
      "ops": [{"op": "cross_map_lrn2d", "inputs": ["x"], "outputs": ["y"], "attrs": {"size": 5}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  auto run = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "y", "extra:ctx.scale"));
  EXPECT_THAT(AllocBytes(run, "y:ctx.scale"), ElementsAre(2 * 6 * 4 * 4 * 4));
  EXPECT_THAT(AllocBytes(run, "y:paddded_ratio"), ElementsAre((6 + 4) * 4 * 4 * 4));
  EXPECT_THAT(AllocBytes(run, "y:accum_ratio"), ElementsAre(4 * 4 * 4));
  body.replace(body.find("[2, 6, 4, 4]"), 12, "[6, 4, 4]");
  auto bad = testing::Simulate(body);
  ASSERT_FALSE(bad.ok);
  EXPECT_THAT(bad.error, HasSubstr("4-D"));
}

TEST(ChannelShuffleRuleTest, NewOutputNothingKeptAndGroupsMustDivide) {
  std::string body = R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 8, 4, 4]}],
      "ops": [{"op": "channel_shuffle", "inputs": ["x"], "outputs": ["y"], "attrs": {"groups": 4}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  auto run = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), IsEmpty());
  EXPECT_THAT(AllocBytes(run, "x.grad"), ElementsAre(2 * 8 * 4 * 4 * 4));
  body.replace(body.find(R"("groups": 4)"), 11, R"("groups": 3)");
  auto bad = testing::Simulate(body);
  ASSERT_FALSE(bad.ok);
  EXPECT_THAT(bad.error, HasSubstr("groups"));
}

}  // namespace
}  // namespace memsim
