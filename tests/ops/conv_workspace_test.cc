// lib/ops/conv_workspace: the cuDNN workspace policies, checked against the sizes the public
// resnet18 GPU recording shows (tests/data/gpu/, docs/device-memory.md).
#include "lib/ops/conv_workspace.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

/// A batched 2-D conv, stride 1, dilation 1, groups 1.
ConvCall Conv(int64_t n, int64_t cin, int64_t cout, int64_t k, int64_t hw, int64_t stride = 1) {
  ConvCall c;
  c.batch = n;
  c.in_channels = cin;
  c.out_channels = cout;
  c.kernel = {k, k};
  c.stride = {stride, stride};
  c.dilation = {1, 1};
  c.in_spatial = {hw, hw};
  int64_t o = (hw + 2 * (k / 2) - k) / stride + 1;
  c.out_spatial = {o, o};
  return c;
}

int64_t Typical(const ConvCall& c, ConvPass p) {
  return ConvWorkspaceBytes(ConvWorkspacePolicy::kTypical, 0, "ampere", c, p);
}

TEST(ConvWorkspaceTest, TypicalMatchesTheRecordedResnet18Workspaces) {
  // layer4 3×3 conv, 512→512 at 7×7, batch 8: the recording's 40.5 MiB backward-filter block
  // (non-fused Winograd F(4×4, 3×3)) and 25 MiB forward / backward-data blocks (5×5 tiles).
  ConvCall l4 = Conv(8, 512, 512, 3, 7);
  EXPECT_EQ(Typical(l4, ConvPass::kBackwardFilter), 42467328);
  EXPECT_EQ(Typical(l4, ConvPass::kForward), 26218496);
  EXPECT_EQ(Typical(l4, ConvPass::kBackwardData), 26216448);
  // layer1..3: 28.1, 16.0 and 18 MiB backward-filter blocks, exactly.
  EXPECT_EQ(Typical(Conv(8, 64, 64, 3, 56), ConvPass::kBackwardFilter), 29491200);
  EXPECT_EQ(Typical(Conv(8, 128, 128, 3, 28), ConvPass::kBackwardFilter), 16809984);
  EXPECT_EQ(Typical(Conv(8, 256, 256, 3, 14), ConvPass::kBackwardFilter), 18874368);
}

TEST(ConvWorkspaceTest, StridedConvolutionsTakeAboutTheirWeight) {
  ConvCall s2 = Conv(8, 256, 512, 3, 14, 2);
  EXPECT_EQ(Typical(s2, ConvPass::kForward), 512 * 256 * 9 * 4);  // recorded 4,721,024
  EXPECT_EQ(Typical(s2, ConvPass::kBackwardData), 0);
  EXPECT_EQ(Typical(s2, ConvPass::kBackwardFilter), 512 * 256 * 9 * 4);
}

TEST(ConvWorkspaceTest, NoneFixedAndMax) {
  ConvCall l4 = Conv(8, 512, 512, 3, 7);
  for (ConvPass p : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardFilter}) {
    EXPECT_EQ(ConvWorkspaceBytes(ConvWorkspacePolicy::kNone, 123, "ampere", l4, p), 0);
    EXPECT_EQ(ConvWorkspaceBytes(ConvWorkspacePolicy::kFixed, 123, "ampere", l4, p), 123);
    EXPECT_GE(ConvWorkspaceBytes(ConvWorkspacePolicy::kMax, 0, "ampere", l4, p), Typical(l4, p));
  }
  // The FFT bound dominates at large spatial sizes: (N·Cin + N·Cout + Cout·Cin)·58·30·8 B.
  ConvCall big = Conv(32, 64, 64, 3, 56);
  EXPECT_EQ(ConvWorkspaceBytes(ConvWorkspacePolicy::kMax, 0, "ampere", big, ConvPass::kForward),
            (32 * 64 + 32 * 64 + 64 * 64) * 58 * 30 * 8);
}

TEST(ConvWorkspaceTest, PolicyNamesAndGenerations) {
  EXPECT_EQ(ParseConvWorkspacePolicy("typical"), ConvWorkspacePolicy::kTypical);
  EXPECT_EQ(ParseConvWorkspacePolicy("none"), ConvWorkspacePolicy::kNone);
  EXPECT_EQ(ParseConvWorkspacePolicy("max"), ConvWorkspacePolicy::kMax);
  EXPECT_FALSE(ParseConvWorkspacePolicy("fixed").has_value());
  EXPECT_EQ(ConvWorkspacePolicyName(ConvWorkspacePolicy::kFixed), "fixed");
  EXPECT_EQ(ConvAlgoFor("volta").arch, "volta");
  EXPECT_EQ(ConvAlgoFor("").arch, "ampere") << "an unknown GPU takes the default row";
  EXPECT_EQ(ConvAlgoFor("hopper").winograd_bwd_filter_out_tile, 4);
}

}  // namespace
}  // namespace memsim
