// The micro blocking heuristic and the brgemm kernel's tile decomposition (onednn_amx_blocking.h).
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "lib/ops/onednn_amx_blocking.h"

namespace memsim::onednn_amx {
namespace {

/// matmul_amx_blocking_params_micro_t with nthr = 1 (nthr_k = 1; bf16, so the A copy holds
/// bf16 and the C buffer f32). Its fields persist between candidates as oneDNN's do.
struct Micro {
  const Conf* c;
  bool lda_big_pow2;
  int64_t n_blk = 0, n_chunk = 0, m_blk = 0, m_chunk = 0, k_blk = 0, k_chunk = 1, bs = 0, lda = 0;
  int64_t k_chunk_elems = 0, n_chunk_elems = 0, m_chunk_elems = 0, chunk_mem = 0;
  bool need_buf_a, need_buf_c = false, extendable_k = false;
  float score = 0.0f;

  Micro(const Conf& conf, bool big_pow2)
      : c(&conf), lda_big_pow2(big_pow2), lda(conf.LDA), need_buf_a(conf.use_buffer_a) {}

  int64_t ChunkMemory() {  // calculate_chunk_memory_size (with update_k_blocking_dependent_params)
    k_chunk_elems = k_blk * k_chunk * bs;
    lda = c->ActualLda(need_buf_a, k_blk);
    need_buf_c = c->K > k_chunk_elems || c->K % k_blk > 0;  // is_buffer_c_required: f32 to bf16
    const int64_t a = 2 * k_chunk_elems * m_chunk_elems, a_buf = need_buf_a ? 2 * lda * bs * m_chunk_elems : 0;
    const int64_t b = 2 * k_chunk_elems * n_chunk_elems, b_buf = 2 * n_blk * k_chunk_elems;
    const int64_t cc = 2 * m_chunk_elems * n_chunk_elems, c_buf = need_buf_c ? 4 * m_chunk_elems * n_chunk_elems : 0;
    return a + a_buf + b + b_buf + cc + c_buf;
  }

