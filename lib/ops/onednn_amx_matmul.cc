#include "lib/ops/onednn_amx_matmul.h"

#include <algorithm>

#include "lib/ops/onednn_amx_blocking.h"

namespace memsim {
namespace onednn_amx {

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RndUp(int64_t a, int64_t b) { return DivUp(a, b) * b; }
bool IsPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int64_t Conf::ActualLda(bool need_buf_a, int64_t k_blk) const {
  if (!need_buf_a) return K;  // a plain A's row stride (a transposed A always takes the buffer)
  int64_t lda = RndUp(k_blk, 32);  // 64-byte cache lines of bf16
  if (lda >= 512 && IsPow2(lda)) lda += 32;
  return lda;
}

namespace {

/// brgemm_matmul_utils.cpp init_brgemm_matmul_conf up to the blocking heuristic: tags, the
/// copies A and B need, the N block of B's copy (32 where the macro heuristic applies, else 64).
Conf InitConf(const OneDnnGemmShape& g, const OneDnnCaches& caches) {
  Conf c;
  c.caches = caches;
  c.M = g.m, c.N = g.n, c.K = g.k, c.batch = g.batch;
  c.treat_a_plain = g.m == 1;
  c.transposed_a = g.transposed_a && !c.treat_a_plain;
  // A layout that fits both tags takes the first, plain one; for A, set_or_check_tags then asks
  // matmul_helper_t::transA(), which calls a one-row A transposed.
  c.transposed_b = g.transposed_b && g.k != 1 && g.n != 1;
  c.use_buffer_a = c.transposed_a;             // is_copy_a_required
  c.use_buffer_b = true;                       // AMX with a plain or transposed (not blocked) B
  c.macro = !g.transposed_a && g.m != 1;       // macro_t::is_supported: A's tag plain
  c.wei_n_blk = c.macro ? 32 : 64;  // get_default_n_block
  return c;
}

/// compute_blocking_heuristic's AMX branch when the macro heuristic gives no blocking: M_blk
/// from tile-row multiples, K_blk and the batch, then the micro heuristic.
void MicroPath(Conf& c) {
  c.N_blk = std::min(c.wei_n_blk, c.N);
  const bool lda_big_pow2 = !c.transposed_a && IsPow2(c.K) && c.K >= 4096;
  c.use_buffer_a = c.use_buffer_a || (lda_big_pow2 && c.M >= 1024);  // prefer_copy_a
  c.M_blk = std::min<int64_t>(c.M, 64);
  for (int64_t r = 16, done = 0; r >= 13 && !done; --r)
    for (int64_t s = 4; s >= 2; --s)
      if (c.M % (s * r) == 0) {
        c.M_blk = s * r;
        done = 1;
        break;
      }
  const bool fixed_k_tail = c.K % kWeiKBlk > 0 && c.K > kWeiKBlk;
  c.K_blk = c.K < kWeiKBlk ? RndUp(c.K, kKGran) : fixed_k_tail ? kWeiKBlk : c.K;
  c.bs = std::max<int64_t>(c.K / c.K_blk, 1);
  MicroBlocking(c, lda_big_pow2);
}

/// The largest AMX tile workspace of the brgemm kernels the primitive creates
/// (brgemm_matmul.cpp pd_t::init: every M_blk / M_tail, N_blk / N_tail, K_blk / K_tail kernel;
/// brgemm_types.hpp get_wsp_buffer_size: a 1 KiB tile per C tile, one more for a wary K tail).
int64_t TileWorkspace(const Conf& c) {
  const int64_t m_tail = c.M % c.M_blk, n_tail = c.N % c.N_blk;
  const int64_t k_tail = c.K > c.K_blk ? (c.extendable_k || c.use_fused_copy_a ? c.K % c.K_blk
                                                                                : RndUp(c.K % c.K_blk, kKGran))
                                       : 0;
  int64_t best = 0;
  for (int64_t vm : {c.M_blk, m_tail})
    for (int64_t vn : {c.N_blk, n_tail})
      for (int64_t vk : {c.K_blk, k_tail}) {
        if (vm == 0 || vn == 0 || vk == 0 || c.LDA < vk) continue;
        const Tiles t = KernelTiles(vm, vn, vk, c.caches.l1_bytes);
        const bool may_extend_k = c.extendable_k && (vk % kKGran || (vk > 32 && vk % 32));
        const int64_t fused = c.use_fused_copy_a ? vm * RndUp(vk, 32) * 2 : 0;  // max_bs = 1
        best = std::max(best, t.bd_block2 * t.ld_block2 * 1024 + (may_extend_k ? 1024 : 0) + fused);
      }
  return best;
}

/// memory_tracking.hpp registry_t::book: a piece costs its bytes plus its alignment (≥ 128).
int64_t Entry(int64_t bytes) { return bytes == 0 ? 0 : bytes + 128; }

}  // namespace
}  // namespace onednn_amx

std::optional<int64_t> OneDnnAmxBf16MatmulScratchpad(const OneDnnGemmShape& g, const OneDnnCaches& caches) {
  using namespace onednn_amx;
  if (g.k < kKGran) return std::nullopt;  // no AMX kernel reads a K of one
  Conf c = InitConf(g, caches);
  if (!(c.macro && MacroBlocking(c))) MicroPath(c);
  if (2 * c.M_blk * c.LDA <= 126) return std::nullopt;  // is_small_shapes: buffer_a_gb_stride ≤ 126
  // init_brgemm_matmul_conf after the heuristic: B's copy aligned to 16 columns, LDB, LDC.
  if (c.wei_n_blk > c.N_blk && c.N != c.N_blk) c.wei_n_blk = RndUp(c.N_blk, 16);
  const int64_t ldb = c.wei_n_blk;
  const int64_t ldc = c.use_buffer_c ? std::min<int64_t>(32, c.N_blk) : c.N;
  // init_aux_values and init_scratchpad (one thread).
  const int64_t k_chunk_elems = c.K_blk * c.K_chunk * c.bs;
  const int64_t buf_a = 2 * c.M_blk * c.LDA * c.bs * c.K_chunk * c.M_chunk;
  const int64_t buf_b = 2 * RndUp(c.N_blk, ldb) * RndUp(c.K_blk, kWeiKBlk) * c.bs * c.K_chunk;
  const int64_t c_chunk = RndUp(c.N_blk, ldc) * c.M_blk * 4;
  const int64_t buf_c = k_chunk_elems >= c.K ? c_chunk : c_chunk * c.M_chunk * c.N_chunk;
  return Entry(16 * c.bs * 40) + (c.use_buffer_a ? Entry(buf_a) : 0) + Entry(buf_b) +
         (c.use_buffer_c ? Entry(buf_c) : 0) + Entry(TileWorkspace(c));
}

}  // namespace memsim
