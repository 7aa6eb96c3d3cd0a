// Op rules of lib/ops/rules_pointwise.cc: activations (result vs self saved, in-place variants),
// dropout per profile, arithmetic pruning, reductions and losses.
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
using testing::SavedBy;
using testing::SavedNames;

std::string Rg(bool b) { return b ? "true" : "false"; }


bool Aliases(const testing::Run& run, const std::string& a, const std::string& b) {
  TensorId ta = run.graph.FindTensor(a), tb = run.graph.FindTensor(b);
  return run.r.bound.owner[ta] == run.r.bound.owner[tb];
}

// x [4, 8] -> linear (w [16, 8]) -> h [4, 16] -> <op> -> y -> mean -> loss.
constexpr int64_t kH = 4 * 16 * 4;
std::string AfterLinear(const std::string& op, const std::string& attrs = "{}", const std::string& dtype = "float32") {
  return R"("inputs": [{"name": "x", "shape": [4, 8], "dtype": ")" + dtype + R"("}],
      "parameters": [{"name": "w", "shape": [16, 8], "dtype": ")" + dtype + R"("}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": ")" + op + R"(", "inputs": ["h"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

// ---------------------------------------------------------------- activations
TEST(ActivationRuleTest, ResultSavingActivationsKeepTheirOutput) {
  for (const char* op : {"relu", "sigmoid", "tanh", "softmax", "log_softmax"}) {
    auto run = testing::Simulate(AfterLinear(op));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16)) << op;
    EXPECT_THAT(SavedNames(run, "y"), ElementsAre("y")) << op;
    EXPECT_FALSE(Aliases(run, "y", "h")) << op;
  }
}

TEST(ActivationRuleTest, SelfSavingActivationsKeepTheirInput) {
  for (const char* op : {"gelu", "silu", "leaky_relu", "relu6", "hardswish", "hardsigmoid"}) {
    auto run = testing::Simulate(AfterLinear(op));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_THAT(SavedNames(run, "y"), ElementsAre("h")) << op;
  }
}

TEST(ActivationRuleTest, NoNodeWithoutGrad) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [2, 8]}],
      "ops": [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}, {"op": "linear", "inputs": ["y", "w"], "outputs": ["z"]},
              {"op": "mean", "inputs": ["z"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedBy(run, "y"), IsEmpty());
}

