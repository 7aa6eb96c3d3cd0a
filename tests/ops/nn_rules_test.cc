// Op rules of lib/ops/rules_nn.cc: shape inference, errors, and what each node saves for
// backward depending on which inputs require grad (docs/op-rules.md, Note [Saved tensors]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SizesOf;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::Opts;
using testing::SavedActivationBytes;
using testing::SavedBy;
using testing::SavedNames;

std::string Rg(bool b) { return b ? "true" : "false"; }


// A parameter "x" (so that its requires_grad is controllable) feeding one op, then mean.
std::string ParamXBody(const std::string& params, const std::string& op, const std::string& out = "y") {
  return R"("inputs": [], "parameters": [)" + params + R"(], "ops": [)" + op +
         R"(, {"op": "mean", "inputs": [")" + out + R"("], "outputs": ["loss"]}], "loss": "loss")";
}

// ---------------------------------------------------------------- linear
std::string LinearBody(bool xrg, bool wrg, bool bias = true) {
  return ParamXBody(R"({"name": "x", "shape": [4, 8], "requires_grad": )" + Rg(xrg) +
                        R"(}, {"name": "w", "shape": [16, 8], "requires_grad": )" + Rg(wrg) +
                        R"(}, {"name": "b", "shape": [16]})",
                    std::string(R"({"op": "linear", "inputs": ["x", "w")") + (bias ? R"(, "b")" : "") +
                        R"(], "outputs": ["y"]})");
}

TEST(LinearRuleTest, OutputShapeReplacesLastDim) {
  auto run = testing::Simulate(LinearBody(true, true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16));
}

TEST(LinearRuleTest, BothRequireGradSavesXAndW) {
  auto run = testing::Simulate(LinearBody(true, true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "w"));
}

TEST(LinearRuleTest, FrozenWeightSavesNoInput) {
  auto run = testing::Simulate(LinearBody(true, false));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("w"));
}

TEST(LinearRuleTest, InputWithoutGradSavesOnlyX) {
  auto run = testing::Simulate(LinearBody(false, true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("x"));
}

TEST(LinearRuleTest, NothingRequiresGradHasNoNode) {
  auto run = testing::Simulate(LinearBody(false, false));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedBy(run, "y"), IsEmpty());
}

TEST(LinearRuleTest, BiasIsNeverSaved) {
  auto run = testing::Simulate(LinearBody(true, true));
  ASSERT_TRUE(run.ok) << run.error;
  for (const auto& n : SavedNames(run, "y")) EXPECT_NE(n, "b");
}

TEST(LinearRuleTest, MismatchedInnerDimNamesOpPointer) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "x", "shape": [4, 7]}, {"name": "w", "shape": [16, 8]})",
      R"({"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0"));
  EXPECT_THAT(run.error, HasSubstr("linear"));
  EXPECT_THAT(run.error, HasSubstr("[4, 7]"));
}

TEST(LinearRuleTest, NonContiguous3dInputSavesAReshapeCopy) {
  // x [2, 8, 4] transposed to [2, 4, 8]: not flattenable to [8, 8] as a view.
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [2, 8, 4]}],
      "parameters": [{"name": "w", "shape": [16, 8]}, {"name": "b", "shape": [16]}],
      "ops": [{"op": "transpose", "inputs": ["x"], "outputs": ["xt"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "linear", "inputs": ["xt", "w", "b"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 16));
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "extra:reshape copy of input");
  EXPECT_EQ(saved[0].bytes, 2 * 8 * 4 * 4);
}

TEST(LinearRuleTest, Contiguous3dInputWithBiasSavesTheInputItself) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [2, 4, 8]}],
      "parameters": [{"name": "w", "shape": [16, 8]}, {"name": "b", "shape": [16]}],
      "ops": [{"op": "linear", "inputs": ["x", "w", "b"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("x"));
}

TEST(LinearRuleTest, BackwardAllocatesWeightAndBiasGradsOfParameterSize) {
  auto run = testing::Simulate(LinearBody(false, true));
  ASSERT_TRUE(run.ok) << run.error;
  const auto& s = run.r.events;
  auto w = testing::Buffer(s, "w.grad");
  auto b = testing::Buffer(s, "b.grad");
  ASSERT_TRUE(w && b);
  EXPECT_EQ(s.buffers[*w].bytes, 16 * 8 * 4);
  EXPECT_EQ(s.buffers[*b].bytes, 16 * 4);
  EXPECT_TRUE(testing::BuffersNamed(s, "x.grad").empty());
}

// ---------------------------------------------------------------- conv
std::string ConvBody(bool xrg, bool wrg, const std::string& attrs = "{}") {
  return ParamXBody(R"({"name": "x", "shape": [2, 3, 8, 8], "requires_grad": )" + Rg(xrg) +
                        R"(}, {"name": "w", "shape": [4, 3, 3, 3], "requires_grad": )" + Rg(wrg) +
                        R"(}, {"name": "b", "shape": [4], "requires_grad": )" + Rg(wrg) + "}",
                    R"({"op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["y"], "attrs": )" + attrs + "}");
}

TEST(Conv2dRuleTest, OutputShapeWithPaddingAndStride) {
  auto run = testing::Simulate(ConvBody(false, true, R"({"padding": 1})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 8, 8));
  run = testing::Simulate(ConvBody(false, true, R"({"stride": 2, "padding": 1})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 4, 4));
  run = testing::Simulate(ConvBody(false, true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 6, 6));
}

TEST(Conv2dRuleTest, KeepsInputAndWeightWithFrozenWeight) {
  auto run = testing::Simulate(ConvBody(true, false));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "w"));
}

TEST(Conv2dRuleTest, KeepsInputAndWeightWhenInputNeedsNoGrad) {
  auto run = testing::Simulate(ConvBody(false, true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "w"));
}

TEST(Conv2dRuleTest, NoNodeWhenNothingRequiresGrad) {
  auto run = testing::Simulate(ConvBody(false, false));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedBy(run, "y"), IsEmpty());
}

TEST(Conv2dRuleTest, ChannelMismatchNamesOpPointer) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 5, 8, 8]}, {"name": "w", "shape": [4, 3, 3, 3]})",
                                          R"({"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"]})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("test.json: /ops/0: conv2d"));
}

TEST(Conv2dRuleTest, KernelLargerThanInputIsAnError) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 3, 2, 2]}, {"name": "w", "shape": [4, 3, 3, 3]})",
                                          R"({"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"]})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0"));
}

