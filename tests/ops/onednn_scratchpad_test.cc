// oneDNN avx512_core_bf16 scratchpads (lib/ops/onednn_scratchpad.h) against the sizes measured
// with PyTorch 1.13 on an AVX512_BF16 CPU (tests/data/onednn/avx512_bf16_scratchpads.tsv: every
// conv and linear of ResNet-18, the MNIST CNN and the MLP at several batches, grouped, depthwise,
// dilated, biased, 1×1 and first convolutions, odd GEMMs, the 16³ threshold).
#include "lib/ops/onednn_scratchpad.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/testing/test_data.h"

namespace memsim {
namespace {

constexpr int64_t kL2 = int64_t{512} << 10;  // the recording machine (Profile::onednn_l2_bytes)

int64_t Out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

TEST(OneDnnScratchpadTest, EveryMeasuredSizeIsPredicted) {
  std::ifstream f(test_data::TestDataPath("onednn/avx512_bf16_scratchpads.tsv"));
  ASSERT_TRUE(f) << "missing tests/data/onednn/avx512_bf16_scratchpads.tsv";
  std::string line;
  int rows = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind, problem, pass;
    int64_t bytes = 0;
    ASSERT_TRUE(std::getline(in, kind, '\t') && std::getline(in, problem, '\t') && std::getline(in, pass, '\t') &&
                (in >> bytes))
        << line;
    std::istringstream p(problem);
    int64_t predicted = -1;
    if (kind == "conv") {
      OneDnnConv c;
      int64_t s, pad, d, bias;
      p >> c.batch >> c.in_ch >> c.out_ch >> c.ih >> c.iw >> c.kh >> c.kw >> s >> pad >> d >> c.groups >> bias;
      c.stride_h = c.stride_w = s, c.pad_h = c.pad_w = pad, c.dil_h = c.dil_w = d, c.bias = bias != 0;
      c.oh = Out(c.ih, c.kh, s, pad, d);
      c.ow = Out(c.iw, c.kw, s, pad, d);
      const OneDnnPass ps = pass == "forward"         ? OneDnnPass::kForward
                            : pass == "backward_data" ? OneDnnPass::kBackwardData
                                                      : OneDnnPass::kBackwardWeights;
      predicted = OneDnnBf16ConvScratchpad(c, ps, kL2);
    } else {
      int64_t m, k, n;
      p >> m >> k >> n;
      if (!OneDnnBf16Gemm(m, k, n)) {
        predicted = 0;
      } else if (pass == "forward") {
        predicted = OneDnnBf16MatmulScratchpad(m, k, n, false);
      } else if (pass == "grad_input") {
        predicted = OneDnnBf16MatmulScratchpad(m, n, k, false);
      } else {
        predicted = OneDnnBf16MatmulScratchpad(n, m, k, true);
      }
    }
    EXPECT_EQ(predicted, bytes) << line;
    ++rows;
  }
  EXPECT_GE(rows, 280);
}

// The worked example of Note [oneDNN bf16 scratchpads]: ResNet's 512×512 3×3 at 7×7, backward
// weights = transposed src 71,812 + transposed diff_dst 57,472 + fp32 weight 9,437,312 + barrier
// 8,192; it does not depend on the batch.
TEST(OneDnnScratchpadTest, BackwardWeightsOfA3x3ConvIsItsFp32WeightPlusTransposes) {
  OneDnnConv c;
  c.in_ch = c.out_ch = 512, c.ih = c.iw = c.oh = c.ow = 7, c.kh = c.kw = 3, c.pad_h = c.pad_w = 1;
  for (int64_t batch : {1, 4, 64}) {
    c.batch = batch;
    EXPECT_EQ(OneDnnBf16ConvScratchpad(c, OneDnnPass::kBackwardWeights, kL2), 9574788);
    EXPECT_EQ(OneDnnBf16ConvScratchpad(c, OneDnnPass::kForward, kL2), 0);
    EXPECT_EQ(OneDnnBf16ConvScratchpad(c, OneDnnPass::kBackwardData, kL2), 0);
  }
}

// The L2 size oneDNN believes decides the first convolution's spatial blocking (no global
// transpose, so no barrier and one diff_dst tile): a named profile field, not a constant.
TEST(OneDnnScratchpadTest, FirstConvSpatialBlockingFollowsTheL2Size) {
  OneDnnConv c;
  c.batch = 2, c.in_ch = 3, c.out_ch = 64, c.ih = c.iw = 256, c.kh = c.kw = 7;
  c.stride_h = c.stride_w = 2, c.pad_h = c.pad_w = 3, c.oh = c.ow = 128;
  EXPECT_EQ(OneDnnBf16ConvScratchpad(c, OneDnnPass::kBackwardWeights, kL2), 562312);  // measured
  // With an 8 MiB L2, 64·128·128 < L2/4: no spatial blocking, a global transpose of all 4 blocks.
  EXPECT_GT(OneDnnBf16ConvScratchpad(c, OneDnnPass::kBackwardWeights, int64_t{8} << 20), 562312);
}

// bmm (one thread: the batch does not enter, only the 16³ threshold): the forward A·B, then, as
// BmmBackward computes them, Aᵀ·grad (a transposed A, copied by oneDNN) and grad·Bᵀ. Measured
// with PyTorch 1.13 on the AVX512_BF16 machine; 0 = ATen's own kernel, no oneDNN call.
TEST(OneDnnScratchpadTest, BmmScratchpadsAsMeasured) {
  struct Row {
    int64_t batch, m, k, n, forward, grad_mat2, grad_self;
  };
  const Row rows[] = {
      {1, 100, 1100, 70, 157568, 73600, 13056},  {3, 300, 70, 130, 13056, 86656, 21248},
      {256, 16, 16, 16, 4864, 6016, 4864},       {100, 7, 7, 7, 4864, 5440, 4864},
      {4, 8, 8, 17, 4864, 5504, 4864},           {4, 8, 8, 16, 0, 0, 0},
      {1, 1024, 4096, 64, 738304, 410624, 8960},  // K a power of 2 >= 4096, M >= 1024: A copied
  };
  auto scratch = [](int64_t batch, int64_t m, int64_t k, int64_t n, bool transposed) {
    return OneDnnBf16Gemm(m, k, n, batch) ? OneDnnBf16MatmulScratchpad(m, k, n, transposed) : 0;
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::to_string(r.batch) + "x" + std::to_string(r.m) + "x" + std::to_string(r.k) + "x" +
                 std::to_string(r.n));
    EXPECT_EQ(scratch(r.batch, r.m, r.k, r.n, false), r.forward);
    EXPECT_EQ(scratch(r.batch, r.k, r.m, r.n, true), r.grad_mat2);
    EXPECT_EQ(scratch(r.batch, r.m, r.n, r.k, false), r.grad_self);
  }
}

}  // namespace
}  // namespace memsim
