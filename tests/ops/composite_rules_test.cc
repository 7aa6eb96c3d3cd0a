// Rules the ATen ops of composite losses map to (Note [Composite losses] in docs/op-rules.md):
// xlogy (rules_loss.cc), the bool ops any / bitwise_and / bitwise_not and a comparison's
// `.Scalar` overload (rules_llm.cc), a `.Scalar` overload of add / mul and `number - X`'s grad
// (rules_pointwise.cc, Note [Scalar overloads]); 1.13's mean.default and aten.clone.
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

constexpr int64_t kH = 4 * 16 * 4;  // h [4, 16] float32


// x [4, 8] -> linear -> h [4, 16], g = linear(x, w2); then |ops| on h and g, ending in "l".
std::string Body(const std::string& ops) {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}],
      "parameters": [{"name": "w", "shape": [16, 8]}, {"name": "w2", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "linear", "inputs": ["x", "w2"], "outputs": ["g"]}, )" +
         ops + R"(, {"op": "sum", "inputs": ["l"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(XlogyRuleTest, KeepsSelfAndOtherAndMakesBothGrads) {
  auto run = testing::Simulate(Body(R"({"op": "xlogy", "inputs": ["h", "g"], "outputs": ["l"]})"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "l"), UnorderedElementsAre("h", "g"));
  EXPECT_THAT(AllocBytes(run, "l"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "l:grad * self"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "l:xlogy(grad, other)"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "l:self == 0"), ElementsAre(kH / 4));  // bool masks
  EXPECT_THAT(AllocBytes(run, "l:other <= 0"), ElementsAre(kH / 4));
  EXPECT_THAT(AllocBytes(run, "l:mask & mask"), ElementsAre(kH / 4));
  EXPECT_THAT(AllocBytes(run, "l:wrapped number"), ElementsAre(8, 8));
  EXPECT_THAT(AllocBytes(run, "h.grad"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "g.grad"), ElementsAre(kH));
}

TEST(XlogyRuleTest, ShapesThatDoNotBroadcastAreAnError) {
  auto run = testing::Simulate(R"("inputs": [{"name": "a", "shape": [4, 16]}, {"name": "b", "shape": [3, 5]}],
      "ops": [{"op": "xlogy", "inputs": ["a", "b"], "outputs": ["l"]}], "loss": "l")");
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("xlogy"));
}