TEST(Conv2dRuleTest, GroupedConvShape) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 8, 5, 5]}, {"name": "w", "shape": [8, 1, 3, 3]})",
                                          R"({"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"groups": 8, "padding": 1}})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 8, 5, 5));
}

TEST(Conv2dRuleTest, CpuProfileAddsOnednnReordersThatAreNotSaved) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 16, 8, 8]}, {"name": "w", "shape": [8, 16, 3, 3]})",
                                          R"({"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"]})"),
                               Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "onednn").empty());
  for (uint32_t b : testing::BuffersContaining(run.r.events, "onednn"))
    EXPECT_EQ(run.r.events.buffers[b].category, Category::kTemporary) << run.r.events.buffers[b].name;
  auto cuda = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 16, 8, 8]}, {"name": "w", "shape": [8, 16, 3, 3]})",
                                           R"({"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"]})"));
  ASSERT_TRUE(cuda.ok);
  EXPECT_TRUE(testing::BuffersContaining(cuda.r.events, "onednn").empty());
}

TEST(Conv1dRuleTest, OutputShape) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 3, 10]}, {"name": "w", "shape": [6, 3, 3]})",
                                          R"({"op": "conv1d", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"stride": 2}})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 6, 4));
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "w"));
}

// ---------------------------------------------------------------- Note [THNN convolutions]
// A 1x1 conv of batch N (its grad made non-contiguous by a permute after it when |permute|).
std::string OneByOneBody(int n, int k, bool permute, int stride = 1) {
  const std::string tail = permute ? R"({"op": "permute", "inputs": ["c"], "outputs": ["y"], "attrs": {"dims": [0, 2, 3, 1]}})"
                                   : R"({"op": "relu", "inputs": ["c"], "outputs": ["y"]})";
  const std::string ks = std::to_string(k);
  return R"("inputs": [], "parameters": [{"name": "x", "shape": [)" + std::to_string(n) +
         R"(, 24, 10, 10]}, {"name": "w", "shape": [15, 24, )" + ks + ", " + ks + R"(]}, {"name": "b", "shape": [15]}],
      "ops": [{"op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"], "attrs": {"stride": )" +
         std::to_string(stride) + R"(, "padding": )" + std::to_string(k / 2) + R"(}}, )" + tail +
         R"(, {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(ThnnConvRuleTest, SingleThreadedOneByOneBelowBatch16RunsSlowConv2d) {
  for (const char* torch : {"1.13", "2.13"}) {
    auto run = testing::Simulate(OneByOneBody(2, 1, true), Opts("cpu", "sgd", torch));
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(testing::BuffersContaining(run.r.events, "onednn").empty()) << torch;
    // grad_output.contiguous() in the grad_input part and again in the grad_weight part
    auto copies = testing::BuffersContaining(run.r.events, "grad_output contiguous copy");
    ASSERT_EQ(copies.size(), 2u) << torch;
    EXPECT_EQ(run.r.events.buffers[copies[0]].bytes, 2 * 15 * 10 * 10 * 4);
  }
}

TEST(ThnnConvRuleTest, OneDnnWhenUseMkldnnHolds) {
  // batch 16, a 3x3 kernel or a stride of 2: oneDNN (its reorders)
  auto b16 = testing::Simulate(OneByOneBody(16, 1, false), Opts("cpu", "sgd", "1.13"));
  auto k3 = testing::Simulate(OneByOneBody(2, 3, false), Opts("cpu", "sgd", "1.13"));
  auto s2 = testing::Simulate(OneByOneBody(2, 1, false, 2), Opts("cpu", "sgd", "1.13"));
  for (const auto* run : {&b16, &k3, &s2}) {
    ASSERT_TRUE(run->ok) << run->error;
    EXPECT_FALSE(testing::BuffersContaining(run->r.events, "onednn weight reorder").empty());
  }
  // a contiguous grad: no copy on the slow path either
  auto plain = testing::Simulate(OneByOneBody(2, 1, false), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(plain.ok) << plain.error;
  EXPECT_TRUE(testing::BuffersContaining(plain.r.events, "grad_output contiguous copy").empty());
}

TEST(ThnnConvRuleTest, ThreeDCallsReadNCDHAndRunSlowConv3d) {
  // batch 1, 3x3x3, N·C·D·H = 1·64·4·6 = 1536 <= 20480: use_mkldnn declines, slow_conv3d runs.
  const std::string body = R"("inputs": [], "parameters": [{"name": "x", "shape": [1, 64, 4, 6, 6]},
      {"name": "w", "shape": [32, 64, 3, 3, 3]}], "ops": [
      {"op": "conv3d", "inputs": ["x", "w"], "outputs": ["c"], "attrs": {"padding": 1}},
      {"op": "mean", "inputs": ["c"], "outputs": ["loss"]}], "loss": "loss")";
  auto run = testing::Simulate(body, Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "onednn").empty());
  // vol2col columns [1, 64·27, 4·6·6] in forward and for the weight's grad, and the grad_input
  // part's fgrad_input of the same size (ConvolutionMM3d.cpp)
  const int64_t cols = 64 * 27 * 4 * 6 * 6 * 4;
  auto columns = testing::BuffersContaining(run.r.events, "im2col columns");
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_EQ(run.r.events.buffers[columns[0]].bytes, cols);
  auto fgrad = testing::BuffersContaining(run.r.events, "slow_conv3d fgrad_input columns");
  ASSERT_EQ(fgrad.size(), 1u);
  EXPECT_EQ(run.r.events.buffers[fgrad[0]].bytes, cols);
}

// ---------------------------------------------------------------- Note [3-D convolution and pooling]
std::string Conv3dBody(const std::string& tail_op, const std::string& tail_out) {
  return R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 16, 4, 6, 6], "requires_grad": false},
      {"name": "w", "shape": [8, 16, 3, 3, 3]}], "ops": [
      {"op": "conv3d", "inputs": ["x", "w"], "outputs": ["c"], "attrs": {"padding": 1}}, )" + tail_op +
         R"(, {"op": "mean", "inputs": [")" + tail_out + R"("], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(Conv3dRuleTest, ShapeSavesAndOnednnReordersLikeConv2d) {
  auto run = testing::Simulate(Conv3dBody(R"({"op": "relu", "inputs": ["c"], "outputs": ["y"]})", "y"),
                               Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "c"), ElementsAre(2, 8, 4, 6, 6));
  EXPECT_THAT(SavedNames(run, "c"), UnorderedElementsAre("x", "w"));
  // 16 input channels: a source reorder (forward, and again for the weight's grad), a weight
  // reorder and the blocked output, as for 2-D.
  EXPECT_EQ(testing::BuffersContaining(run.r.events, "onednn src reorder").size(), 2u);
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "onednn blocked dst").empty());
}

