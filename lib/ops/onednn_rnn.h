// The buffers of oneDNN 3.x's LSTM primitive as PyTorch 2.x's `mkldnn_rnn_layer` (CPU) runs it
// for one layer and direction in training: the workspace the node keeps, the user-managed
// scratchpad, and the weight tensors ideep reorders to and from the primitive's layouts. Only the
// f32 training primitive is sized: on every x64 ISA with AVX2 oneDNN runs it with ref_rnn's gemm
// path (its brgemm path refuses f32 forward_training and backward). Derived from the oneDNN v3.12
// source (src/cpu/rnn/rnn_utils.{hpp,cpp}, ref_rnn.cpp, src/common/memory_tracking.hpp) and
// ideep's lstm.hpp; Note [oneDNN LSTM] in docs/op-rules.md gives each term.
#ifndef MEMSIM_LIB_OPS_ONEDNN_RNN_H_
#define MEMSIM_LIB_OPS_ONEDNN_RNN_H_

#include <cstdint>

namespace memsim {

/// One layer and direction of an LSTM as RNN.cpp describes it to oneDNN: a [seq, batch, input]
/// source, hidden size |hidden|, f32.
struct OneDnnLstm {
  int64_t seq = 1, batch = 1, input = 1, hidden = 1;
};

/// Bytes of each buffer; 0: no allocation (ideep's reorder_if_differ_in finds the user's weights
/// already in the primitive's layout).
struct OneDnnLstmBuffers {
  int64_t workspace = 0;             ///< pd.workspace_desc(): the uint8 tensor the node saves
  int64_t fwd_scratchpad = 0;        ///< forward_training's scratchpad
  int64_t bwd_scratchpad = 0;        ///< backward's scratchpad
  int64_t fwd_weights_layer = 0;     ///< weights_ih reordered to the forward's ldigo
  int64_t fwd_weights_iter = 0;      ///< weights_hh reordered to the forward's ldigo
  int64_t bwd_weights_layer = 0;     ///< weights_ih reordered to the backward's ldgoi
  int64_t bwd_weights_iter = 0;      ///< weights_hh reordered to the backward's ldgoi
  int64_t diff_weights_layer = 0;    ///< the backward's zeroed ldigo diff_weights_layer
  int64_t diff_weights_iter = 0;     ///< the backward's zeroed ldigo diff_weights_iter
  int64_t diff_bias = 0;             ///< the backward's zeroed diff_bias (ldgo)
};

/// The buffers of one f32 LSTM layer-direction in training.
OneDnnLstmBuffers OneDnnLstmTraining(const OneDnnLstm& l);

/// rnn_utils::get_good_ld: |dim| rounded up to 64 bytes of |elem|-byte elements, plus 64 bytes
/// more when that is a multiple of 256 elements (4K aliasing).
int64_t OneDnnGoodLd(int64_t dim, int64_t elem);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_ONEDNN_RNN_H_
