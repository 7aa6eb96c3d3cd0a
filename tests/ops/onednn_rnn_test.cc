// lib/ops/onednn_rnn.cc: oneDNN 3.12's f32 LSTM training buffers against the allocations measured
// under PyTorch 2.13 on the CPU (a dispatch mode and allocspy around mkldnn_rnn_layer and its
// backward; Note [oneDNN LSTM]).
#include "lib/ops/onednn_rnn.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

struct Measured {
  OneDnnLstm l;
  OneDnnLstmBuffers b;
};

// seq, batch, input, hidden → workspace, fwd / bwd scratchpad, fwd reorders (layer, iter), bwd
// reorders (layer, iter), diff weights (layer, iter), diff bias.
const Measured kMeasured[] = {
    {{16, 8, 32, 64}, {520192, 152120, 152120, 34816, 69632, 0, 0, 34816, 69632, 1024}},
    {{16, 8, 40, 64}, {520192, 152120, 152120, 43520, 69632, 49152, 0, 43520, 69632, 1024}},
    {{5, 3, 256, 256}, {278528, 78392, 78392, 1064960, 1064960, 1114112, 1114112, 1064960, 1064960, 4096}},
    {{4, 130, 16, 20}, {954368, 90680, 213560, 5120, 6400, 0, 10240, 5120, 6400, 320}},
    {{7, 5, 24, 48}, {118784, 41528, 41528, 18432, 36864, 24576, 0, 18432, 36864, 768}},
    {{7, 5, 96, 48}, {167936, 41528, 41528, 73728, 36864, 0, 0, 73728, 36864, 768}},
    {{3, 2, 4, 5}, {28672, 16952, 16952, 512, 640, 1280, 1280, 512, 640, 80}},
    {{3, 1, 1, 1}, {28672, 16952, 16952, 0, 0, 256, 256, 16, 16, 16}},
};

TEST(OneDnnLstmTest, BuffersMatchTheMeasuredAllocations) {
  for (const Measured& m : kMeasured) {
    const OneDnnLstmBuffers b = OneDnnLstmTraining(m.l);
    SCOPED_TRACE(::testing::Message() << "T " << m.l.seq << " B " << m.l.batch << " I " << m.l.input << " H "
                                      << m.l.hidden);
    EXPECT_EQ(b.workspace, m.b.workspace);
    EXPECT_EQ(b.fwd_scratchpad, m.b.fwd_scratchpad);
    EXPECT_EQ(b.bwd_scratchpad, m.b.bwd_scratchpad);
    EXPECT_EQ(b.fwd_weights_layer, m.b.fwd_weights_layer);
    EXPECT_EQ(b.fwd_weights_iter, m.b.fwd_weights_iter);
    EXPECT_EQ(b.bwd_weights_layer, m.b.bwd_weights_layer);
    EXPECT_EQ(b.bwd_weights_iter, m.b.bwd_weights_iter);
    EXPECT_EQ(b.diff_weights_layer, m.b.diff_weights_layer);
    EXPECT_EQ(b.diff_weights_iter, m.b.diff_weights_iter);
    EXPECT_EQ(b.diff_bias, m.b.diff_bias);
  }
}

TEST(OneDnnLstmTest, GoodLeadingDimensionAvoidsMultiplesOf256) {
  EXPECT_EQ(OneDnnGoodLd(1, 4), 16);
  EXPECT_EQ(OneDnnGoodLd(40, 4), 48);
  EXPECT_EQ(OneDnnGoodLd(256, 4), 272);
  EXPECT_EQ(OneDnnGoodLd(1024, 4), 1040);
  EXPECT_EQ(OneDnnGoodLd(250, 2), 288);  // 256 bf16 → + 32
}

TEST(OneDnnLstmTest, ForwardStopsMergingTheGatesAtBatch128) {
  // merge_gemm_layer needs mb < 128 in forward: the scratch gates shrink to one step
  const OneDnnLstmBuffers small = OneDnnLstmTraining({8, 127, 16, 16});
  const OneDnnLstmBuffers large = OneDnnLstmTraining({8, 128, 16, 16});
  EXPECT_EQ(small.fwd_scratchpad, small.bwd_scratchpad);
  EXPECT_LT(large.fwd_scratchpad, large.bwd_scratchpad);
}

}  // namespace
}  // namespace memsim