  void KBlocking();
  void Set(int64_t nb, int64_t nc, int64_t mb, int64_t mc);
  float Scores() const;
};

void Micro::KBlocking() {
  const int64_t K = c->K, l2 = c->L2Threshold();
  if (K < kWeiKBlk) {
    k_blk = RndUp(K, kKGran);
    bs = 1;
    return;
  }
  k_blk = std::min(RndUp(K, kKGran), kWeiKBlk);
  const int64_t num_k_blk = DivUp(K, k_blk);
  bs = num_k_blk;
  const int64_t chunk = ChunkMemory(), div_min = chunk / l2, div_max = DivUp(chunk, l2);
  if (div_min > (lda_big_pow2 ? 2 : 0) && bs > 1) {  // fit the K chunk into the L2
    const int64_t kc1 = std::max<int64_t>(bs / div_min, 1), kc2 = DivUp(bs, div_max);
    const int64_t tail1 = num_k_blk % kc1, tail2 = num_k_blk % kc2;
    bs = (!(tail1 == 0 || tail2 < tail1) || tail2 == 0) ? kc2 : kc1;
  }
  k_chunk_elems = k_blk * bs * k_chunk;
  const int64_t brgemm_k = k_blk * bs, k_tail = K % k_blk;
  extendable_k = K % kWeiKBlk != 0 && brgemm_k > kWeiKBlk && !c->use_buffer_a && lda == K;
  if (extendable_k) {
    k_blk = std::min(brgemm_k, K);
    k_chunk = 1;
    bs = 1;
  } else if (k_tail == 0 && K % (k_blk * bs) == 0) {
    k_blk = brgemm_k;
    bs = 1;
  } else if (K == k_blk * bs + k_tail) {
    k_blk = brgemm_k;
    bs = 2;
  }
}

void Micro::Set(int64_t nb, int64_t nc, int64_t mb, int64_t mc) {
  n_blk = nb, n_chunk = nc, m_blk = mb, m_chunk = mc;
  if (nb == 0 || nc == 0 || mb == 0 || mc == 0) {
    k_blk = k_chunk = k_chunk_elems = bs = 0;
    score = 0.0f;
    return;
  }
  n_chunk_elems = nb * nc;
  m_chunk_elems = mb * mc;
  KBlocking();
  need_buf_a = c->use_buffer_a || (!extendable_k && c->K % kKGran);
  chunk_mem = ChunkMemory();
  score = Scores();
}

float Micro::Scores() const {  // one thread: L2 utilization and copied-data reuse, equally weighted
  if (n_blk == 0 || n_chunk == 0 || m_blk == 0 || m_chunk == 0 || k_blk == 0 || bs == 0) return 0.0f;
  const int64_t l2 = c->L2Threshold();
  const float l2_score = 1.0f - std::fabs(static_cast<float>(l2) - static_cast<float>(chunk_mem)) /
                                    static_cast<float>(std::max(l2, chunk_mem));
  const float coef_m = std::min(static_cast<float>(m_chunk_elems) / std::min<int64_t>(c->M, 256), 1.0f);
  const float coef_n =
      std::min(static_cast<float>(n_chunk_elems) / std::min<int64_t>(c->N, need_buf_a ? 256 : 64), 1.0f);
  const float scores = 1.0f * l2_score + 1.0f * (0.5f * (coef_m + coef_n));
  return scores / (1.0f + 0.0f + 1.0f);
}

}  // namespace

void MicroBlocking(Conf& c, bool lda_big_pow2) {
  Micro best(c, lda_big_pow2), cur(c, lda_big_pow2);
  const int64_t num_m = DivUp(c.M, c.M_blk), num_n = DivUp(c.N, c.N_blk);
  const int64_t work = c.batch * num_m * num_n;
  const bool low_parallelism = static_cast<float>(work) < 1.5f;
  const int64_t min_m = low_parallelism && c.M_blk > 32 ? DivUp(c.M_blk, 2) : c.M_blk;
  const int64_t want_m_chunk = std::min<int64_t>(4, num_m);
  const int64_t want_n_chunk = std::min<int64_t>(work > 16 ? 6 : 4, num_n);
  // std::unordered_set as oneDNN builds it: its iteration order decides among equal scores.
  std::unordered_set<int> m_cands;
  for (int64_t mb = c.M_blk; mb >= min_m; mb = mb > 1 ? DivUp(mb, 2) : mb - 1) m_cands.insert(static_cast<int>(mb));
  if (c.M > 16)
    for (int64_t mb = std::min<int64_t>(c.M / 16 * 16, 64); mb >= RndUp(min_m, 16); mb -= 16)
      m_cands.insert(static_cast<int>(mb));
  bool found = false;
  for (int mb : m_cands)  // N_blk is fixed by B's plain layout (n_blk_fixed)
    for (int64_t nc = want_n_chunk; nc >= 1; --nc)
      for (int64_t mc = want_m_chunk; mc >= 1; --mc) {
        cur.Set(c.N_blk, nc, mb, mc);
        if (cur.score > best.score) best = cur, found = true;
      }
  if (!found) {
    cur.Set(c.N_blk, 1, min_m, 1);
    if (cur.score > best.score) best = cur;
  }
  c.M_blk = best.m_blk, c.M_chunk = best.m_chunk, c.N_blk = best.n_blk, c.N_chunk = best.n_chunk;
  c.K_blk = best.k_blk, c.K_chunk = best.k_chunk, c.bs = best.bs;
  c.use_buffer_c = best.need_buf_c, c.use_buffer_a = best.need_buf_a, c.extendable_k = best.extendable_k;
  c.LDA = best.lda, c.use_fused_copy_a = false;
}

namespace {

/// brgemm_desc_t's blocking fields for brgemm_blocking_tmm (no bd mask, the unrolled kernel).
struct Kernel {
  int64_t BD, LD;
  int64_t bd_block = 0, bdb = 0, bdb_tail = 0, bd_block2 = 1, ld_block = 16, ldb = 0, ldb_tail = 0, ld_block2 = 1;
  bool is_m_tail = false;

