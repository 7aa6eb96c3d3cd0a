#include "lib/ops/onednn_rnn.h"

#include <algorithm>
#include <array>

namespace memsim {
namespace {

constexpr int64_t kF32 = 4;          // bytes: every buffer of the f32 primitive
constexpr int64_t kGates = 4;        // an LSTM cell's gates (i, f, g, o)
constexpr int64_t kPage = 4096;      // rnn_utils::set_offsets' page_size, bytes
constexpr int64_t kPointer = 8;      // bytes of a float* / void* the scratchpad books

int64_t RndUp(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/// A 5-D weights descriptor (l, d, i, g, o) with its strides in elements.
struct WeightsDesc {
  std::array<int64_t, 5> dims, strides;
};

/// memory_desc_wrapper::size(): the largest dim·stride, a dim of 1 counting 1 whatever its stride.
int64_t DescBytes(const WeightsDesc& w) {
  int64_t elems = 1;
  for (size_t d = 0; d < 5; ++d) elems = std::max(elems, w.dims[d] == 1 ? 1 : w.dims[d] * w.strides[d]);
  return elems * kF32;
}

/// Whether two descriptors of the same dims are equal as oneDNN compares them (blocking_desc_is_equal:
/// the stride of a dim of 1 does not matter). ideep's reorder_if_differ_in reorders only when not.
bool SameLayout(const WeightsDesc& a, const WeightsDesc& b) {
  for (size_t d = 0; d < 5; ++d)
    if (a.dims[d] != 1 && a.strides[d] != b.strides[d]) return false;
  return true;
}

/// PyTorch's weight [4·hidden, in] as RNN.cpp describes it: {1, 1, in, 4, hidden}, format ldgoi.
WeightsDesc UserLdgoi(int64_t in, int64_t hidden) {
  return {{1, 1, in, kGates, hidden}, {kGates * hidden * in, kGates * hidden * in, 1, hidden * in, in}};
}

/// set_expected_desc (gemm path, forward) and the backward's diff weights: ldigo with
/// set_good_strides' leading dimension on i.
WeightsDesc GoodLdigo(int64_t in, int64_t hidden) {
  const int64_t ld = OneDnnGoodLd(kGates * hidden, kF32);
  return {{1, 1, in, kGates, hidden}, {in * ld, in * ld, ld, hidden, 1}};
}

/// set_expected_desc (gemm path, backward): ldgoi with set_good_strides' leading dimension on o.
WeightsDesc GoodLdgoi(int64_t in, int64_t hidden) {
  const int64_t ld = OneDnnGoodLd(in, kF32);
  return {{1, 1, in, kGates, hidden}, {kGates * hidden * ld, kGates * hidden * ld, 1, hidden * ld, ld}};
}

/// The reorder ideep makes of a user weight into |expected|: its bytes, or 0 when none.
int64_t Reorder(const WeightsDesc& user, const WeightsDesc& expected) {
  return SameLayout(user, expected) ? 0 : DescBytes(expected);
}

/// set_offsets' register_space: each region starts on a page; the size after the last region
/// (a zero-sized one closes the list, so the total is page-rounded too).
int64_t PagedRegions(std::initializer_list<int64_t> sizes) {
  int64_t offset = 0;
  for (int64_t s : sizes) offset = RndUp(offset, kPage) + s;
  return offset;
}

/// set_workspace_sizes (training, one layer and direction, no LBR): gates, ht, states layer (the
/// states iter share it), states iter c, the three diff states, grid comp (0).
int64_t Workspace(const OneDnnLstm& l) {
  const int64_t steps = l.seq, states = 2 * (l.seq + 1) * l.batch;  // (n_layer + 1)·(n_iter + 1)·mb
  const int64_t gates_ld = OneDnnGoodLd(kGates * l.hidden, kF32);
  const int64_t ht_ld = OneDnnGoodLd(l.hidden, kF32);
  const int64_t states_ld = OneDnnGoodLd(std::max(l.hidden, l.input), kF32);
  const int64_t diff_ld = OneDnnGoodLd(std::max(l.input, l.hidden), kF32);
  return PagedRegions({steps * l.batch * gates_ld * kF32, steps * l.batch * ht_ld * kF32,
                       states * states_ld * kF32, states * l.hidden * kF32, states * diff_ld * kF32,
                       states * diff_ld * kF32, states * l.hidden * kF32, 0});
}

/// ref_rnn pd_t::init_scratchpad: the rnn space (scratch gates, ht, diff ht, cell: page regions)
/// booked with 4096 alignment, the three weight-pointer arrays and the bias pointers (n_layer·
/// n_dir·bias_dt_size void*), each booked piece costing its alignment (at least 128) more
/// (memory_tracking.hpp registry_t::book); no nested matmul (LSTM). |merged_steps|: the gates of
/// every step at once (merge_gemm_layer or merge_gemm_iter).
int64_t Scratchpad(const OneDnnLstm& l, bool merged_steps) {
  const int64_t gates = (merged_steps ? l.seq : 1) * l.batch * OneDnnGoodLd(kGates * l.hidden, kF32) * kF32;
  const int64_t ht = l.batch * OneDnnGoodLd(l.hidden, kF32) * kF32;
  const int64_t space = PagedRegions({gates, ht, ht, 0});  // scratch_diff_ht: the same ld, training
  return (space + kPage) + 3 * (kPointer + 128) + (kF32 * kPointer + 128);
}

}  // namespace

int64_t OneDnnGoodLd(int64_t dim, int64_t elem) {
  const int64_t line = 64 / elem;
  const int64_t ld = RndUp(dim, line);
  return ld % 256 == 0 ? ld + line : ld;
}

OneDnnLstmBuffers OneDnnLstmTraining(const OneDnnLstm& l) {
  OneDnnLstmBuffers b;
  b.workspace = Workspace(l);
  // init_conf: merge_gemm_layer in forward when mb < 128; backward always merges (trivial strides).
  b.fwd_scratchpad = Scratchpad(l, l.batch < 128);
  b.bwd_scratchpad = Scratchpad(l, true);
  b.fwd_weights_layer = Reorder(UserLdgoi(l.input, l.hidden), GoodLdigo(l.input, l.hidden));
  b.fwd_weights_iter = Reorder(UserLdgoi(l.hidden, l.hidden), GoodLdigo(l.hidden, l.hidden));
  b.bwd_weights_layer = Reorder(UserLdgoi(l.input, l.hidden), GoodLdgoi(l.input, l.hidden));
  b.bwd_weights_iter = Reorder(UserLdgoi(l.hidden, l.hidden), GoodLdgoi(l.hidden, l.hidden));
  b.diff_weights_layer = DescBytes(GoodLdigo(l.input, l.hidden));
  b.diff_weights_iter = DescBytes(GoodLdigo(l.hidden, l.hidden));
  b.diff_bias = kGates * l.hidden * kF32;
  return b;
}

}  // namespace memsim