TEST(Pool3dRuleTest, MaxKeepsInputAndIndicesAvgKeepsInput) {
  auto mx = testing::Simulate(Conv3dBody(
      R"({"op": "max_pool3d", "inputs": ["c"], "outputs": ["y"], "attrs": {"kernel_size": 2}})", "y"));
  ASSERT_TRUE(mx.ok) << mx.error;
  EXPECT_THAT(SizesOf(mx, "y"), ElementsAre(2, 8, 2, 3, 3));
  auto saved = SavedBy(mx, "y");
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[1].name, "extra:max_pool indices");
  EXPECT_EQ(saved[1].bytes, 2 * 8 * 2 * 3 * 3 * 8);
  auto avg = testing::Simulate(Conv3dBody(
      R"({"op": "avg_pool3d", "inputs": ["c"], "outputs": ["y"], "attrs": {"kernel_size": [2, 3, 3], "stride": 1}})", "y"));
  ASSERT_TRUE(avg.ok) << avg.error;
  EXPECT_THAT(SizesOf(avg, "y"), ElementsAre(2, 8, 3, 4, 4));
  EXPECT_THAT(SavedNames(avg, "y"), ElementsAre("c"));
}

TEST(Pool3dRuleTest, AdaptiveAvgToOneIsAMeanThatKeepsOnlySizesOn213) {
  auto part = testing::Simulate(Conv3dBody(
      R"({"op": "adaptive_avg_pool3d", "inputs": ["c"], "outputs": ["y"], "attrs": {"output_size": [1, 2, 2]}})", "y"));
  ASSERT_TRUE(part.ok) << part.error;
  EXPECT_THAT(SizesOf(part, "y"), ElementsAre(2, 8, 1, 2, 2));
  EXPECT_THAT(SavedNames(part, "y"), ElementsAre("c"));
  auto global = testing::Simulate(Conv3dBody(
      R"({"op": "adaptive_avg_pool3d", "inputs": ["c"], "outputs": ["y"], "attrs": {"output_size": 1}})", "y"));
  ASSERT_TRUE(global.ok) << global.error;
  EXPECT_THAT(SizesOf(global, "y"), ElementsAre(2, 8, 1, 1, 1));
  EXPECT_THAT(SavedBy(global, "y"), IsEmpty());
}

TEST(Pool3dRuleTest, A3dInputIsAnErrorNamingTheOp) {  // 4-D is an unbatched [C, D, H, W]
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [3, 8, 8]})",
                                          R"({"op": "max_pool3d", "inputs": ["x"], "outputs": ["y"], "attrs": {"kernel_size": 2}})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: max_pool3d"));
}

// ---------------------------------------------------------------- mm / bmm / matmul / baddbmm
std::string TwoOperandBody(const std::string& op, const std::string& a_shape, bool arg,
                           const std::string& b_shape, bool brg) {
  return ParamXBody(R"({"name": "a", "shape": )" + a_shape + R"(, "requires_grad": )" + Rg(arg) +
                        R"(}, {"name": "b", "shape": )" + b_shape + R"(, "requires_grad": )" + Rg(brg) + "}",
                    R"({"op": ")" + op + R"(", "inputs": ["a", "b"], "outputs": ["y"]})");
}

TEST(MmRuleTest, KeepsEachOperandOnlyForTheOthersGrad) {
  auto both = testing::Simulate(TwoOperandBody("mm", "[4, 8]", true, "[8, 3]", true));
  ASSERT_TRUE(both.ok) << both.error;
  EXPECT_THAT(SizesOf(both, "y"), ElementsAre(4, 3));
  EXPECT_THAT(SavedNames(both, "y"), UnorderedElementsAre("a", "b"));
  auto a_only = testing::Simulate(TwoOperandBody("mm", "[4, 8]", true, "[8, 3]", false));
  ASSERT_TRUE(a_only.ok);
  EXPECT_THAT(SavedNames(a_only, "y"), ElementsAre("b"));
  auto b_only = testing::Simulate(TwoOperandBody("mm", "[4, 8]", false, "[8, 3]", true));
  ASSERT_TRUE(b_only.ok);
  EXPECT_THAT(SavedNames(b_only, "y"), ElementsAre("a"));
}

TEST(MmRuleTest, RejectsNon2dInputs) {
  auto run = testing::Simulate(TwoOperandBody("mm", "[2, 4, 8]", true, "[8, 3]", true));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: mm"));
}

TEST(MmRuleTest, InnerDimensionMismatchNamesShapes) {
  auto run = testing::Simulate(TwoOperandBody("mm", "[4, 8]", true, "[7, 3]", true));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0"));
  EXPECT_THAT(run.error, HasSubstr("[4, 8] @ [7, 3]"));
}

TEST(BmmRuleTest, ShapeAndPruning) {
  auto run = testing::Simulate(TwoOperandBody("bmm", "[2, 4, 8]", false, "[2, 8, 3]", true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 3));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("a"));
}

TEST(BmmRuleTest, RejectsUnequalBatch) {
  auto run = testing::Simulate(TwoOperandBody("bmm", "[2, 4, 8]", true, "[3, 8, 3]", true));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: bmm"));
}

TEST(MatmulRuleTest, BroadcastsBatchDims) {
  auto run = testing::Simulate(TwoOperandBody("matmul", "[2, 1, 4, 5]", true, "[3, 5, 6]", true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 3, 4, 6));
}

TEST(MatmulRuleTest, VectorOperandsDropDims) {
  auto run = testing::Simulate(TwoOperandBody("matmul", "[4, 5]", true, "[5]", true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4));
}

TEST(MatmulRuleTest, NonFlattenableOperandIsCopiedAndTheCopySaved) {
  // k: [2, 3, 4, 5] permuted to [2, 4, 3, 5] -> batch dims (2, 4) of a permuted tensor do not fold.
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "a", "shape": [2, 4, 5, 3]}, {"name": "k", "shape": [2, 3, 4, 5]})",
      R"({"op": "permute", "inputs": ["k"], "outputs": ["kp"], "attrs": {"dims": [0, 2, 1, 3]}},
         {"op": "matmul", "inputs": ["a", "kp"], "outputs": ["y"]})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 5, 5));
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("a", "extra:matmul operand copy"));
  EXPECT_EQ(SavedActivationBytes(run, "y"), 2 * 3 * 4 * 5 * 4);
}

