// Op rules of lib/ops/rules_activation.cc (abs, clamp, log_sigmoid, glu, prelu) and the rows the
// activation table gained (elu, softplus, mish, hardtanh, hardshrink, softshrink): what each node
// keeps and what its backward allocates (Note [More activations]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SizesOf;
using testing::AllocBytes;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using testing::Opts;
using testing::SavedBy;
using testing::SavedNames;

// x [4, 8] -> linear (w [16, 8]) -> h [4, 16] -> <op> -> y -> mean -> loss.
constexpr int64_t kH = 4 * 16 * 4;
std::string AfterLinear(const std::string& op, const std::string& attrs = "{}") {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": ")" + op + R"(", "inputs": ["h"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

bool Aliases(const testing::Run& run, const std::string& a, const std::string& b) {
  TensorId ta = run.graph.FindTensor(a), tb = run.graph.FindTensor(b);
  return run.r.bound.owner[ta] == run.r.bound.owner[tb];
}



TEST(MoreActivationsTest, KeepTheirInput) {
  for (const char* op : {"elu", "softplus", "mish", "hardshrink", "softshrink", "abs"}) {
    auto run = testing::Simulate(AfterLinear(op));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_THAT(SavedNames(run, "y"), ElementsAre("h")) << op;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16)) << op;
  }
  auto ht = testing::Simulate(AfterLinear("hardtanh", R"({"min_val": -2.0, "max_val": 2.0})"));
  ASSERT_TRUE(ht.ok) << ht.error;
  EXPECT_THAT(SavedNames(ht, "y"), ElementsAre("h"));
}

TEST(MoreActivationsTest, RreluKeepsItsNoiseAndItsInput) {
  // rrelu_with_noise: the noise (empty_like the input) first, then the output; saved: both
  auto run = testing::Simulate(AfterLinear("rrelu", R"({"lower": 0.125, "upper": 0.333, "training": true})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("h", "extra:rrelu noise"));
  auto inplace = testing::Simulate(AfterLinear("rrelu", R"({"training": true, "inplace": true})"));
  ASSERT_TRUE(inplace.ok) << inplace.error;
  EXPECT_TRUE(Aliases(inplace, "y", "h"));
  EXPECT_THAT(SavedNames(inplace, "y"), UnorderedElementsAre("y", "extra:rrelu noise"));
}

TEST(MoreActivationsTest, EluInplaceKeepsTheResultWithoutAClone) {
  auto run = testing::Simulate(AfterLinear("elu", R"({"inplace": true})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(Aliases(run, "y", "h"));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("y"));
}

// HardtanhBackward0, MishBackward0 and ClampBackward1 keep self: their in-place forms clone it.
TEST(MoreActivationsTest, HardtanhMishClampInplaceCloneSelf) {
  for (const char* op : {"hardtanh", "mish", "clamp"}) {
    auto run = testing::Simulate(AfterLinear(op, op == std::string("clamp") ? R"({"inplace": true, "min": 0.0})"
                                                                           : R"({"inplace": true})"));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_TRUE(Aliases(run, "y", "h")) << op;
    auto saved = SavedBy(run, "y");
    ASSERT_EQ(saved.size(), 1u) << op;
    EXPECT_EQ(saved[0].name, "extra:pre-inplace clone") << op;
    EXPECT_EQ(saved[0].bytes, kH) << op;
  }
}

TEST(AbsRuleTest, BackwardMakesTheSignBeforeTheGrad) {
  auto run = testing::Simulate(AfterLinear("abs"));
  ASSERT_TRUE(run.ok) << run.error;
  auto sgn = testing::Buffer(run.r.events, "y:self.sgn()");
  auto grad = testing::Buffer(run.r.events, "h.grad");
  ASSERT_TRUE(sgn && grad);
  EXPECT_EQ(run.r.events.buffers[*sgn].bytes, kH);
  EXPECT_LT(testing::AllocIndex(run.r.events, *sgn), testing::AllocIndex(run.r.events, *grad));
  EXPECT_GT(testing::FreeIndex(run.r.events, *sgn), testing::AllocIndex(run.r.events, *grad));
}

TEST(ClampRuleTest, OneBoolMaskPerBoundAndAZero) {
  auto both = testing::Simulate(AfterLinear("clamp", R"({"min": -1.0, "max": 1.0})"));
  ASSERT_TRUE(both.ok) << both.error;
  EXPECT_THAT(SavedNames(both, "y"), ElementsAre("h"));
  EXPECT_THAT(AllocBytes(both, "y:bound mask"), ElementsAre(64, 64));
  EXPECT_THAT(AllocBytes(both, "y:zero"), ElementsAre(4));
  auto one = testing::Simulate(AfterLinear("clamp", R"({"min": 0.0})"));
  ASSERT_TRUE(one.ok) << one.error;
  EXPECT_THAT(AllocBytes(one, "y:bound mask"), ElementsAre(64));
}

TEST(ClampRuleTest, NoBoundIsAnError) {
  auto run = testing::Simulate(AfterLinear("clamp"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/1: clamp"));
}

TEST(LogSigmoidRuleTest, TheCpuBufferIsKeptWithSelf) {
  auto cpu = testing::Simulate(AfterLinear("log_sigmoid"), Opts("cpu"));
  ASSERT_TRUE(cpu.ok) << cpu.error;
  EXPECT_THAT(SavedNames(cpu, "y"), UnorderedElementsAre("h", "extra:log_sigmoid buffer"));
  auto cuda = testing::Simulate(AfterLinear("log_sigmoid"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_THAT(SavedNames(cuda, "y"), ElementsAre("h"));
}

TEST(GluRuleTest, HalvesTheDimAndKeepsSelf) {
  auto run = testing::Simulate(AfterLinear("glu", R"({"dim": -1})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 8));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("h"));
  EXPECT_THAT(AllocBytes(run, "h.grad"), ElementsAre(kH));
  auto bad = testing::Simulate(R"("inputs": [], "parameters": [{"name": "x", "shape": [3, 5]}],
      "ops": [{"op": "glu", "inputs": ["x"], "outputs": ["y"]}, {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_FALSE(bad.ok);
  EXPECT_THAT(bad.error, HasSubstr("glu"));
}

std::string PreluBody() {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [16, 8]}, {"name": "a", "shape": [16]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "prelu", "inputs": ["h", "a"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(PreluRuleTest, KernelGivesTheWeightGradAtTheInputShapeThenTheEngineSumsIt) {
  auto run = testing::Simulate(PreluBody(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("h", "a"));
  EXPECT_THAT(AllocBytes(run, "a.grad"), ElementsAre(kH, 16 * 4));
}

TEST(PreluRuleTest, Torch113SumsTheWeightGradInside) {
  auto run = testing::Simulate(PreluBody(), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "y:weight grad collector"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "a.grad"), ElementsAre(16 * 4));
}

TEST(PreluRuleTest, WeightOfTheWrongSizeIsAnError) {
  std::string body = PreluBody();
  body.replace(body.find("[16]"), 4, "[3]");
  auto run = testing::Simulate(body);
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("prelu"));
}

}  // namespace
}  // namespace memsim
