// Scratchpad bytes of oneDNN 3.12's AMX brgemm matmul (brg_matmul:avx10_1_512_amx) for a bf16
// GEMM as PyTorch 2.13 runs it on a CPU with AMX-BF16 (ideep's user-managed scratchpad, one c10
// allocation per call, one thread). Derived from oneDNN v3.12's
// src/cpu/x64/matmul/brgemm_matmul_utils.cpp, amx_blocking_heuristics.cpp, brgemm_matmul.cpp and
// src/cpu/x64/brgemm/brgemm_utils.cpp; Note [oneDNN AMX matmul scratchpads] in docs/op-rules.md.
#ifndef MEMSIM_LIB_OPS_ONEDNN_AMX_MATMUL_H_
#define MEMSIM_LIB_OPS_ONEDNN_AMX_MATMUL_H_

#include <cstdint>
#include <optional>

namespace memsim {

/// The host's caches as oneDNN reads them (cpuid leaf 4 through xbyak; platform.cpp): per-core
/// L1d and L2 bytes, the L2's ways and sets. The blocking heuristics depend on them.
struct OneDnnCaches {
  int64_t l1_bytes = 48 << 10;
  int64_t l2_bytes = int64_t{2} << 20;
  int64_t l2_ways = 16;
  int64_t l2_sets = 2048;
};

/// A bf16 [batch ×] [m, k] x [k, n] GEMM with a bf16 result as oneDNN's matmul sees it:
/// |transposed_a|: A is a transposed view ("ba"; linear's grad_weight = gradᵀ·x); |transposed_b|:
/// B is ("ba"; linear's forward x·Wᵀ).
struct OneDnnGemmShape {
  int64_t m = 1, k = 1, n = 1, batch = 1;
  bool transposed_a = false, transposed_b = false;
};

/// Scratchpad bytes of one call (the sum of the booked pieces, each plus 128), or nullopt where
/// the AMX matmul declines the problem and oneDNN runs its avx512_core_bf16 one: the small shapes
/// it sends to VNNI (the A block of one brgemm at most 126 bytes) and K = 1.
std::optional<int64_t> OneDnnAmxBf16MatmulScratchpad(const OneDnnGemmShape& g, const OneDnnCaches& caches);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_ONEDNN_AMX_MATMUL_H_