TEST(BaddbmmRuleTest, NeverSavesSelfAndPrunesBatches) {
  auto body = [](bool s, bool b1, bool b2) {
    return ParamXBody(R"({"name": "s", "shape": [2, 4, 3], "requires_grad": )" + Rg(s) +
                          R"(}, {"name": "b1", "shape": [2, 4, 8], "requires_grad": )" + Rg(b1) +
                          R"(}, {"name": "b2", "shape": [2, 8, 3], "requires_grad": )" + Rg(b2) + "}",
                      R"({"op": "baddbmm", "inputs": ["s", "b1", "b2"], "outputs": ["y"]})");
  };
  auto all = testing::Simulate(body(true, true, true));
  ASSERT_TRUE(all.ok) << all.error;
  EXPECT_THAT(SizesOf(all, "y"), ElementsAre(2, 4, 3));
  EXPECT_THAT(SavedNames(all, "y"), UnorderedElementsAre("b1", "b2"));
  auto only_b1 = testing::Simulate(body(true, true, false));
  ASSERT_TRUE(only_b1.ok);
  EXPECT_THAT(SavedNames(only_b1, "y"), ElementsAre("b2"));
  auto only_self = testing::Simulate(body(true, false, false));
  ASSERT_TRUE(only_self.ok);
  EXPECT_THAT(SavedNames(only_self, "y"), IsEmpty());
}

TEST(BaddbmmRuleTest, MismatchedBatchesNameOp) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "s", "shape": [2, 4, 3]}, {"name": "b1", "shape": [2, 4, 8]}, {"name": "b2", "shape": [2, 7, 3]})",
      R"({"op": "baddbmm", "inputs": ["s", "b1", "b2"], "outputs": ["y"]})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: baddbmm"));
}

// ---------------------------------------------------------------- embedding
std::string EmbeddingBody(bool wrg, const std::string& idx_dtype = "int64") {
  return R"("inputs": [{"name": "ids", "shape": [4, 7], "dtype": ")" + idx_dtype + R"("}],
      "parameters": [{"name": "emb", "shape": [100, 16], "requires_grad": )" + Rg(wrg) + R"(}],
      "ops": [{"op": "embedding", "inputs": ["ids", "emb"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(EmbeddingRuleTest, ShapeAppendsEmbeddingDim) {
  auto run = testing::Simulate(EmbeddingBody(true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 7, 16));
}

TEST(EmbeddingRuleTest, KeepsOnlyTheIndices) {
  auto run = testing::Simulate(EmbeddingBody(true));
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = SavedBy(run, "y");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "ids");
  EXPECT_EQ(saved[0].bytes, 4 * 7 * 8);
}

TEST(EmbeddingRuleTest, BackwardAllocatesTheFullTableGrad) {
  auto run = testing::Simulate(EmbeddingBody(true));
  ASSERT_TRUE(run.ok) << run.error;
  auto g = testing::Buffer(run.r.events, "emb.grad");
  ASSERT_TRUE(g);
  EXPECT_EQ(run.r.events.buffers[*g].bytes, 100 * 16 * 4);
  EXPECT_EQ(run.r.events.events[testing::AllocIndex(run.r.events, *g)].phase, Phase::kBackward);
}

// Note [CUDA embedding backward]: over 3072 ids the CUDA kernel sorts them and sums fp32 partials
// per segment; at most 3072, and on the CPU, the zeros grad alone.
std::string LargeEmbeddingBody(int64_t ids) {
  return R"("inputs": [{"name": "ids", "shape": [1, )" + std::to_string(ids) + R"(], "dtype": "int64"}],
      "parameters": [{"name": "emb", "shape": [5000, 16], "dtype": "bfloat16"}],
      "ops": [{"op": "embedding", "inputs": ["ids", "emb"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(EmbeddingRuleTest, CudaBackwardOfManyIdsSortsThemAndSumsFp32Partials) {
  auto run = testing::Simulate(LargeEmbeddingBody(4000), testing::Opts("cuda"));
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t n = 4000, segments = 4000, partials = n / 10 + segments;
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "grad_weight_per_segment"), partials * 16 * 4);
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "sorted_indices"), n * 8);
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "partial_segment_offset"), partials * 8);
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "partials_per_segment"), 2 * segments * 8);
  auto g = testing::Buffer(run.r.events, "emb.grad");
  ASSERT_TRUE(g);
  EXPECT_EQ(run.r.events.buffers[*g].bytes, 5000 * 16 * 2);
}

TEST(EmbeddingRuleTest, FewIdsOrTheCpuWriteTheZerosGradAlone) {
  for (const auto& [ids, profile] : std::vector<std::pair<int64_t, std::string>>{{3072, "cuda"}, {4000, "cpu"}}) {
    auto run = testing::Simulate(LargeEmbeddingBody(ids), testing::Opts(profile));
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(testing::AllocatedContaining(run.r.events, "sorted_indices"), 0) << profile << " " << ids;
    EXPECT_EQ(testing::AllocatedContaining(run.r.events, "grad_weight_per_segment"), 0) << profile << " " << ids;
  }
}

TEST(EmbeddingRuleTest, FrozenTableHasNoNode) {
  auto run = testing::Simulate(EmbeddingBody(false));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedBy(run, "y"), IsEmpty());
  EXPECT_TRUE(testing::BuffersNamed(run.r.events, "emb.grad").empty());
}

TEST(EmbeddingRuleTest, FloatIndicesAreRejected) {
  auto run = testing::Simulate(EmbeddingBody(true, "float32"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: embedding"));
}

// ---------------------------------------------------------------- norms
std::string BatchNormBody(bool training, bool xrg = false) {
  return R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 4, 5, 5], "requires_grad": )" + Rg(xrg) +
         R"(}, {"name": "g", "shape": [4]}, {"name": "b", "shape": [4]}],
      "buffers": [{"name": "rm", "shape": [4]}, {"name": "rv", "shape": [4]}],
      "ops": [{"op": "batch_norm", "inputs": ["x", "g", "b", "rm", "rv"], "outputs": ["y"], "attrs": {"training": )" +
         Rg(training) + R"(}}, {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(BatchNormRuleTest, TrainingSavesInputWeightRunningStatsAndPerChannelStatsButNotTheBias) {
  auto run = testing::Simulate(BatchNormBody(true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 5, 5));
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "g", "rm", "rv", "extra:mean", "extra:rstd"));
  for (const auto& it : SavedBy(run, "y"))
    if (it.name.starts_with("extra:")) {
      EXPECT_EQ(it.bytes, 4 * 4) << it.name;
    }
}

