// threshold, maximum / minimum and var (lib/ops/rules_pointwise.cc) and flip / pixel_shuffle /
// pixel_unshuffle (lib/ops/rules_shape.cc): Notes [Elementwise maximum], [Variance] and [Flip and
// pixel shuffle] in docs/op-rules.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SizesOf;
using testing::AllocBytes;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::Opts;
using testing::SavedNames;



// a [4, 16], b [4, 16] (parameters) -> <op>(a, b) or <op>(a) -> y -> mean -> loss.
std::string Body(const std::string& op, const std::string& ins, const std::string& attrs,
                 const std::string& shape = "[4, 16]") {
  return R"("inputs": [], "parameters": [{"name": "a", "shape": )" + shape + R"(}, {"name": "b", "shape": )" + shape +
         R"(}],
      "ops": [{"op": ")" + op + R"(", "inputs": )" + ins + R"(, "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(ThresholdRuleTest, KeepsItsInputAndInPlaceAClone) {
  auto run = testing::Simulate(Body("threshold", R"(["a"])", R"({"threshold": 0.1, "value": 0})"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("a"));
  // in place on a leaf is refused by PyTorch; on an intermediate the node keeps a pre-mutation clone
  std::string body = R"("inputs": [], "parameters": [{"name": "a", "shape": [4, 16]}],
      "ops": [{"op": "mul", "inputs": ["a"], "outputs": ["h"], "attrs": {"scalar": 2}},
              {"op": "threshold", "inputs": ["h"], "outputs": ["y"], "attrs": {"threshold": 0.1, "value": 0, "inplace": true}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  auto inplace = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(inplace.ok) << inplace.error;
  EXPECT_THAT(SavedNames(inplace, "y"), ElementsAre("extra:pre-inplace clone"));
}

TEST(RoundingRuleTest, SaveNothingAndLog2KeepsItsInputAndOneTemporary) {
  for (const char* op : {"round", "floor", "ceil", "trunc"}) {
    auto run = testing::Simulate(Body(op, R"(["a"])", "{}"), Opts("cpu"));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16));
    EXPECT_THAT(SavedNames(run, "y"), IsEmpty()) << op;  // zeros_like(grad)
  }
  // log2: grad / (self * ln 2), the measured backward of both releases: the product, then the grad
  auto run = testing::Simulate(Body("log2", R"(["a"])", "{}"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("a"));
  EXPECT_THAT(AllocBytes(run, "y:log2 backward"), ElementsAre(256));
  // bitwise_or of two bool masks: a bool mask, not differentiable
  std::string body = R"("inputs": [], "parameters": [{"name": "a", "shape": [4, 16]}],
      "ops": [{"op": "gt", "inputs": ["a"], "outputs": ["p"], "attrs": {"scalar": 0}},
              {"op": "lt", "inputs": ["a"], "outputs": ["q"], "attrs": {"scalar": -1}},
              {"op": "bitwise_or", "inputs": ["p", "q"], "outputs": ["m"]},
              {"op": "to_dtype", "inputs": ["m"], "outputs": ["f"], "attrs": {"dtype": "float32"}},
              {"op": "mul", "inputs": ["a", "f"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  auto mask = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(mask.ok) << mask.error;
  EXPECT_THAT(AllocBytes(mask, "m"), ElementsAre(64));
}

TEST(MaximumRuleTest, KeepsBothAndMakesOthersGradFirst) {
  for (const char* op : {"maximum", "minimum"}) {
    auto run = testing::Simulate(Body(op, R"(["a", "b"])", "{}"), Opts("cpu"));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16));
    EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("a", "b")) << op;
    // per input: grad / 2 (64 floats), two bool masks of 64
    EXPECT_THAT(AllocBytes(run, "y:grad / 2"), ElementsAre(256, 256)) << op;
    EXPECT_THAT(AllocBytes(run, "y:self == other"), ElementsAre(64, 64)) << op;
    EXPECT_THAT(AllocBytes(run, "y:wrapped scalar"), ElementsAre(8, 8)) << op;
    const auto& ev = run.r.events;
    auto ga = testing::Buffer(ev, "a.grad"), gb = testing::Buffer(ev, "b.grad");
    ASSERT_TRUE(ga && gb);
    EXPECT_LT(testing::AllocIndex(ev, *gb), testing::AllocIndex(ev, *ga)) << op;
  }
}

TEST(MaximumRuleTest, AFrozenInputGetsNoGradNorTemporaries) {
  std::string body = R"("inputs": [{"name": "b", "shape": [4, 16]}], "parameters": [{"name": "a", "shape": [4, 16]}],
      "ops": [{"op": "maximum", "inputs": ["a", "b"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  auto run = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "y:grad / 2"), ElementsAre(256));
}

TEST(VarRuleTest, KeepsItsInputAndAFullCpuReductionTakesTheMeanFirst) {
  auto dim = testing::Simulate(Body("var", R"(["a"])", R"({"dim": [1], "keepdim": true})"), Opts("cpu"));
  ASSERT_TRUE(dim.ok) << dim.error;
  EXPECT_THAT(SizesOf(dim, "y"), ElementsAre(4, 1));
  EXPECT_THAT(SavedNames(dim, "y"), ElementsAre("a"));
  EXPECT_THAT(AllocBytes(dim, "y:self.mean()"), IsEmpty());
  // backward: the mean [4, 1], self - mean [4, 16], (2 / dof) * grad [4, 1]
  EXPECT_THAT(AllocBytes(dim, "y:self.mean(dim, true)"), ElementsAre(16));
  EXPECT_THAT(AllocBytes(dim, "y:self - mean"), ElementsAre(256));
  EXPECT_THAT(AllocBytes(dim, "y:(2 / dof) * grad"), ElementsAre(16));
  auto all = testing::Simulate(Body("var", R"(["a"])", "{}"), Opts("cpu"));
  ASSERT_TRUE(all.ok) << all.error;
  EXPECT_THAT(SizesOf(all, "y"), IsEmpty());
  EXPECT_THAT(AllocBytes(all, "y:self.mean()"), ElementsAre(4));
  auto cuda = testing::Simulate(Body("var", R"(["a"])", "{}"), Opts("cuda"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_THAT(AllocBytes(cuda, "y:self.mean()"), IsEmpty());
}

TEST(FlipPixelShuffleRuleTest, NewOutputNothingKeptOneGrad) {
  struct Case { const char* op; const char* attrs; std::vector<int64_t> out; };
  for (const Case& k : {Case{"flip", R"({"dims": [1]})", {2, 8, 4, 4}},
                        Case{"pixel_shuffle", R"({"upscale_factor": 2})", {2, 2, 8, 8}},
                        Case{"pixel_unshuffle", R"({"downscale_factor": 2})", {2, 32, 2, 2}}}) {
    auto run = testing::Simulate(Body(k.op, R"(["a"])", k.attrs, "[2, 8, 4, 4]"), Opts("cpu"));
    ASSERT_TRUE(run.ok) << k.op << ": " << run.error;
    EXPECT_EQ(SizesOf(run, "y"), k.out) << k.op;
    EXPECT_THAT(SavedNames(run, "y"), IsEmpty()) << k.op;
    EXPECT_THAT(AllocBytes(run, "a.grad"), ElementsAre(2 * 8 * 4 * 4 * 4)) << k.op;
  }
}

TEST(FlipPixelShuffleRuleTest, RefusesFactorsThatDoNotDivide) {
  auto run = testing::Simulate(Body("pixel_shuffle", R"(["a"])", R"({"upscale_factor": 3})", "[2, 8, 4, 4]"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("r^2"));
  auto un = testing::Simulate(Body("pixel_unshuffle", R"(["a"])", R"({"downscale_factor": 3})", "[2, 8, 4, 4]"));
  ASSERT_FALSE(un.ok);
  EXPECT_THAT(un.error, HasSubstr("not divisible by r"));
}

}  // namespace
}  // namespace memsim