TEST(ActivationRuleTest, ReluInplaceAliasesAndSavesTheResultWithNoExtraMemory) {
  auto run = testing::Simulate(AfterLinear("relu", R"({"inplace": true})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(Aliases(run, "y", "h"));
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "y");
  EXPECT_TRUE(testing::BuffersNamed(run.r.events, "y").empty()) << "relu_ must not allocate an output";
  auto out_of_place = testing::Simulate(AfterLinear("relu"));
  ASSERT_TRUE(out_of_place.ok);
  // Out of place the forward peaks with h and y both alive (h + y); in place with h and the 4-byte
  // loss (h + 4). Both end the forward with h-sized memory saved.
  EXPECT_EQ(out_of_place.r.peak.phase_peaks[1] - run.r.peak.phase_peaks[1], kH - 4);
  EXPECT_EQ(testing::LiveAfterPhase(out_of_place.r.events, Phase::kForward),
            testing::LiveAfterPhase(run.r.events, Phase::kForward));
}

TEST(ActivationRuleTest, LeakyReluInplaceSavesResultWithoutClone) {
  auto run = testing::Simulate(AfterLinear("leaky_relu", R"({"inplace": true})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(Aliases(run, "y", "h"));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("y"));
}

TEST(ActivationRuleTest, InplaceOfSelfSavingActivationsSavesAClone) {
  for (const char* op : {"silu", "relu6", "hardswish", "gelu", "hardsigmoid"}) {
    auto run = testing::Simulate(AfterLinear(op, R"({"inplace": true})"));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_TRUE(Aliases(run, "y", "h")) << op;
    auto saved = SavedBy(run, "y");
    ASSERT_EQ(saved.size(), 1u) << op;
    EXPECT_EQ(saved[0].name, "extra:pre-inplace clone") << op;
    EXPECT_EQ(saved[0].bytes, kH) << op;
  }
}

TEST(ActivationRuleTest, InplaceOverrideTurnsActivationsInplace) {
  SimOptions o = Opts();
  o.inplace = true;
  auto run = testing::Simulate(AfterLinear("relu"), o);
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(Aliases(run, "y", "h"));
  o.inplace = false;
  run = testing::Simulate(AfterLinear("relu", R"({"inplace": true})"), o);
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_FALSE(Aliases(run, "y", "h"));
}

TEST(SoftmaxRuleTest, DimOutOfRangeNamesOp) {
  auto run = testing::Simulate(AfterLinear("softmax", R"({"dim": 2})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/1: softmax"));
}

// ---------------------------------------------------------------- dropout
TEST(DropoutRuleTest, CudaKeepsOneByteMask) {
  auto run = testing::Simulate(AfterLinear("dropout", R"({"p": 0.1})"));
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "extra:dropout mask");
  EXPECT_EQ(saved[0].bytes, 4 * 16);
  EXPECT_FALSE(Aliases(run, "y", "h"));
}

TEST(DropoutRuleTest, CpuKeepsInputDtypeNoise) {
  auto run = testing::Simulate(AfterLinear("dropout", R"({"p": 0.1})"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "extra:dropout noise");
  EXPECT_EQ(saved[0].bytes, kH);
}

TEST(DropoutRuleTest, CudaHalfMaskIsStillOneByte) {
  auto run = testing::Simulate(AfterLinear("dropout", R"({"p": 0.1})", "float16"));
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].bytes, 4 * 16);
}

TEST(DropoutRuleTest, EvalModeAndZeroPAliasTheInput) {
  for (const char* attrs : {R"({"training": false})", R"({"p": 0.0})"}) {
    auto run = testing::Simulate(AfterLinear("dropout", attrs));
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(Aliases(run, "y", "h")) << attrs;
    EXPECT_THAT(SavedBy(run, "y"), IsEmpty()) << attrs;
    EXPECT_TRUE(testing::BuffersContaining(run.r.events, "dropout").empty()) << attrs;
  }
}

TEST(DropoutRuleTest, InplaceKeepsNoiseEvenOnCuda) {
  auto run = testing::Simulate(AfterLinear("dropout", R"({"p": 0.1, "inplace": true})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(Aliases(run, "y", "h"));
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "extra:dropout noise");
  EXPECT_EQ(saved[0].bytes, kH);
}

TEST(DropoutRuleTest, ProbabilityOutsideUnitIntervalIsAnError) {
  auto run = testing::Simulate(AfterLinear("dropout", R"({"p": 1.5})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/1: dropout"));
}

// Note [Channel and alpha dropout]: h [4, 16] is [N, C]; the feature noise is [4, 16] too, so a
// conv-shaped input shows the per-channel size.
std::string AfterConvShaped(const std::string& op, const std::string& attrs) {
  return R"("inputs": [], "parameters": [{"name": "h", "shape": [4, 16, 6, 6]}],
      "ops": [{"op": ")" + op + R"(", "inputs": ["h"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(DropoutRuleTest, FeatureDropoutKeepsOneNoiseValuePerChannelOnEveryDevice) {
  for (const char* profile : {"cuda", "cpu"}) {
    auto run = testing::Simulate(AfterConvShaped("dropout", R"({"p": 0.2, "feature": true})"), Opts(profile));
    ASSERT_TRUE(run.ok) << run.error;
    auto saved = SavedBy(run, "y");
    ASSERT_EQ(saved.size(), 1u) << profile;
    EXPECT_EQ(saved[0].name, "extra:dropout noise");
    EXPECT_EQ(saved[0].bytes, 4 * 16 * 4) << profile;
    EXPECT_FALSE(Aliases(run, "y", "h"));
  }
}

TEST(DropoutRuleTest, AlphaDropoutKeepsTheNoiseAndFreesItsShiftInTheForward) {
  auto run = testing::Simulate(AfterConvShaped("dropout", R"({"p": 0.1, "alpha": true})"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].bytes, 4 * 16 * 6 * 6 * 4);
  auto b = testing::Lives(run.r.events, "y:alpha dropout shift b");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].bytes, 4 * 16 * 6 * 6 * 4);
  EXPECT_EQ(b[0].free, Phase::kForward);
  // CPU: each scalar op's transient wrapped number (div_ for plain, four for alpha).
  EXPECT_EQ(testing::BuffersContaining(run.r.events, "wrapped scalar").size(), 4u * 2u);
}

// Note [Vector norms]
TEST(VectorNormRuleTest, Ord2BackwardMakesTheQuotientAndMaskBeforeTheGrad) {
  auto run = testing::Simulate(AfterLinear("vector_norm", R"({"dim": -1, "keepdim": true})"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 1));
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("h", "y"));
  auto q = testing::Buffer(run.r.events, "y:self / norm");
  auto mask = testing::Buffer(run.r.events, "y:norm == 0 mask");
  ASSERT_TRUE(q && mask);
  EXPECT_EQ(run.r.events.buffers[*q].bytes, kH);
  EXPECT_EQ(run.r.events.buffers[*mask].bytes, 4);
  EXPECT_LT(testing::FreeIndex(run.r.events, *mask), testing::FreeIndex(run.r.events, *q));
}

TEST(VectorNormRuleTest, Ord1BackwardMakesSgnAndOtherOrdersOnlyTheGrad) {
  auto one = testing::Simulate(AfterLinear("vector_norm", R"({"ord": 1, "dim": -1})"));
  ASSERT_TRUE(one.ok) << one.error;
  EXPECT_EQ(testing::BuffersContaining(one.r.events, "self.sgn()").size(), 1u);
  auto three = testing::Simulate(AfterLinear("vector_norm", R"({"ord": 3, "dim": -1})"));
  ASSERT_TRUE(three.ok) << three.error;
  EXPECT_TRUE(testing::BuffersContaining(three.r.events, "self").empty());
}

// ---------------------------------------------------------------- arithmetic
std::string BinaryBody(const std::string& op, const std::string& a, bool arg, const std::string& b, bool brg,
                       const std::string& attrs = "{}") {
  return R"("inputs": [], "parameters": [{"name": "a", "shape": )" + a + R"(, "requires_grad": )" + Rg(arg) +
         R"(}, {"name": "b", "shape": )" + b + R"(, "requires_grad": )" + Rg(brg) + R"(}],
      "ops": [{"op": ")" + op + R"(", "inputs": ["a", "b"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(AddRuleTest, BroadcastsAndSavesNothing) {
  auto run = testing::Simulate(BinaryBody("add", "[4, 1, 8]", true, "[3, 1]", true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 3, 8));
  EXPECT_THAT(SavedBy(run, "y"), IsEmpty());
}

// Note [Elementwise output layout]: q [2, 3, 4, 5] viewed as its transpose(1, 2) [2, 4, 3, 5]
// times a broadcast [1, 1, 3, 5] keeps q's memory order, so contiguous() of the transposed-back
// result copies nothing; contiguous inputs give a contiguous output.
TEST(AddRuleTest, OutputFollowsTheMemoryOrderOfATransposedInput) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "q", "shape": [2, 3, 4, 5]},
      {"name": "c", "shape": [1, 1, 3, 5]}],
      "ops": [{"op": "transpose", "inputs": ["q"], "outputs": ["qt"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "mul", "inputs": ["qt", "c"], "outputs": ["y"]},
              {"op": "transpose", "inputs": ["y"], "outputs": ["yt"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "contiguous", "inputs": ["yt"], "outputs": ["z"]},
              {"op": "mean", "inputs": ["z"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  const TensorMeta& y = run.r.bound.metas[run.graph.FindTensor("y")];
  EXPECT_THAT(y.strides, ElementsAre(60, 5, 20, 1));
  EXPECT_TRUE(testing::BuffersNamed(run.r.events, "z").empty());
  auto plain = testing::Simulate(BinaryBody("mul", "[2, 3, 4]", true, "[4]", true));
  ASSERT_TRUE(plain.ok) << plain.error;
  EXPECT_TRUE(plain.r.bound.metas[plain.graph.FindTensor("y")].is_contiguous());
}

TEST(AddRuleTest, BroadcastInputGetsReducedGrad) {
  auto run = testing::Simulate(BinaryBody("add", "[4, 8]", true, "[8]", true));
  ASSERT_TRUE(run.ok) << run.error;
  auto g = testing::Buffer(run.r.events, "b.grad");
  ASSERT_TRUE(g);
  EXPECT_EQ(run.r.events.buffers[*g].bytes, 8 * 4);
}

TEST(AddRuleTest, MismatchedShapesNameOpPointer) {
  auto run = testing::Simulate(BinaryBody("add", "[4, 8]", true, "[5]", true));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("test.json: /ops/0: add \"y\""));
  EXPECT_THAT(run.error, HasSubstr("[4, 8]"));
}

TEST(AddRuleTest, InplaceAliasesFirstInput) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [8, 8]}, {"name": "b", "shape": [8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "add", "inputs": ["h", "b"], "outputs": ["y"], "attrs": {"inplace": true}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(Aliases(run, "y", "h"));
  EXPECT_TRUE(testing::BuffersNamed(run.r.events, "y").empty());
}

TEST(AddRuleTest, InplaceThatWouldGrowTheFirstInputIsAnError) {
  auto run = testing::Simulate(BinaryBody("add", "[8]", true, "[4, 8]", true, R"({"inplace": true})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: add"));
}

TEST(AddRuleTest, MissingSecondOperandNeedsScalar) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [4]}],
      "ops": [{"op": "add", "inputs": ["a"], "outputs": ["y"]}, {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: add"));
  run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [4]}],
      "ops": [{"op": "sub", "inputs": ["a"], "outputs": ["y"], "attrs": {"scalar": 2, "reverse": true}}, {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedBy(run, "y"), IsEmpty());
}

TEST(MulRuleTest, KeepsEachOperandOnlyForTheOthersGrad) {
  auto both = testing::Simulate(BinaryBody("mul", "[4, 8]", true, "[4, 8]", true));
  ASSERT_TRUE(both.ok) << both.error;
  EXPECT_THAT(SavedNames(both, "y"), UnorderedElementsAre("a", "b"));
  auto a_only = testing::Simulate(BinaryBody("mul", "[4, 8]", true, "[4, 8]", false));
  ASSERT_TRUE(a_only.ok);
  EXPECT_THAT(SavedNames(a_only, "y"), ElementsAre("b"));
  auto b_only = testing::Simulate(BinaryBody("mul", "[4, 8]", false, "[4, 8]", true));
  ASSERT_TRUE(b_only.ok);
  EXPECT_THAT(SavedNames(b_only, "y"), ElementsAre("a"));
}

TEST(MulRuleTest, InplaceWithGradRequiringOtherSavesACloneOfSelf) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [8, 8]}, {"name": "s", "shape": [8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "mul", "inputs": ["h", "s"], "outputs": ["y"], "attrs": {"inplace": true}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(Aliases(run, "y", "h"));
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("extra:pre-inplace clone", "s"));
}

TEST(MulRuleTest, ScalarMultiplySavesNothing) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [4]}],
      "ops": [{"op": "mul", "inputs": ["a"], "outputs": ["y"], "attrs": {"scalar": 0.5}}, {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedBy(run, "y"), IsEmpty());
}

TEST(DivRuleTest, AlwaysKeepsDivisorAndKeepsDividendOnlyIfDivisorNeedsGrad) {
  auto a_only = testing::Simulate(BinaryBody("div", "[4, 8]", true, "[4, 8]", false));
  ASSERT_TRUE(a_only.ok) << a_only.error;
  EXPECT_THAT(SavedNames(a_only, "y"), ElementsAre("b"));
  auto both = testing::Simulate(BinaryBody("div", "[4, 8]", true, "[4, 8]", true));
  ASSERT_TRUE(both.ok);
  EXPECT_THAT(SavedNames(both, "y"), UnorderedElementsAre("a", "b"));
}

TEST(MaskedFillRuleTest, KeepsOnlyTheMask) {
  auto run = testing::Simulate(R"("inputs": [{"name": "m", "shape": [1, 8], "dtype": "bool"}], "parameters": [{"name": "a", "shape": [4, 8]}],
      "ops": [{"op": "masked_fill", "inputs": ["a", "m"], "outputs": ["y"], "attrs": {"value": "-inf"}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 8));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("m"));
}

TEST(MaskedFillRuleTest, MaskMustBroadcastToInput) {
  auto run = testing::Simulate(R"("inputs": [{"name": "m", "shape": [3, 8], "dtype": "bool"}], "parameters": [{"name": "a", "shape": [4, 8]}],
      "ops": [{"op": "masked_fill", "inputs": ["a", "m"], "outputs": ["y"], "attrs": {"value": 0}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: masked_fill"));
}

// ---------------------------------------------------------------- reductions
std::string ReduceBody(const std::string& op, const std::string& attrs) {
  return R"("inputs": [], "parameters": [{"name": "a", "shape": [2, 3, 4]}],
      "ops": [{"op": ")" + op + R"(", "inputs": ["a"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(ReduceRuleTest, Shapes) {
  auto run = testing::Simulate(ReduceBody("mean", R"({"dim": [1]})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4));
  run = testing::Simulate(ReduceBody("sum", R"({"dim": -1, "keepdim": true})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 3, 1));
  run = testing::Simulate(ReduceBody("mean", "{}"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), IsEmpty());
}

TEST(ReduceRuleTest, DimOutOfRangeIsAnError) {
  auto run = testing::Simulate(ReduceBody("sum", R"({"dim": 3})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: sum"));
}

TEST(ReduceRuleTest, MeanKeepsInputOnlyOnCpu113) {
  auto cuda = testing::Simulate(ReduceBody("mean", R"({"dim": [1]})"));
  ASSERT_TRUE(cuda.ok);
  EXPECT_THAT(SavedBy(cuda, "y"), IsEmpty());
  auto cpu = testing::Simulate(ReduceBody("mean", R"({"dim": [1]})"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(cpu.ok);
  EXPECT_THAT(SavedNames(cpu, "y"), ElementsAre("a"));
  auto sum = testing::Simulate(ReduceBody("sum", R"({"dim": [1]})"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(sum.ok);
  EXPECT_THAT(SavedBy(sum, "y"), IsEmpty());
}

// ---------------------------------------------------------------- losses
std::string CeBody(const std::string& target_shape = "[4]", const std::string& attrs = "{}") {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": )" + target_shape + R"(, "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [10, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["logits"]},
              {"op": "cross_entropy", "inputs": ["logits", "t"], "outputs": ["loss"], "attrs": )" + attrs + R"(}],
      "loss": "loss")";
}

TEST(CrossEntropyRuleTest, SavesLogSoftmaxOutputAndTotalWeight) {
  auto run = testing::Simulate(CeBody());
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "loss"), IsEmpty());
  // One entry per SavedVariable: LogSoftmaxBackward's result, NllLossBackward's self (the same
  // tensor) and target, then its total_weight (what a saved-tensor hook packs, in that order).
  auto saved = SavedBy(run, "loss");
  ASSERT_EQ(saved.size(), 4u);
  EXPECT_EQ(saved[0].name, "extra:log_softmax");
  EXPECT_EQ(saved[0].bytes, 4 * 10 * 4);
  EXPECT_EQ(saved[1].name, "extra:log_softmax");
  EXPECT_EQ(saved[2].bytes, 4 * 8);  // the int64 target
  EXPECT_EQ(saved[3].name, "extra:total_weight");
  EXPECT_EQ(saved[3].bytes, 4);
}

// Under CUDA autocast (2.x) cross_entropy's log_softmax runs in the logits' dtype and nll_loss
// casts it to fp32 (H100 snapshots, 2.11); the CPU 2.13 table casts the logits instead.
TEST(CrossEntropyRuleTest, CudaAutocastKeepsLogSoftmaxInBf16AndSavesItsFp32Copy) {
  SimOptions o = Opts("cuda");
  o.amp = "bf16";
  auto run = testing::Simulate(CeBody(), o);
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = SavedBy(run, "loss");
  ASSERT_EQ(saved.size(), 4u);
  EXPECT_EQ(saved[0].name, "extra:log_softmax");
  EXPECT_EQ(saved[0].bytes, 4 * 10 * 2);  // bf16
  EXPECT_EQ(saved[1].name, "extra:log_softmax in fp32 (nll_loss autocast)");
  EXPECT_EQ(saved[1].bytes, 4 * 10 * 4);
  EXPECT_EQ(saved[3].bytes, 4);  // an fp32 total_weight
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "nll_loss grad, cast back").empty());

  SimOptions cpu = Opts("cpu");
  cpu.amp = "bf16";
  auto c = testing::Simulate(CeBody(), cpu);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(SavedBy(c, "loss")[0].bytes, 4 * 10 * 4);  // the fp32 policy: log_softmax of fp32 logits
  EXPECT_EQ(SavedBy(c, "loss")[1].name, "extra:log_softmax");
}

TEST(CrossEntropyRuleTest, ReductionNoneKeepsBatchShape) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": [4], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [10, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["logits"]},
              {"op": "cross_entropy", "inputs": ["logits", "t"], "outputs": ["per"], "attrs": {"reduction": "none"}},
              {"op": "mean", "inputs": ["per"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "per"), ElementsAre(4));
}

TEST(CrossEntropyRuleTest, TargetShapeMismatchNamesOp) {
  auto run = testing::Simulate(CeBody("[5]"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/1: cross_entropy"));
}

TEST(CrossEntropyRuleTest, UnknownReductionIsAnError) {
  auto run = testing::Simulate(CeBody("[4]", R"({"reduction": "avg"})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/1: cross_entropy"));
}

TEST(CrossEntropyRuleTest, BackwardMakesNllGradTemporaryAndLogitsGrad) {
  auto run = testing::Simulate(CeBody());
  ASSERT_TRUE(run.ok) << run.error;
  const auto& s = run.r.events;
  auto tmp = testing::BuffersContaining(s, "nll_loss grad");
  ASSERT_EQ(tmp.size(), 1u);
  EXPECT_EQ(s.buffers[tmp[0]].bytes, 4 * 10 * 4);
  EXPECT_EQ(s.buffers[tmp[0]].category, Category::kTemporary);
  auto lg = testing::Buffer(s, "logits.grad");
  ASSERT_TRUE(lg);
  // The temporary is freed before the logits grad is consumed by linear's backward.
  EXPECT_LT(testing::FreeIndex(s, tmp[0]), testing::FreeIndex(s, *lg));
}

TEST(NllLossRuleTest, SavesInputAndTotalWeight) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": [4], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [10, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["logits"]},
              {"op": "log_softmax", "inputs": ["logits"], "outputs": ["lp"], "attrs": {"dim": 1}},
              {"op": "nll_loss", "inputs": ["lp", "t"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "loss"), UnorderedElementsAre("lp", "extra:total_weight"));
}

TEST(MseLossRuleTest, SavesInputAndTarget) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": [4, 10]}],
      "parameters": [{"name": "w", "shape": [10, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]},
              {"op": "mse_loss", "inputs": ["y", "t"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "loss"), IsEmpty());
  EXPECT_THAT(SavedNames(run, "loss"), UnorderedElementsAre("y", "t"));
}


// ---------------------------------------------------------------- Note [Broadcast grads]

TEST(BroadcastGradTest, MulMakesTheBroadcastInputsGradAtTheOutputShapeThenSumsIt) {
  auto run = testing::Simulate(BinaryBody("mul", "[4, 8]", true, "[8]", true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "b.grad"), ElementsAre(4 * 8 * 4, 8 * 4));
  EXPECT_THAT(AllocBytes(run, "a.grad"), ElementsAre(4 * 8 * 4));
  // other's grad is computed first (the generated MulBackward0), self's while it is still unreduced
  auto b = testing::BuffersNamed(run.r.events, "b.grad"), a = testing::BuffersNamed(run.r.events, "a.grad");
  EXPECT_LT(testing::AllocIndex(run.r.events, b[0]), testing::AllocIndex(run.r.events, a[0]));
  EXPECT_GT(testing::FreeIndex(run.r.events, b[0]), testing::AllocIndex(run.r.events, a[0]));
}

TEST(BroadcastGradTest, DivOtherGradKeepsThreeOutputShapedTemporariesUntilTheProduct) {
  auto run = testing::Simulate(BinaryBody("div", "[4, 8]", true, "[4, 1]", true));
  ASSERT_TRUE(run.ok) << run.error;
  for (const char* t : {"y:self / other", "y:(self / other) / other", "y:-grad"})
    EXPECT_THAT(AllocBytes(run, t), ElementsAre(4 * 8 * 4)) << t;
  EXPECT_THAT(AllocBytes(run, "b.grad"), ElementsAre(4 * 8 * 4, 4 * 4));
  auto neg = testing::Buffer(run.r.events, "y:-grad");
  auto bg = testing::BuffersNamed(run.r.events, "b.grad");
  ASSERT_TRUE(neg && !bg.empty());
  EXPECT_GT(testing::FreeIndex(run.r.events, *neg), testing::AllocIndex(run.r.events, bg[0]));
}

TEST(BroadcastGradTest, DivWithoutGradForOtherHasNoTemporaries) {
  auto run = testing::Simulate(BinaryBody("div", "[4, 8]", true, "[4, 8]", false));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "self / other").empty());
}

// ---------------------------------------------------------------- elementwise losses
std::string LossBody(const std::string& op) {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": [4, 16]}], "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": ")" + op + R"(", "inputs": ["h", "t"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(BceWithLogitsRuleTest, KeepsInputAndTargetAndBuildsTheLossThroughLogSigmoid) {
  auto run = testing::Simulate(LossBody("binary_cross_entropy_with_logits"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "loss"), UnorderedElementsAre("h", "t"));
  EXPECT_THAT(AllocBytes(run, "loss:log_sigmoid buffer"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "loss:sigmoid(input) - target"), ElementsAre(kH));
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "log-sum-exp"), 0);
}

TEST(BceWithLogitsRuleTest, Torch113SpellsOutTheLogSumExp) {
  auto run = testing::Simulate(LossBody("binary_cross_entropy_with_logits"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "log-sum-exp temporary", &n), 3 * kH);
  EXPECT_EQ(n, 3u);
  EXPECT_THAT(AllocBytes(run, "loss:max_val"), ElementsAre(kH));
}

// Note [Binary cross entropy]
std::string BceBody(const std::string& reduction) {
  return R"("inputs": [{"name": "t", "shape": [4, 16]}], "parameters": [{"name": "p", "shape": [4, 16]}],
      "ops": [{"op": "binary_cross_entropy", "inputs": ["p", "t"], "outputs": ["loss"], "attrs": {"reduction": ")" +
         reduction + R"("}}], "loss": "loss")";
}

TEST(BceRuleTest, TheZeroDimLossKeepsAnInputSizedStorageAndTheGradIsNew) {
  auto run = testing::Simulate(BceBody("mean"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "loss"), IsEmpty());
  EXPECT_THAT(SavedNames(run, "loss"), UnorderedElementsAre("p", "t"));
  auto loss = testing::Lives(run.r.events, "loss");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(loss[0].bytes, kH);
  EXPECT_EQ(testing::Lives(run.r.events, "loss:reduced loss").size(), 1u);
  EXPECT_EQ(testing::BuffersContaining(run.r.events, "wrapped numel").size(), 2u);  // backward div_(numel)
  auto sum = testing::Simulate(BceBody("sum"), Opts("cpu"));
  ASSERT_TRUE(sum.ok) << sum.error;
  EXPECT_TRUE(testing::BuffersContaining(sum.r.events, "wrapped").empty());
}

TEST(SmoothL1RuleTest, TheZeroDimLossKeepsTheInputSizedStorageItWasResizedFrom) {
  auto run = testing::Simulate(LossBody("smooth_l1_loss"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "loss"), UnorderedElementsAre("h", "t"));
  EXPECT_THAT(AllocBytes(run, "loss"), ElementsAre(kH));
  EXPECT_THAT(AllocBytes(run, "loss:elementwise loss"), ElementsAre(kH));
  auto huber = testing::Simulate(LossBody("huber_loss"), Opts("cpu"));
  ASSERT_TRUE(huber.ok) << huber.error;
  EXPECT_THAT(AllocBytes(huber, "loss"), ElementsAre(4));
}

TEST(SmoothL1RuleTest, TargetOfAnotherShapeIsAnError) {
  std::string body = LossBody("smooth_l1_loss");
  body.replace(body.find("[4, 16]"), 7, "[3, 5]");
  auto run = testing::Simulate(body);
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("smooth_l1_loss"));
}

}  // namespace
}  // namespace memsim