TEST(BatchNormRuleTest, EvalModeSavesNoStatistics) {
  auto run = testing::Simulate(BatchNormBody(false));
  ASSERT_TRUE(run.ok) << run.error;
  for (const auto& n : SavedNames(run, "y")) EXPECT_FALSE(n.starts_with("extra:")) << n;
  EXPECT_THAT(SavedNames(run, "y"), ::testing::Contains("x"));
}

TEST(BatchNormRuleTest, CpuBackwardAllocatesGradInputTwice) {
  auto run = testing::Simulate(BatchNormBody(true, true), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  auto d = testing::BuffersContaining(run.r.events, "discarded grad_input");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(run.r.events.buffers[d[0]].bytes, 2 * 4 * 5 * 5 * 4);
  auto cuda = testing::Simulate(BatchNormBody(true, true));
  ASSERT_TRUE(cuda.ok);
  EXPECT_TRUE(testing::BuffersContaining(cuda.r.events, "discarded grad_input").empty());
}

TEST(LayerNormRuleTest, SavesInputAffineAndRowStats) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "x", "shape": [2, 3, 8]}, {"name": "g", "shape": [8]}, {"name": "b", "shape": [8]})",
      R"({"op": "layer_norm", "inputs": ["x", "g", "b"], "outputs": ["y"], "attrs": {"normalized_shape": [8]}})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "g", "b", "extra:mean", "extra:rstd"));
  for (const auto& it : SavedBy(run, "y"))
    if (it.name.starts_with("extra:")) {
      EXPECT_EQ(it.bytes, 2 * 3 * 4) << it.name;
    }
}

TEST(LayerNormRuleTest, FrozenAffineStillSavesEverything) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "x", "shape": [2, 3, 8]}, {"name": "g", "shape": [8], "requires_grad": false}, {"name": "b", "shape": [8], "requires_grad": false})",
      R"({"op": "layer_norm", "inputs": ["x", "g", "b"], "outputs": ["y"], "attrs": {"normalized_shape": [8]}})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "g", "b", "extra:mean", "extra:rstd"));
}

TEST(LayerNormRuleTest, NormalizedShapeMismatchIsAnError) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 3, 8]})",
      R"({"op": "layer_norm", "inputs": ["x"], "outputs": ["y"], "attrs": {"normalized_shape": [7]}})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: layer_norm"));
}

TEST(LayerNormRuleTest, CpuBackwardHasScratch) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "x", "shape": [2, 3, 8]}, {"name": "g", "shape": [8]}, {"name": "b", "shape": [8]})",
      R"({"op": "layer_norm", "inputs": ["x", "g", "b"], "outputs": ["y"], "attrs": {"normalized_shape": [8]}})"),
      Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  auto s = testing::BuffersContaining(run.r.events, "layer_norm backward scratch");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(run.r.events.buffers[s[0]].bytes, 2 * 8 * 4);
}

// layer_norm_kernel.cpp: the dgamma/dbeta buffer exists only when one of them is wanted (a frozen
// nn.LayerNorm, as under LoRA, has none: 1.13 and 2.13 traces).
TEST(LayerNormRuleTest, CpuBackwardHasNoScratchWhenWeightAndBiasAreFrozen) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "x", "shape": [2, 3, 8]}, {"name": "g", "shape": [8], "requires_grad": false},
         {"name": "b", "shape": [8], "requires_grad": false})",
      R"({"op": "layer_norm", "inputs": ["x", "g", "b"], "outputs": ["y"], "attrs": {"normalized_shape": [8]}})"),
      Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "layer_norm backward scratch").empty());
}

TEST(GroupNormRuleTest, SavesStatsPerSampleAndGroupButNotBias) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "x", "shape": [2, 8, 4, 4]}, {"name": "g", "shape": [8]}, {"name": "b", "shape": [8]})",
      R"({"op": "group_norm", "inputs": ["x", "g", "b"], "outputs": ["y"], "attrs": {"num_groups": 4}})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "g", "extra:mean", "extra:rstd"));
  for (const auto& it : SavedBy(run, "y"))
    if (it.name.starts_with("extra:")) {
      EXPECT_EQ(it.bytes, 2 * 4 * 4) << it.name;
    }
}

TEST(GroupNormRuleTest, GroupsMustDivideChannels) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 8, 4, 4]})",
      R"({"op": "group_norm", "inputs": ["x"], "outputs": ["y"], "attrs": {"num_groups": 3}})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: group_norm"));
}

TEST(RmsNormRuleTest, SavesInputAndRstd) {
  auto run = testing::Simulate(ParamXBody(R"({"name": "x", "shape": [2, 3, 8]})",
      R"({"op": "rms_norm", "inputs": ["x"], "outputs": ["y"], "attrs": {"normalized_shape": [8]}})"));
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = SavedBy(run, "y");
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "extra:rstd"));
  for (const auto& it : saved)
    if (it.name == "extra:rstd") {
      EXPECT_EQ(it.bytes, 6 * 4);
    }
}

// Note [rms_norm]: the CPU runs F.rms_norm's composite; x² and the mean of squares die inside the
// forward, the normalized input is kept for the weight's grad.
TEST(RmsNormRuleTest, CpuCompositeKeepsTheNormalizedInputForTheWeight) {
  const std::string body = ParamXBody(
      R"({"name": "x", "shape": [2, 3, 8]}, {"name": "w", "shape": [8]})",
      R"({"op": "rms_norm", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"normalized_shape": [8]}})");
  auto run = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "w", "extra:rstd", "extra:normalized input"));
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "x squared").empty());
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "grad of x through x squared").empty());
  auto fused = testing::Simulate(body);  // cuda 2.13: _fused_rms_norm
  ASSERT_TRUE(fused.ok) << fused.error;
  EXPECT_THAT(SavedNames(fused, "y"), UnorderedElementsAre("x", "w", "extra:rstd"));
  EXPECT_TRUE(testing::BuffersContaining(fused.r.events, "x squared").empty());
}

// ---------------------------------------------------------------- pooling
std::string PoolBody(const std::string& op, const std::string& attrs, const std::string& shape = "[2, 4, 8, 8]") {
  return ParamXBody(R"({"name": "x", "shape": )" + shape + "}",
                    R"({"op": ")" + op + R"(", "inputs": ["x"], "outputs": ["y"], "attrs": )" + attrs + "}");
}

