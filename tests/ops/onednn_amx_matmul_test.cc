// oneDNN 3.12 AMX brgemm matmul scratchpads (lib/ops/onednn_amx_matmul.h) against the sizes
// measured with PyTorch 2.13 on an AMX-BF16 host (tests/data/onednn/amx_bf16_matmul_scratchpads.tsv:
// linear, mm and bmm GEMMs with plain and transposed operands, one-row and one-column results,
// small-K / small-N / small-M shapes, the MLP's and the transformers' GEMMs).
#include "lib/ops/onednn_amx_matmul.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/testing/test_data.h"

namespace memsim {
namespace {

TEST(OneDnnAmxMatmulTest, EveryMeasuredSizeIsPredicted) {
  std::ifstream f(test_data::TestDataPath("onednn/amx_bf16_matmul_scratchpads.tsv"));
  ASSERT_TRUE(f) << "missing tests/data/onednn/amx_bf16_matmul_scratchpads.tsv";
  std::string line;
  int rows = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    OneDnnGemmShape g;
    int ta = 0, tb = 0;
    std::string bytes;
    in >> g.m >> g.k >> g.n >> g.batch >> ta >> tb >> bytes;
    g.transposed_a = ta != 0;
    g.transposed_b = tb != 0;
    const std::optional<int64_t> predicted = OneDnnAmxBf16MatmulScratchpad(g, OneDnnCaches{});
    if (bytes == "avx512")
      EXPECT_FALSE(predicted.has_value()) << line;
    else
      EXPECT_EQ(predicted.value_or(-1), std::stoll(bytes)) << line;
    ++rows;
  }
  EXPECT_GT(rows, 250);
}

// The MLP of the 2.13 dev set (mlp_b256_adam_amp): 256×1000 → 100 → 100 → 100 → 10.
TEST(OneDnnAmxMatmulTest, MlpGemms) {
  const OneDnnCaches host;
  EXPECT_EQ(OneDnnAmxBf16MatmulScratchpad({256, 1000, 100, 1, false, true}, host), 332800);  // forward
  EXPECT_EQ(OneDnnAmxBf16MatmulScratchpad({256, 10, 100, 1, false, false}, host), 13312);    // grad_input
  EXPECT_EQ(OneDnnAmxBf16MatmulScratchpad({10, 256, 100, 1, true, false}, host), 43136);     // grad_weight
}

TEST(OneDnnAmxMatmulTest, DeclinedShapesFallBack) {
  EXPECT_FALSE(OneDnnAmxBf16MatmulScratchpad({512, 1, 512, 3, false, false}, OneDnnCaches{}).has_value());
}

}  // namespace
}  // namespace memsim
