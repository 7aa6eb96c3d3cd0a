// conv_transpose1d/2d/3d (lib/ops/rules_conv_transpose.cc, Note [Transposed convolution]): shapes,
// errors, what the node saves, and the CPU kernels of 1.13 (slow_conv_transpose) and 2.13 (oneDNN).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SizesOf;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using testing::Opts;
using testing::SavedNames;


// An input x (grad as |x_rg|), weight w and optional bias b feeding one conv_transpose, then mean.
std::string Body(const std::string& op, const std::string& x, const std::string& w, const std::string& attrs,
                 bool bias = true, bool x_rg = true) {
  const std::string b = bias ? R"(, {"name": "b", "shape": [)" + std::string("BIAS") + "]}" : "";
  std::string body = R"("inputs": [], "parameters": [{"name": "x", "shape": )" + x + R"(, "requires_grad": )" +
                     (x_rg ? "true" : "false") + R"(}, {"name": "w", "shape": )" + w + "}" + b + R"(], "ops": [
      {"op": ")" + op + R"(", "inputs": ["x", "w")" + (bias ? R"(, "b")" : "") + R"(], "outputs": ["y"], "attrs": )" +
                     attrs + R"(}, {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  return body;
}

std::string WithBias(std::string body, int64_t channels) {
  return body.replace(body.find("BIAS"), 4, std::to_string(channels));
}

const std::string kX2d = "[2, 16, 8, 8]", kW2d = "[16, 16, 4, 4]", kStrided = R"({"stride": 2, "padding": 1})";
const std::string kX3d = "[2, 16, 1, 2, 256]", kW3d = "[16, 8, 2, 2, 2]";

int64_t Allocated(const testing::Run& run, const std::string& part, size_t* count = nullptr) {
  return testing::AllocatedContaining(run.r.events, part, count);
}

TEST(ConvTransposeRuleTest, OutputSizeFollowsStridePaddingOutputPaddingDilationGroups) {
  auto run = testing::Simulate(WithBias(Body("conv_transpose2d", kX2d, "[16, 8, 4, 4]", kStrided), 8));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 8, 16, 16));
  // (in - 1)·s − 2p + d(k − 1) + output_padding + 1, C_out = weight[1]·groups.
  auto g = testing::Simulate(
      Body("conv_transpose1d", "[2, 32, 5]", "[32, 16, 5]",
           R"({"stride": 3, "padding": 2, "output_padding": 1, "dilation": 2, "groups": 2})", false));
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_THAT(SizesOf(g, "y"), ElementsAre(2, 32, (5 - 1) * 3 - 4 + 2 * 4 + 1 + 1));
  auto v = testing::Simulate(Body("conv_transpose3d", "[16, 2, 3, 4]", "[16, 4, 2, 2, 2]", R"({"stride": 2})", false));
  ASSERT_TRUE(v.ok) << v.error;
  EXPECT_THAT(SizesOf(v, "y"), ElementsAre(4, 4, 6, 8));  // unbatched [C, D, H, W]
}

TEST(ConvTransposeRuleTest, SavesInputAndWeightWhateverRequiresGrad) {
  auto run = testing::Simulate(WithBias(Body("conv_transpose2d", kX2d, kW2d, kStrided, true, false), 16));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "w"));
}

TEST(ConvTransposeRuleTest, BadChannelsAndOutputPaddingAreErrorsNamingTheOp) {
  auto ch = testing::Simulate(Body("conv_transpose2d", kX2d, "[8, 16, 4, 4]", kStrided, false));
  ASSERT_FALSE(ch.ok);
  EXPECT_THAT(ch.error, HasSubstr("/ops/0: conv_transpose2d"));
  EXPECT_THAT(ch.error, HasSubstr("input channels 16"));
  auto op = testing::Simulate(Body("conv_transpose2d", kX2d, kW2d, R"({"stride": 2, "output_padding": 2})", false));
  ASSERT_FALSE(op.ok);
  EXPECT_THAT(op.error, HasSubstr("output_padding must be smaller than stride or dilation"));
}