TEST(MaxPool2dRuleTest, KeepsInputAndInt64Indices) {
  auto run = testing::Simulate(PoolBody("max_pool2d", R"({"kernel_size": 2})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 4, 4));
  auto saved = SavedBy(run, "y");
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "extra:max_pool indices"));
  for (const auto& it : saved)
    if (it.name == "extra:max_pool indices") {
      EXPECT_EQ(it.bytes, 2 * 4 * 4 * 4 * 8);
    }
}

TEST(MaxPool2dRuleTest, CeilModeAndPadding) {
  auto run = testing::Simulate(PoolBody("max_pool2d", R"({"kernel_size": 3, "stride": 2, "padding": 1})", "[1, 2, 7, 7]"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(1, 2, 4, 4));
  run = testing::Simulate(PoolBody("max_pool2d", R"({"kernel_size": 2, "ceil_mode": true})", "[1, 2, 7, 7]"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(1, 2, 4, 4));
}

TEST(MaxPool2dRuleTest, MissingKernelSizeIsAnError) {
  auto run = testing::Simulate(PoolBody("max_pool2d", "{}"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: max_pool2d"));
}

TEST(AvgPool2dRuleTest, KeepsInput) {
  auto run = testing::Simulate(PoolBody("avg_pool2d", R"({"kernel_size": 2})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 4, 4));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("x"));
}

TEST(AdaptiveAvgPool2dRuleTest, GlobalPoolKeepsNothingOnCuda) {
  auto run = testing::Simulate(PoolBody("adaptive_avg_pool2d", R"({"output_size": [1, 1]})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 1, 1));
  EXPECT_THAT(SavedNames(run, "y"), IsEmpty());
}

TEST(AdaptiveAvgPool2dRuleTest, GlobalPoolKeepsInputOnCpu113) {
  auto run = testing::Simulate(PoolBody("adaptive_avg_pool2d", R"({"output_size": [1, 1]})"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("x"));
}

TEST(AdaptiveAvgPool2dRuleTest, NonGlobalPoolKeepsInputOnBothProfiles) {
  for (const char* p : {"cuda", "cpu"}) {
    auto run = testing::Simulate(PoolBody("adaptive_avg_pool2d", R"({"output_size": [2, 2]})"), Opts(p));
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 4, 2, 2));
    EXPECT_THAT(SavedNames(run, "y"), ElementsAre("x")) << p;
  }
}

// ---------------------------------------------------------------- sdpa
std::string SdpaBody(const std::string& dtype, const std::string& attrs, int s = 10) {
  std::string shape = "[2, 3, " + std::to_string(s) + ", 8]";
  return ParamXBody(R"({"name": "q", "shape": )" + shape + R"(, "dtype": ")" + dtype + R"("}, {"name": "k", "shape": )" +
                        shape + R"(, "dtype": ")" + dtype + R"("}, {"name": "v", "shape": )" + shape +
                        R"(, "dtype": ")" + dtype + R"("})",
                    R"({"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"], "outputs": ["y"], "attrs": )" +
                        attrs + "}");
}

int64_t ExtraBytes(const testing::Run& run, const std::string& op, const std::string& label) {
  for (const auto& it : SavedBy(run, op))
    if (it.name == "extra:" + label) return it.bytes;
  return -1;
}

TEST(SdpaRuleTest, EfficientBackendLogsumexpPaddedTo32) {
  auto run = testing::Simulate(SdpaBody("float32", "{}"));  // cuda fp32 -> efficient
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 3, 10, 8));
  EXPECT_EQ(ExtraBytes(run, "y", "logsumexp"), 2 * 3 * 32 * 4);
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("q", "k", "v", "y", "extra:logsumexp"));
}

TEST(SdpaRuleTest, FlashBackendLogsumexpUnpadded) {
  auto run = testing::Simulate(SdpaBody("float16", "{}"));  // cuda fp16, no mask -> flash
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(ExtraBytes(run, "y", "logsumexp"), 2 * 3 * 10 * 4);
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "flash softmax_d").empty());
}

TEST(SdpaRuleTest, MathBackendKeepsAttentionProbabilities) {
  auto run = testing::Simulate(SdpaBody("float32", "{}"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(ExtraBytes(run, "y", "attention probs"), 2 * 3 * 10 * 10 * 4);
  EXPECT_EQ(ExtraBytes(run, "y", "logsumexp"), -1);
}

TEST(SdpaRuleTest, CpuFlashKeepsLogsumexpAndAPerThreadBufferAroundTheKernel) {
  auto run = testing::Simulate(SdpaBody("float32", "{}"), Opts("cpu"));  // 2.13 CPU, no dropout -> flash
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(ExtraBytes(run, "y", "logsumexp"), 2 * 3 * 10 * 4);
  EXPECT_EQ(ExtraBytes(run, "y", "attention probs"), -1);
  // qSplit = min(32, S) = 10, kvSplit = min(512, S) = 10: 10 * (10 + 2 + 8) fp32, one thread
  auto buf = testing::BuffersContaining(run.r.events, "flash per-thread buffer");
  ASSERT_EQ(buf.size(), 1u);
  EXPECT_EQ(run.r.events.buffers[buf[0]].bytes, 10 * (10 + 2 + 8) * 4);
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "flash backward per-thread buffer").empty());
}

TEST(SdpaRuleTest, CpuMathWithDropoutKeepsTheCompositesSavedTensors) {
  auto run = testing::Simulate(SdpaBody("float32", R"({"dropout_p": 0.1})"), Opts("cpu"));  // dropout -> math
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t s2 = 2 * 3 * 10 * 10 * 4, qk = 2 * 3 * 10 * 8 * 4;
  EXPECT_EQ(ExtraBytes(run, "y", "q scaled"), qk);
  EXPECT_EQ(ExtraBytes(run, "y", "k transposed scaled"), qk);
  EXPECT_EQ(ExtraBytes(run, "y", "attention probs"), s2);
  EXPECT_EQ(ExtraBytes(run, "y", "dropout noise"), s2);
  EXPECT_EQ(ExtraBytes(run, "y", "dropped probs"), s2);
  EXPECT_EQ(ExtraBytes(run, "y", "logsumexp"), -1);
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("v", "extra:q scaled", "extra:k transposed scaled",
                                                         "extra:attention probs", "extra:dropout noise",
                                                         "extra:dropped probs"));
}

TEST(SdpaRuleTest, CpuMathCopiesTransposedHeadsForItsBmmsAndSavesTheCopies) {
  // q, k, v as `x.view(B, L, H, D).transpose(1, 2)`: at::matmul's reshape to [B·H, L, D] cannot
  // be a view of q·√s, kᵀ·√s or v, so each bmm saves a copy (Note [SDPA backends]).
  std::string p = R"({"name": "q", "shape": [2, 10, 3, 8]}, {"name": "k", "shape": [2, 10, 3, 8]}, )"
                  R"({"name": "v", "shape": [2, 10, 3, 8]})";
  std::string ops;
  for (const char* n : {"q", "k", "v"})
    ops += std::string(R"({"op": "transpose", "inputs": [")") + n + R"("], "outputs": [")" + n +
           R"(t"], "attrs": {"dim0": 1, "dim1": 2}}, )";
  ops += R"({"op": "scaled_dot_product_attention", "inputs": ["qt", "kt", "vt"], "outputs": ["y"], )"
         R"("attrs": {"dropout_p": 0.1, "is_causal": true}})";
  auto run = testing::Simulate(ParamXBody(p, ops), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t qk = 2 * 3 * 10 * 8 * 4;
  EXPECT_EQ(ExtraBytes(run, "y", "q scaled, bmm copy"), qk);
  EXPECT_EQ(ExtraBytes(run, "y", "k scaled, bmm copy"), qk);
  EXPECT_EQ(ExtraBytes(run, "y", "v, bmm copy"), qk);
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("extra:q scaled, bmm copy", "extra:k scaled, bmm copy",
                                                         "extra:attention probs", "extra:dropout noise",
                                                         "extra:v, bmm copy", "extra:dropped probs"));
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "causal additive mask").empty());
}