TEST(BoolOpRuleTest, AnyBitwiseAndAndNotAreBoolAndNotDifferentiable) {
  auto run = testing::Simulate(Body(R"({"op": "lt", "inputs": ["h"], "outputs": ["m"], "attrs": {"scalar": 0}},
      {"op": "gt", "inputs": ["g"], "outputs": ["n"], "attrs": {"scalar": 0}},
      {"op": "bitwise_and", "inputs": ["m", "n"], "outputs": ["b"]},
      {"op": "bitwise_not", "inputs": ["b"], "outputs": ["c"]},
      {"op": "any", "inputs": ["c"], "outputs": ["a"]},
      {"op": "any", "inputs": ["c"], "outputs": ["a1"], "attrs": {"dim": 1, "keepdim": true}},
      {"op": "where", "inputs": ["c", "h", "g"], "outputs": ["l"]})"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const auto& metas = run.r.bound.metas;
  EXPECT_EQ(metas[run.graph.FindTensor("b")].dtype, Dtype::kBool);
  EXPECT_EQ(metas[run.graph.FindTensor("c")].sizes, (std::vector<int64_t>{4, 16}));
  EXPECT_TRUE(metas[run.graph.FindTensor("a")].sizes.empty());
  EXPECT_EQ(metas[run.graph.FindTensor("a1")].sizes, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(metas[run.graph.FindTensor("a")].dtype, Dtype::kBool);
  EXPECT_THAT(testing::SavedNames(run, "b"), IsEmpty());
  EXPECT_THAT(testing::SavedNames(run, "a"), IsEmpty());
}

// Note [Scalar overloads]: `h + 1e-6` from C++ (add.Scalar): the wrapped double and its cast die
// inside the call under 1.13 as under 2.13; a Python number's (add.Tensor) cast is 2.13's only.
TEST(ScalarOverloadTest, AddScalarWrapsAndCastsItsNumberUnderBothReleases) {
  const std::string overload = Body(R"({"op": "add", "inputs": ["h"], "outputs": ["l"],
      "attrs": {"scalar": 1e-6, "scalar_overload": true}})");
  const std::string python = Body(R"({"op": "add", "inputs": ["h"], "outputs": ["l"], "attrs": {"scalar": 1e-6}})");
  for (const char* release : {"2.13", "1.13"}) {
    auto run = testing::Simulate(overload, Opts("cpu", "sgd", release));
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_THAT(AllocBytes(run, "l:wrapped scalar"), ElementsAre(8)) << release;
    EXPECT_THAT(AllocBytes(run, "l:wrapped scalar, cast"), ElementsAre(4)) << release;
  }
  auto py113 = testing::Simulate(python, Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(py113.ok) << py113.error;
  EXPECT_THAT(AllocBytes(py113, "l:wrapped scalar, cast"), IsEmpty());
}

TEST(ScalarOverloadTest, MulScalarKeepsNoWrappedNumber) {
  auto overload = testing::Simulate(Body(R"({"op": "mul", "inputs": ["h"], "outputs": ["l"],
      "attrs": {"scalar": 0.5, "scalar_overload": true}})"), Opts("cpu"));
  auto python = testing::Simulate(Body(R"({"op": "mul", "inputs": ["h"], "outputs": ["l"], "attrs": {"scalar": 0.5}})"),
                                  Opts("cpu"));
  ASSERT_TRUE(overload.ok && python.ok) << overload.error << python.error;
  EXPECT_THAT(testing::SavedNames(overload, "l"), IsEmpty());
  EXPECT_THAT(testing::SavedNames(python, "l"), ElementsAre("extra:wrapped scalar"));
}

TEST(ScalarOverloadTest, ComparisonScalarOverloadWrapsItsNumber) {
  auto run = testing::Simulate(Body(R"({"op": "eq", "inputs": ["h"], "outputs": ["m"], "attrs": {"scalar": 1, "scalar_overload": true}},
      {"op": "where", "inputs": ["m", "h", "g"], "outputs": ["l"]})"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "m:wrapped scalar"), ElementsAre(8));
  EXPECT_THAT(AllocBytes(run, "m:wrapped scalar, cast"), ElementsAre(4));
  auto cuda = testing::Simulate(Body(R"({"op": "eq", "inputs": ["h"], "outputs": ["m"], "attrs": {"scalar": 1, "scalar_overload": true}},
      {"op": "where", "inputs": ["m", "h", "g"], "outputs": ["l"]})"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_TRUE(testing::BuffersContaining(cuda.r.events, "wrapped scalar").empty());
}

// rsub.Scalar (`1 - h`): derivatives.yaml `self: maybe_multiply(-grad, alpha)`, a new grad.
TEST(ScalarOverloadTest, NumberMinusXMakesANewGrad) {
  auto rsub = testing::Simulate(Body(R"({"op": "sub", "inputs": ["h"], "outputs": ["l"],
      "attrs": {"scalar": 1, "reverse": true}})"), Opts("cpu"));
  auto sub = testing::Simulate(Body(R"({"op": "sub", "inputs": ["h"], "outputs": ["l"], "attrs": {"scalar": 1}})"),
                               Opts("cpu"));
  ASSERT_TRUE(rsub.ok && sub.ok) << rsub.error << sub.error;
  EXPECT_THAT(AllocBytes(rsub, "h.grad"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(sub, "h.grad"), IsEmpty());  // the incoming grad itself
}

// Profile::mean_keeps_input (1.13) is mean.dim's: mean.default keeps sizes only.
TEST(MeanRuleTest, Under113OnlyMeanDimKeepsItsInput) {
  auto global = testing::Simulate(Body(R"({"op": "mean", "inputs": ["h"], "outputs": ["l"]})"), Opts("cpu", "sgd", "1.13"));
  auto dim = testing::Simulate(Body(R"({"op": "mean", "inputs": ["h"], "outputs": ["l"], "attrs": {"dim": [1]}})"),
                               Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(global.ok && dim.ok) << global.error << dim.error;
  EXPECT_THAT(testing::SavedNames(global, "l"), IsEmpty());
  EXPECT_THAT(testing::SavedNames(dim, "l"), ElementsAre("h"));
}

// aten.clone (`contiguous` with `clone`) copies a contiguous input; plain `contiguous` does not.
TEST(CloneRuleTest, CloneCopiesAContiguousInput) {
  auto clone = testing::Simulate(Body(R"({"op": "contiguous", "inputs": ["h"], "outputs": ["l"], "attrs": {"clone": true}})"),
                                 Opts("cpu"));
  auto plain = testing::Simulate(Body(R"({"op": "contiguous", "inputs": ["h"], "outputs": ["l"]})"), Opts("cpu"));
  ASSERT_TRUE(clone.ok && plain.ok) << clone.error << plain.error;
  EXPECT_THAT(AllocBytes(clone, "l"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(plain, "l"), IsEmpty());
}

}  // namespace
}  // namespace memsim
