#include "lib/ops/cuda_reduce.h"

#include <algorithm>
#include <cstdint>

namespace memsim {
namespace {

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t LastPow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/// The reduced dims of |in| for |out_sizes| (right-aligned, as sum_to_size): a dim is reduced
/// when the output lacks it or has 1 where the input has more.
std::vector<bool> ReducedDims(const TensorMeta& in, const std::vector<int64_t>& out) {
  const size_t n = in.sizes.size(), lead = n - std::min(n, out.size());
  std::vector<bool> r(n, false);
  for (size_t i = 0; i < n; ++i) r[i] = i < lead || (out[i - lead] == 1 && in.sizes[i] != 1);
  return r;
}

}  // namespace

// setReduceConfig, for a TensorIterator whose input is dense: the reduction runs along the
// fastest-moving dim when that dim is reduced (block.x over the inputs, vectorised by 4 when
// more than 128 of them and one reduced dim), else block.x spans the outputs (vectorised by
// get_output_vec_size: 4 when the output's fastest extent allows). Blocks: MAX_NUM_THREADS 512
// (divided by the output vector), width ≤ 32, height filling the rest. The input is split
// across warps when each thread keeps ≥ 16 values, and across blocks (global reduce) when it
// then keeps ≥ 256 and the grid is no larger than SMs × (threads per SM / block threads):
// ctas_per_output = max(min(⌈target / grid⌉, ⌈values / 16⌉), ⌈values / 256⌉). Staging:
// acc_bytes · outputs · ctas_per_output (· block.x · output_vec without block-x reduction) and
// 4 · grid.x semaphore bytes.
ReduceStaging CudaReduceStaging(const Profile& profile, const TensorMeta& in, const std::vector<int64_t>& out_sizes,
                                int64_t acc_bytes) {
  ReduceStaging st;
  if (!profile.cuda || in.sizes.empty()) return st;
  const std::vector<bool> reduced = ReducedDims(in, out_sizes);
  // reduce_dims: TensorIterator coalesces adjacent reduced dims of a dense input into one
  int64_t outputs = 1, inputs = 1, reduce_dims = 0, fastest = 0;
  bool prev_reduced = false;
  for (size_t i = 0; i < in.sizes.size(); ++i) {
    if (in.sizes[i] == 1) continue;
    if (reduced[i]) inputs *= in.sizes[i], reduce_dims += !prev_reduced;
    else outputs *= in.sizes[i];
    prev_reduced = reduced[i];
  }
  for (size_t i = 0; i < in.sizes.size(); ++i) {
    if (in.sizes[i] > 1 && (in.sizes[fastest] <= 1 || in.strides[i] < in.strides[fastest])) fastest = static_cast<int64_t>(i);
  }
  if (outputs <= 0 || inputs <= 1) return st;
  // A reduction over more than 2^31 - 1 elements runs as sub-iterators of 32-bit indexing
  // (TensorIterator::with_32bit_indexing halves the largest dimension until each fits), one
  // after the other, each with its own staging: the reduced extent of the largest one.
  while (outputs * inputs > INT32_MAX && inputs > 1) inputs = (inputs + 1) / 2;
  const bool on_fastest = reduced[fastest];
  int64_t dim0 = on_fastest ? inputs : outputs, dim1 = on_fastest ? outputs : inputs, out_vec = 1;
  if (on_fastest && dim0 > 128 && reduce_dims == 1) {
    dim0 /= 4;  // vectorize along input
  } else if (!on_fastest) {
    out_vec = 4;  // vectorize along output: the output's fastest extent must divide by it
    while (out_vec > 1 && in.sizes[fastest] % out_vec != 0) out_vec /= 2;
    dim0 /= out_vec;
  }
  const int64_t max_threads = 512 / out_vec;
  const int64_t dim0_pow2 = dim0 < max_threads ? LastPow2(dim0) : max_threads;
  const int64_t dim1_pow2 = dim1 < max_threads ? LastPow2(dim1) : max_threads;
  int64_t width = std::min<int64_t>(dim0_pow2, 32);
  const int64_t height = std::min(dim1_pow2, max_threads / width);
  width = std::min(dim0_pow2, max_threads / height);
  const int64_t threads = width * height;
  int64_t step_input = 1, step_output = 1;
  (on_fastest ? step_input : step_output) *= width;
  bool split_warps = false;
  if (DivUp(inputs, step_input) >= height * 16 || DivUp(inputs, step_input) >= 256) {
    step_input *= height;
    split_warps = true;
  } else {
    step_output *= height;
  }
  const int64_t target = profile.gpu_sm_count * (profile.gpu_max_threads_per_sm / threads);
  const int64_t grid = DivUp(outputs / out_vec, step_output);
  const int64_t values = DivUp(inputs, step_input);
  if (!split_warps || values < 256 || grid > target) return st;
  const int64_t ctas = std::max(std::min(DivUp(target, grid), DivUp(values, 16)), DivUp(values, 256));
  if (ctas <= 1) return st;
  st.buffer_bytes = acc_bytes * outputs * ctas * (on_fastest ? 1 : width * out_vec);
  st.semaphore_bytes = 4 * grid;
  return st;
}

}  // namespace memsim