TEST(ConvTransposeRuleTest, Cpu213StridedHasTheBrgemmScratchpadAndAChannelsLastCopy) {
  auto run =
      testing::Simulate(WithBias(Body("conv_transpose2d", kX2d, kW2d, kStrided), 16), Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(run.ok) << run.error;
  // Batch (4,120 + 4,096) + padded source 10·10·16 → 4,096 floats (16,384 + 4,096) + mask
  // (4,096 + 4,096) + the nested entry's 128: the 2.13 trace of deconv_net's 4×4 stride-2 layer.
  EXPECT_EQ(Allocated(run, "onednn scratchpad"), 37016);
  EXPECT_EQ(Allocated(run, "mkldnn_to_dense channels-last result"), 2 * 16 * 16 * 16 * 4);
  EXPECT_EQ(Allocated(run, "onednn src reorder (channels last)"), 2 * 16 * 8 * 8 * 4);
  // A 3-channel result: its weight reorder pads the output channels to 16; backward reads the
  // 3-channel grad_output plain.
  auto three = testing::Simulate(WithBias(Body("conv_transpose2d", kX2d, "[16, 3, 4, 4]", kStrided), 3),
                                 Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(three.ok) << three.error;
  EXPECT_EQ(Allocated(three, "onednn weight reorder"), 16 * 16 * 16 * 4 + 16 * 3 * 16 * 4);  // fwd, bwd data
  EXPECT_EQ(Allocated(three, "onednn grad_out reorder"), 0);
}

TEST(ConvTransposeRuleTest, Cpu213ThreeDPlainGradOutputTakesTheAvx2WeightKernel) {
  // 8 output channels: backward data reads the grad_output plain; backward weights runs on
  // 8-channel blocks, reordering it (unpadded) and the source (the kit's deconv_net trace).
  auto run = testing::Simulate(Body("conv_transpose3d", kX3d, kW3d, R"({"stride": 2})", false),
                               Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(run.ok) << run.error;
  size_t n = 0;
  EXPECT_EQ(Allocated(run, "onednn grad_out reorder", &n), 2 * 8 * 2 * 4 * 512 * 4);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(Allocated(run, "onednn blocked grad_weight"), 16 * 8 * 8 * 4);
}

TEST(ConvTransposeRuleTest, Cpu213StrideOneRunsBlockedWithoutScratchpadOrCopy) {
  auto run = testing::Simulate(Body("conv_transpose2d", "[4, 32, 1, 1]", "[32, 32, 4, 4]", "{}", false),
                               Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Allocated(run, "onednn scratchpad"), 0);
  EXPECT_EQ(Allocated(run, "mkldnn_to_dense"), 0);
  EXPECT_EQ(Allocated(run, "onednn blocked dst"), 4 * 32 * 4 * 4 * 4);
}

TEST(ConvTransposeRuleTest, Cpu113RunsSlowConvTransposeWithColumnsAndBiasOnes) {
  auto run =
      testing::Simulate(WithBias(Body("conv_transpose2d", kX2d, kW2d, kStrided), 16), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  size_t n = 0;
  // [C_out·k·k, H_in·W_in] per sample: forward, backward grad_input, backward weight.
  EXPECT_EQ(Allocated(run, "slow_conv_transpose columns", &n), 2 * 16 * 16 * 64 * 4);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(Allocated(run, "slow_conv_transpose grad columns"), 16 * 16 * 64 * 4);
  EXPECT_EQ(Allocated(run, "bias ones"), 16 * 16 * 4);
  EXPECT_EQ(Allocated(run, "onednn"), 0);
}

TEST(ConvTransposeRuleTest, Cpu113ThreeDStartsFromAnInputSizedEmptyLike) {
  auto run = testing::Simulate(Body("conv_transpose3d", kX3d, kW3d, R"({"stride": 2})", false),
                               Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Allocated(run, "empty_like(input)"), 2 * 16 * 2 * 256 * 4);
}

TEST(ConvTransposeRuleTest, Cpu113GroupsRunGroupByGroupOnInputCopies) {
  auto run = testing::Simulate(Body("conv_transpose1d", "[4, 32, 32]", "[32, 16, 5]",
                                    R"({"stride": 3, "padding": 2, "output_padding": 1, "groups": 2})", false),
                               Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  size_t n = 0;
  EXPECT_EQ(Allocated(run, "group input copy", &n), 2 * 2 * 4 * 16 * 32 * 4);  // forward and backward
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(Allocated(run, "group output", &n), 4 * 32 * 95 * 4);
  EXPECT_EQ(n, 2u);
}

TEST(ConvTransposeRuleTest, CudaHasTheAdjointConvolutionsWorkspacesOnly) {
  auto run = testing::Simulate(WithBias(Body("conv_transpose2d", kX2d, kW2d, kStrided), 16));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Allocated(run, "onednn"), 0);
  EXPECT_EQ(Allocated(run, "slow_conv_transpose"), 0);
  // The forward is the adjoint convolution's backward-data, and so on (cudnn/ConvShared.cpp).
  ConvCall k;
  k.batch = 2, k.in_channels = 16, k.out_channels = 16, k.kernel = {4, 4}, k.stride = {2, 2}, k.dilation = {1, 1};
  k.in_spatial = {16, 16}, k.out_spatial = {8, 8};
  const int64_t fwd = ConvWorkspaceBytes(ConvWorkspacePolicy::kTypical, 0, "", k, ConvPass::kBackwardData);
  EXPECT_EQ(Allocated(run, "cudnn workspace"), fwd);
  EXPECT_EQ(Allocated(run, "cudnn backward-data workspace"),
            ConvWorkspaceBytes(ConvWorkspacePolicy::kTypical, 0, "", k, ConvPass::kForward));
}

}  // namespace
}  // namespace memsim
