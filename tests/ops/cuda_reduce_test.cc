// CUDA reductions' global-memory staging (lib/ops/cuda_reduce.h, Note [CUDA reduction staging]).
#include "lib/ops/cuda_reduce.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

Profile Gpu(int64_t sms) {
  Profile p = *FindProfile("cuda", "2.13");
  p.gpu_sm_count = sms;
  p.gpu_max_threads_per_sm = 2048;
  return p;
}

// HF LlamaRMSNorm's weight grad at batch 4, seq 1024, hidden 1024 (fp32 under autocast): the
// sum of a [4, 1024, 1024] product over the rows, as the H100 snapshot recorded it
// (tests/data/gpu/h100_2_11/fresh/llama_bf16): a 33,554,432-byte buffer and 32 semaphore bytes.
TEST(CudaReduceStagingTest, RowSumOfAWideGradStagesThroughGlobalMemory) {
  const TensorMeta g = *TensorMeta::Contiguous(Dtype::kFloat32, {4, 1024, 1024});
  ReduceStaging st = CudaReduceStaging(Gpu(132), g, {1024});
  EXPECT_EQ(st.buffer_bytes, 33554432);
  EXPECT_EQ(st.semaphore_bytes, 32);
  EXPECT_EQ(CudaReduceStaging(Gpu(108), g, {1024}).buffer_bytes, 33554432);  // ctas capped by values / 16
}

TEST(CudaReduceStagingTest, SmallReductionsAndTheCpuTakeNone) {
  EXPECT_EQ(CudaReduceStaging(Gpu(132), *TensorMeta::Contiguous(Dtype::kFloat32, {256, 100}), {100}).buffer_bytes, 0);
  // a reduction along the fastest dim with many outputs (a per-row mean)
  EXPECT_EQ(CudaReduceStaging(Gpu(132), *TensorMeta::Contiguous(Dtype::kFloat32, {4096, 1024}), {4096, 1}).buffer_bytes, 0);
  Profile cpu = *FindProfile("cpu", "2.13");
  EXPECT_EQ(CudaReduceStaging(cpu, *TensorMeta::Contiguous(Dtype::kFloat32, {4, 1024, 1024}), {1024}).buffer_bytes, 0);
}

TEST(CudaReduceStagingTest, AFullReductionSplitsAcrossBlocks) {
  // 2^20 values to one: 512 threads of 4-wide loads, 2,048 values a thread, 128 blocks
  ReduceStaging st = CudaReduceStaging(Gpu(132), *TensorMeta::Contiguous(Dtype::kFloat32, {1024, 1024}), {});
  EXPECT_EQ(st.buffer_bytes, 4 * 128);
  EXPECT_EQ(st.semaphore_bytes, 4);
}

}  // namespace
}  // namespace memsim