TEST(SdpaRuleTest, MathUpcastsBf16ToFp32) {
  auto run = testing::Simulate(SdpaBody("bfloat16", R"({"dropout_p": 0.1})"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(ExtraBytes(run, "y", "attention probs"), 2 * 3 * 10 * 10 * 4);  // fp32 scores
  EXPECT_EQ(ExtraBytes(run, "y", "v in fp32"), 2 * 3 * 10 * 8 * 4);
  EXPECT_FALSE(testing::BuffersContaining(run.r.events, "attention weights cast back").empty());
}

// nanoGPT's heads: q, k, v are [B, H, S, D] views of one [B, S, 3C] projection (non-dense, in
// [B, S, H, D] order); Note [SDPA backends], measured on an H100 with 2.11.
std::string SdpaHeadViewsBody(const std::string& dtype) {
  return R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 16, 24], "dtype": ")" + dtype + R"("}],
      "ops": [{"op": "split", "inputs": ["x"], "outputs": ["q0", "k0", "v0"], "attrs": {"split_size": 8, "dim": 2}},
              {"op": "view", "inputs": ["q0"], "outputs": ["q1"], "attrs": {"shape": [2, 16, 2, 4]}},
              {"op": "view", "inputs": ["k0"], "outputs": ["k1"], "attrs": {"shape": [2, 16, 2, 4]}},
              {"op": "view", "inputs": ["v0"], "outputs": ["v1"], "attrs": {"shape": [2, 16, 2, 4]}},
              {"op": "transpose", "inputs": ["q1"], "outputs": ["q"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "transpose", "inputs": ["k1"], "outputs": ["k"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "transpose", "inputs": ["v1"], "outputs": ["v"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"], "outputs": ["y"], "attrs": {"is_causal": true}},
              {"op": "transpose", "inputs": ["y"], "outputs": ["yt"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "contiguous", "inputs": ["yt"], "outputs": ["yc"]},
              {"op": "mean", "inputs": ["yc"], "outputs": ["loss"]}],
      "loss": "loss")";
}

SimOptions CudaBackend(const std::string& backend) {
  SimOptions o = Opts("cuda");
  o.sdpa_backend = backend;
  return o;
}

TEST(SdpaRuleTest, CudaFusedOutputsInHeadsInnerOrderMakeTheContiguousAfterThemFree) {
  for (const char* b : {"flash", "efficient", "cudnn"}) {
    auto run = testing::Simulate(SdpaHeadViewsBody("bfloat16"), CudaBackend(b));
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(testing::BuffersNamed(run.r.events, "yc").empty()) << b << ": yc is a view of y, no copy";
    // the grads of q, k, v come [B, S, H, D] too: the view backward copies nothing
    EXPECT_TRUE(testing::BuffersContaining(run.r.events, "q1.grad").empty()) << b;
  }
  auto math = testing::Simulate(SdpaHeadViewsBody("bfloat16"), CudaBackend("math"));
  ASSERT_TRUE(math.ok) << math.error;
  EXPECT_FALSE(testing::BuffersNamed(math.r.events, "yc").empty()) << "the math output is contiguous [B, H, S, D]";
}

TEST(SdpaRuleTest, CpuFlashOutputTakesTheQuerysLayout) {
  // nn.MultiheadAttention's heads: q viewed [L, N·H, D], transposed, viewed [N, H, L, D] (strides
  // H·D, D, N·H·D, 1); the CPU flash output has those strides, so permute(2, 0, 1, 3) is contiguous
  // (checked with torch 2.13: the MHA's .contiguous() copies nothing).
  const char* body = R"("inputs": [], "parameters": [{"name": "q0", "shape": [16, 2, 8]}, {"name": "k0", "shape": [16, 2, 8]},
                                      {"name": "v0", "shape": [16, 2, 8]}],
      "ops": [{"op": "view", "inputs": ["q0"], "outputs": ["q1"], "attrs": {"shape": [16, 4, 4]}},
              {"op": "view", "inputs": ["k0"], "outputs": ["k1"], "attrs": {"shape": [16, 4, 4]}},
              {"op": "view", "inputs": ["v0"], "outputs": ["v1"], "attrs": {"shape": [16, 4, 4]}},
              {"op": "transpose", "inputs": ["q1"], "outputs": ["q2"], "attrs": {"dim0": 0, "dim1": 1}},
              {"op": "transpose", "inputs": ["k1"], "outputs": ["k2"], "attrs": {"dim0": 0, "dim1": 1}},
              {"op": "transpose", "inputs": ["v1"], "outputs": ["v2"], "attrs": {"dim0": 0, "dim1": 1}},
              {"op": "view", "inputs": ["q2"], "outputs": ["q"], "attrs": {"shape": [2, 2, 16, 4]}},
              {"op": "view", "inputs": ["k2"], "outputs": ["k"], "attrs": {"shape": [2, 2, 16, 4]}},
              {"op": "view", "inputs": ["v2"], "outputs": ["v"], "attrs": {"shape": [2, 2, 16, 4]}},
              {"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"], "outputs": ["y"]},
              {"op": "permute", "inputs": ["y"], "outputs": ["yp"], "attrs": {"dims": [2, 0, 1, 3]}},
              {"op": "contiguous", "inputs": ["yp"], "outputs": ["yc"]},
              {"op": "mean", "inputs": ["yc"], "outputs": ["loss"]}],
      "loss": "loss")";
  auto run = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(testing::BuffersNamed(run.r.events, "yc").empty()) << "yc is a view of y, no copy";
  // Backward: the incoming grad is the permute's, in [L, N, H, D] order; the kernel reads it as
  // grad_out.transpose(1, 2).contiguous(), a copy of its size freed when the op returns.
  auto copy = testing::BuffersContaining(run.r.events, "flash backward grad_out copy");
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(run.r.events.buffers[copy[0]].bytes, 2 * 2 * 16 * 4 * 4);
}

