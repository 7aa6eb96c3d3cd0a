// CUDA reductions' global-memory staging: ATen's reduce kernel (aten/src/ATen/native/cuda/
// Reduce.cuh, setReduceConfig) splits a reduction across thread blocks when each output has
// many inputs and there are few outputs; the blocks then combine partial results through a
// staging buffer and a semaphore array, allocated through the caching allocator after the
// output and freed right after the kernel (Note [CUDA reduction staging] in docs/op-rules.md).
// Example: the weight grad of an RMSNorm over [B·S, C] (a sum over B·S rows) on an H100.
#ifndef MEMSIM_LIB_OPS_CUDA_REDUCE_H_
#define MEMSIM_LIB_OPS_CUDA_REDUCE_H_

#include <cstdint>
#include <vector>

#include "lib/ops/profile.h"
#include "lib/ops/tensor_meta.h"

namespace memsim {

/// What the staging of one reduction takes: the buffer, then the semaphores (0, 0: none).
struct ReduceStaging {
  int64_t buffer_bytes = 0;
  int64_t semaphore_bytes = 0;
};

/// The staging of summing |in| (contiguous or any dense layout) down to |out_sizes| (its sizes
/// with the reduced dims dropped or kept as 1, sum_to_size style) with a |acc_bytes| accumulator
/// (4 for fp32, bf16 and fp16 inputs), on the profile's device; none on the CPU. Above 2^31
/// elements, the staging of the largest 32-bit sub-iteration.
ReduceStaging CudaReduceStaging(const Profile& profile, const TensorMeta& in, const std::vector<int64_t>& out_sizes,
                                int64_t acc_bytes = 4);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_CUDA_REDUCE_H_