  void ByLd() {  // set_decomposition_by_ld
    if (bd_block2 == 1 && ldb > 0 && ldb_tail == 0)
      ld_block2 = ldb % 3 == 0 ? 3 : ldb % 2 == 0 ? 2 : 1;
    else
      ld_block2 = ldb > 0 && ldb % 2 == 0 && ldb_tail == 0 && bd_block2 < 3 ? 2 : 1;
    if (ld_block2 == 1 && !is_m_tail && ldb_tail == 0) bd_block2 = bdb >= 3 ? 3 : bdb >= 2 ? 2 : 1;
  }
  bool Try3x1(int64_t w) {
    is_m_tail = false;
    if (!(BD > (w - 1) * 16 && BD < w * 16 && ldb_tail == 0)) return false;
    bd_block = 16;
    bdb = DivUp(BD, 16);
    bdb_tail = BD % 16;
    is_m_tail = true;
    bd_block2 = w;
    ByLd();
    return true;
  }
  bool Try2x2() {
    for (int64_t mb = 16; mb >= 1; --mb)
      if (BD % mb == 0) {
        bd_block = mb;
        break;
      }
    if (bd_block == 1) {
      bd_block = std::min<int64_t>(16, BD);
      bdb_tail = BD % 16;
      for (int64_t i = 16; i >= 1; --i) {
        const int64_t t = BD % i;
        if (t > bdb_tail || t == 0) {
          bd_block = i, bdb_tail = t;
          if (t == 0) break;
        }
      }
    }
    bdb = BD / bd_block;
    bdb_tail = BD % bd_block;
    bd_block2 = bdb >= 2 ? 2 : 1;
    is_m_tail = false;
    ByLd();
    return !(ld_block2 == 1 || bd_block2 == 1 || bd_block < 8);
  }
  void Recalc(int64_t nbd, int64_t nld, int64_t nbd2, int64_t nld2) {
    if (nbd) bd_block = nbd, bdb = DivUp(BD, nbd), bdb_tail = BD % nbd, is_m_tail = bdb_tail != 0;
    if (nld) ld_block = nld, ldb = DivUp(LD, nld), ldb_tail = LD % nld;
    if (nbd2) bd_block2 = nbd2;
    if (nld2) ld_block2 = nld2;
  }
  void Shapes(int64_t eff_k, int64_t l1);
};

void Kernel::Shapes(int64_t eff_k, int64_t l1) {  // the unrolled kernel's blockings for some shapes
  const int64_t low_k = (l1 - 4 * 1024) / (6 * 16);
  const bool bdb_block_tail = !(bd_block > 12 && BD % bd_block == 0);
  const bool ldb_tail_16 = LD % 16 != 0;
  if (!bdb_block_tail && !ldb_tail_16) {
    const int64_t upper_k5 = (l1 - 5 * 1024) / (5 * 16), upper_k4 = (l1 - 4 * 1024) / (4 * 16);
    const bool k5 = low_k <= eff_k && eff_k < upper_k5, k4 = low_k <= eff_k && eff_k < upper_k4;
    if (LD % 80 == 0 && k5 && BD > 32) Recalc(0, 16, 1, 5);
    else if (LD % 64 == 0 && k4 && BD > 32) Recalc(0, 16, 1, 4);
    else if (BD % 80 == 0 && k5 && LD > 32) Recalc(0, 16, 5, 1);
    else if (BD % 64 == 0 && k4 && LD > 32) Recalc(16, 16, 4, 1);
  }
  const bool weak_ldb = ld_block < 8 || ldb_tail > 0, weak_bdb = bd_block < 8 || bdb_tail > 0;
  const bool ldb_tail_only = ldb_tail_16 && !bdb_block_tail, bdb_tail_only = bdb_block_tail && !ldb_tail_16;
  const int64_t bd_r16 = RndUp(BD, 16), ld_r16 = RndUp(LD, 16);
  if (ldb_tail_only && LD > 64 && ld_block < 8) {
    Recalc(0, 16, 2, 1);
  } else if (ldb_tail_only && weak_ldb && ld_r16 == 64) {
    Recalc(0, 16, 1, 4);
  } else if (ldb_tail_only && weak_ldb && ld_r16 == 48) {
    Recalc(0, 16, 1, 3);
  } else if (ldb_tail_only && weak_ldb && ld_r16 == 32) {
    Recalc(0, 16, 2, 2);
  } else if (BD <= 16) {
    Recalc(BD, 16, 0, 0);
    Recalc(0, 0, 1, std::min<int64_t>(ldb_tail_16 ? (ldb > 4 ? 3 : 4) : 5, DivUp(LD, 16)));
  } else if (bdb_tail_only && weak_bdb && BD > 64) {
    Recalc(16, 16, 1, 2);
  } else if (bdb_tail_only && weak_bdb && bd_r16 == 64) {
    Recalc(16, 16, 4, 1);
  } else if (bdb_tail_only && weak_bdb && bd_r16 == 48) {
    Recalc(16, 16, 3, 1);
  } else if (bdb_tail_only && weak_bdb && bd_r16 == 32 && LD % 32 == 0) {
    Recalc(16, 16, 2, 2);
  } else if (LD <= 16) {
    Recalc(16, 16, 0, 0);
    Recalc(0, 0, std::min<int64_t>(bdb_tail ? (bdb > 4 ? 3 : 4) : 5, DivUp(BD, 16)), 1);
  } else if (bdb_block_tail && ldb_tail_16 && bd_r16 == 32 && ld_r16 == 32 && (weak_ldb || weak_bdb)) {
    Recalc(16, 16, 2, 2);
  }
}

}  // namespace

Tiles KernelTiles(int64_t m, int64_t n, int64_t k, int64_t l1_bytes) {
  Kernel b{m, n};
  b.ldb = n / 16;
  b.ldb_tail = n % 16;
  if (!b.Try2x2() && !b.Try3x1(3) && !b.Try3x1(2)) b.Try2x2();
  b.Recalc(b.bd_block, b.ld_block, b.bd_block2, b.ld_block2);
  b.Shapes(k * 2, l1_bytes);
  // get_num_C_tiles: get_bd_block2() · get_ld_block2().
  const int64_t bd2 = b.bdb <= b.bd_block2 ? b.bdb : b.bd_block2 + (b.bdb_tail ? 1 : 0);
  const int64_t ld2 = b.ldb <= b.ld_block2 ? b.ldb : b.ld_block2 + (b.ldb_tail ? 1 : 0);
  return {bd2, ld2};
}

}  // namespace memsim::onednn_amx