TEST(SdpaRuleTest, CpuFlashBackwardCopiesNoGradAlreadyInHeadsInnerOrder) {
  // SdpaBody's y feeds a sum: its grad is contiguous [B, H, L, D], not [B, L, H, D]: copied; a
  // grad coming back through transpose(1, 2) of a contiguous [B, L, H, D] (nanoGPT's and HF's
  // output path) is in that order already: no copy.
  auto plain = testing::Simulate(SdpaBody("float32", "{}"), Opts("cpu"));
  ASSERT_TRUE(plain.ok) << plain.error;
  EXPECT_EQ(testing::BuffersContaining(plain.r.events, "flash backward grad_out copy").size(), 1u);
  const char* body = R"("inputs": [], "parameters": [{"name": "q", "shape": [2, 3, 10, 8]}, {"name": "k", "shape": [2, 3, 10, 8]},
                                      {"name": "v", "shape": [2, 3, 10, 8]}],
      "ops": [{"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"], "outputs": ["y"]},
              {"op": "transpose", "inputs": ["y"], "outputs": ["yt"], "attrs": {"dim0": 1, "dim1": 2}},
              {"op": "contiguous", "inputs": ["yt"], "outputs": ["yc"]},
              {"op": "mean", "inputs": ["yc"], "outputs": ["loss"]}],
      "loss": "loss")";
  auto blhd = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(blhd.ok) << blhd.error;
  EXPECT_TRUE(testing::BuffersContaining(blhd.r.events, "flash backward grad_out copy").empty());
}

TEST(SdpaRuleTest, CudaBackendsAllocateWhatTheH100SnapshotsShow) {
  // B·H = 4, S = 16, D = 4 (bf16)
  auto flash = testing::Simulate(SdpaHeadViewsBody("bfloat16"), CudaBackend("flash"));
  ASSERT_TRUE(flash.ok) << flash.error;
  EXPECT_EQ(ExtraBytes(flash, "y", "flash rng_state"), 16);
  EXPECT_EQ(ExtraBytes(flash, "y", "flash philox offset"), 8);
  auto sd = testing::BuffersContaining(flash.r.events, "flash softmax_d");
  auto dq = testing::BuffersContaining(flash.r.events, "flash dq_accum");
  ASSERT_EQ(sd.size(), 1u);
  ASSERT_EQ(dq.size(), 1u);
  EXPECT_EQ(flash.r.events.buffers[sd[0]].bytes, 4 * 128 * 4);       // S rounded to 128
  EXPECT_EQ(flash.r.events.buffers[dq[0]].bytes, 4 * 128 * 32 * 4);  // D rounded to 32
  EXPECT_LT(testing::FreeIndex(flash.r.events, dq[0]), testing::FreeIndex(flash.r.events, sd[0]));

  auto cudnn = testing::Simulate(SdpaHeadViewsBody("bfloat16"), CudaBackend("cudnn"));
  ASSERT_TRUE(cudnn.ok) << cudnn.error;
  EXPECT_EQ(ExtraBytes(cudnn, "y", "philox seed"), 8);
  EXPECT_EQ(ExtraBytes(cudnn, "y", "philox offset"), 8);
  auto ws = testing::BuffersContaining(cudnn.r.events, "cuDNN backward workspace");
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_EQ(cudnn.r.events.buffers[ws[0]].bytes, 4 * 16 * 4 * 4 + 4 * 16 * 4 + 256);

  // efficient, fp32: delta computed outside the kernel (product and sum first); bf16: in it
  auto eff32 = testing::Simulate(SdpaHeadViewsBody("float32"), CudaBackend("efficient"));
  ASSERT_TRUE(eff32.ok) << eff32.error;
  EXPECT_EQ(testing::BuffersContaining(eff32.r.events, "efficient grad_out * out").size(), 1u);
  auto w = testing::BuffersContaining(eff32.r.events, "efficient workspace");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(eff32.r.events.buffers[w[0]].bytes, 4 * (64 * 64 + 4) * 4);  // one 64-row gQ tile per (b, h)
  auto eff16 = testing::Simulate(SdpaHeadViewsBody("bfloat16"), CudaBackend("efficient"));
  ASSERT_TRUE(eff16.ok) << eff16.error;
  EXPECT_TRUE(testing::BuffersContaining(eff16.r.events, "efficient grad_out * out").empty());
  EXPECT_EQ(testing::BuffersContaining(eff16.r.events, "efficient delta").size(), 1u);
}

TEST(SdpaRuleTest, ForcedBackendOutsideTheProfileIsAnError) {
  SimOptions o = Opts("cpu");
  o.sdpa_backend = "cudnn";
  auto run = testing::Simulate(SdpaBody("float32", "{}"), o);
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.error.find("--sdpa-backend cudnn"), std::string::npos) << run.error;
}

TEST(SdpaRuleTest, MismatchedHeadDimIsAnError) {
  auto run = testing::Simulate(ParamXBody(
      R"({"name": "q", "shape": [2, 3, 10, 8]}, {"name": "k", "shape": [2, 3, 10, 4]}, {"name": "v", "shape": [2, 3, 10, 8]})",
      R"({"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"], "outputs": ["y"]})"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: scaled_dot_product_attention"));
}

}  // namespace
}  // namespace memsim
