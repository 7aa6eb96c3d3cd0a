// Op rules of lib/ops/rules_loss.cc: soft_margin_loss (Note [Soft margin loss] in docs/op-rules.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::AllocBytes;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using testing::Opts;

constexpr int64_t kH = 4 * 16 * 4;  // h [4, 16] float32

// x [4, 8] -> linear -> h [4, 16]; soft_margin_loss(h, t) with t [4, 16] (or |target|).
std::string SoftMarginBody(const std::string& reduction, const std::string& target = "[4, 16]") {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": )" + target + R"(}],
      "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "soft_margin_loss", "inputs": ["h", "t"], "outputs": ["l"], "attrs": {"reduction": ")" +
         reduction + R"("}}, {"op": "sum", "inputs": ["l"], "outputs": ["loss"]}], "loss": "loss")";
}


TEST(SoftMarginRuleTest, KeepsInputAndTargetAndTheZeroDimLossKeepsAnInputSizedStorage) {
  auto run = testing::Simulate(SoftMarginBody("mean"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(run.r.bound.metas[run.graph.FindTensor("l")].sizes.empty());
  EXPECT_THAT(testing::SavedNames(run, "l"), UnorderedElementsAre("h", "t"));
  EXPECT_THAT(AllocBytes(run, "l"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "l:reduced loss"), ElementsAre(4));
}

TEST(SoftMarginRuleTest, ForwardWrappedNumbersAreMeansDivAndOn113AlsoAdd) {
  size_t n213 = 0, n113 = 0;
  auto v2 = testing::Simulate(SoftMarginBody("mean"), Opts("cpu"));
  auto v1 = testing::Simulate(SoftMarginBody("mean"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(v2.ok && v1.ok) << v2.error << v1.error;
  auto forward = [](const testing::Run& r, size_t* n) {
    *n = 0;
    for (uint32_t b : testing::BuffersContaining(r.r.events, "l:wrapped number"))
      if (r.r.events.buffers[b].name.find(", cast") == std::string::npos) ++*n;
  };
  forward(v2, &n213);
  forward(v1, &n113);
  // 2.13: mean's div_ (1) + the backward's mul_(-norm) and add_(1) (2); 1.13 also add_(1.).
  EXPECT_EQ(n213, 3u);
  EXPECT_EQ(n113, 4u);
  auto sum = testing::Simulate(SoftMarginBody("sum"), Opts("cpu"));
  ASSERT_TRUE(sum.ok) << sum.error;
  size_t nsum = 0;
  forward(sum, &nsum);
  EXPECT_EQ(nsum, 2u);  // the backward's two only
}

TEST(SoftMarginRuleTest, BackwardBuildsZThroughTwoTemporariesThenTheGrad) {
  auto run = testing::Simulate(SoftMarginBody("mean"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "l:-target"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "l:-target * input"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "l:z = exp(-target * input)"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "h.grad"), ElementsAre(kH));
}

TEST(SoftMarginRuleTest, CudaHasNoWrappedNumbers) {
  auto run = testing::Simulate(SoftMarginBody("mean"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "wrapped number").empty());
}

TEST(SoftMarginRuleTest, ATargetThatDoesNotBroadcastIsAnError) {
  auto run = testing::Simulate(SoftMarginBody("mean", "[3, 5]"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("soft_margin_loss"));
}

}  // namespace
}  // namespace memsim
