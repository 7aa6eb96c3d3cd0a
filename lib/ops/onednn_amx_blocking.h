// oneDNN 3.12's blocking heuristics for an AMX bf16 brgemm matmul with one thread: the macro
// heuristic (amx_blocking_heuristics.cpp matmul_amx_blocking_params_macro_t), the micro one
// (matmul_amx_blocking_params_micro_t) and the brgemm kernel's tile decomposition
// (brgemm_utils.cpp brgemm_blocking_tmm). Internal to lib/ops/onednn_amx_matmul.cc; Note [oneDNN
// AMX matmul scratchpads] in docs/op-rules.md.
#ifndef MEMSIM_LIB_OPS_ONEDNN_AMX_BLOCKING_H_
#define MEMSIM_LIB_OPS_ONEDNN_AMX_BLOCKING_H_

#include <cstdint>

#include "lib/ops/onednn_amx_matmul.h"

namespace memsim::onednn_amx {

/// bf16 B is copied in 16·2-row K blocks (get_wei_k_blk); K is taken in VNNI pairs.
constexpr int64_t kWeiKBlk = 32;
constexpr int64_t kKGran = 2;

int64_t DivUp(int64_t a, int64_t b);
int64_t RndUp(int64_t a, int64_t b);
bool IsPow2(int64_t v);

/// The fields of brgemm_matmul_conf_t the scratchpad depends on (bf16 in, bf16 out, f32
/// accumulation, one thread).
struct Conf {
  OneDnnCaches caches;
  int64_t M = 1, N = 1, K = 1, batch = 1;
  bool transposed_a = false, transposed_b = false, treat_a_plain = false, macro = false;
  bool use_buffer_a = false, use_buffer_b = true, use_buffer_c = false;
  bool extendable_k = false, use_fused_copy_a = false;
  int64_t wei_n_blk = 64, LDA = 0;
  int64_t M_blk = 0, N_blk = 0, K_blk = 0, M_chunk = 1, N_chunk = 1, K_chunk = 1, bs = 0;
  /// get_actual_lda: K for a plain A read in place, else the copy's row (K_blk in cache lines).
  int64_t ActualLda(bool need_buf_a, int64_t k_blk) const;
  int64_t L2Threshold() const { return 3 * caches.l2_bytes / 4; }
  int64_t L1Threshold() const { return 5 * caches.l1_bytes / 6; }
  int64_t L2WaysThreshold() const { return 3 * caches.l2_ways / 4; }
};

/// The macro heuristic (find_best_blocking with nthr = 1): false when it finds no blocking.
bool MacroBlocking(Conf& c);
/// The micro heuristic (find_best_blocking with nthr = 1).
void MicroBlocking(Conf& c, bool lda_big_pow2);

/// A brgemm kernel's tile decomposition: C tiles = bd_block2 × ld_block2.
struct Tiles {
  int64_t bd_block2 = 1, ld_block2 = 1;
};
/// brgemm_blocking_tmm for an M × N × K kernel (|l1_bytes|: the per-core L1d).
Tiles KernelTiles(int64_t m, int64_t n, int64_t k, int64_t l1_bytes);

}  // namespace memsim::onednn_amx

#endif  // MEMSIM_LIB_OPS_ONEDNN_AMX_BLOCKING_H_
