// Scratchpad bytes of oneDNN 2.6's avx512_core_bf16 kernels as PyTorch 1.13 runs them on a CPU
// with AVX512_BF16 (ideep's user-managed scratchpad: one c10 allocation per primitive call, one
// thread): bf16 convolutions (jit_bf16, jit_bf16_1x1, jit_dw, gemm) and bf16 GEMMs (brgemm
// matmul). Derived from the oneDNN v2.6.3 source; Note [oneDNN bf16 scratchpads] in
// docs/op-rules.md gives each term and where it comes from.
#ifndef MEMSIM_LIB_OPS_ONEDNN_SCRATCHPAD_H_
#define MEMSIM_LIB_OPS_ONEDNN_SCRATCHPAD_H_

#include <cstdint>

namespace memsim {

/// A 2-D convolution as oneDNN sees it (a 1-D one has ih = oh = kh = 1). Dilation as in
/// PyTorch (1 = none); pads are the top/left ones.
struct OneDnnConv {
  int64_t batch = 1, in_ch = 1, out_ch = 1, groups = 1;
  int64_t ih = 1, iw = 1, oh = 1, ow = 1, kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  bool bias = false;
};

enum class OneDnnPass { kForward, kBackwardData, kBackwardWeights };

/// Scratchpad bytes of one bf16 convolution call (0: none, and then no allocation at all).
/// |l2_bytes|: the per-core L2 size oneDNN believes (Profile::onednn_l2_bytes).
int64_t OneDnnBf16ConvScratchpad(const OneDnnConv& c, OneDnnPass pass, int64_t l2_bytes);

/// Whether PyTorch 1.13 sends a bf16 [batch ×] [m, k] x [k, n] GEMM to oneDNN (it declines
/// batch·m·k·n <= 16³ and the GEMM stays in ATen).
bool OneDnnBf16Gemm(int64_t m, int64_t k, int64_t n, int64_t batch = 1);

/// Scratchpad bytes of a bf16 [m, k] x [k, n] brgemm matmul, or of a bmm of such matrices (one
/// thread: the batch does not enter); |transposed_a|: A is a transposed view (linear's
/// grad_weight = grad_outᵀ · x, bmm's grad of mat2 = mat1ᵀ · grad). A GEMM with n = 1 is run with
/// its operands swapped (1 x k x m), as addmm does for a one-column result.
int64_t OneDnnBf16MatmulScratchpad(int64_t m, int64_t k, int64_t n, bool transposed_a);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_ONEDNN_SCRATCHPAD_H_
