#include "lib/ops/onednn_amx_blocking.h"

#include <algorithm>
#include <set>

namespace memsim::onednn_amx {
namespace {

// amx_blocking_heuristics.hpp bw_map_t (bytes per cycle; one core: DRAM at 2.28).
constexpr float kL1LoadHit = 106.41f, kL1StoreHit = 106.41f;
const float kL1LoadMiss = static_cast<float>(106.41 / 2.28), kL1StoreMiss = static_cast<float>(106.41 / 2.85);
constexpr float kLlc = 6.0f, kDram1 = 2.28f;
constexpr int64_t kPage = 4096;

int64_t TmulSize(int64_t elems, int64_t tile) { return DivUp(elems, DivUp(elems, tile)); }  // determine_tmul_size

/// matmul_amx_blocking_params_macro_t with nthr = 1 (every per-thread size is the whole one;
/// bf16 in and out, so gemm_dt_sz = c_dt_sz = 2, acc_dt_sz = 4; no post-ops).
struct Macro {
  const Conf* c;
  int64_t m_tmul = 0, n_tmul = 16, k_tmul = 0, m_dec = 32, n_dec = 32;
  int64_t n_blk, n_chunk = 1, m_blk = 0, m_chunk = 1, k_blk = 0, k_chunk = 1, bs = 0, lda = 0;
  bool is_a_nt = false, need_buf_c = false, need_buf_a = false, extendable_k = false, fused_copy_a = false;
  bool is_horizontal = false;
  float score = 0.0f;

  explicit Macro(const Conf& conf) : c(&conf), n_blk(conf.N_blk), need_buf_a(conf.use_buffer_a) {}
  int64_t M() const { return c->M; }
  int64_t N() const { return c->N; }
  int64_t K() const { return c->K; }
  int64_t L2Thr() const { return c->L2Threshold(); }

  void SetTmulSizes() {
    m_tmul = TmulSize(M(), 16);
    n_tmul = 16;
    k_tmul = std::min(kWeiKBlk, K());
  }
  void SetDecomposition() {
    m_dec = std::min(M(), 2 * m_tmul);
    n_dec = std::min(N(), 2 * n_tmul);
  }

  bool SkipExtendableK() const {
    auto skip_for = [](int64_t k) {
      const int64_t ops = DivUp(k, 32), tile = k / ops;
      return k % ops == 0 && tile <= 32 && tile % 2 == 0;
    };
    const int64_t tail = K() % k_blk;
    return tail ? skip_for(k_blk) && skip_for(tail) : skip_for(k_blk);
  }

  int64_t KSpan(int64_t k_chunk_size, int64_t kb) const { return std::min(kb * k_chunk_size, K()); }

  int64_t L2MatrixUsage(int64_t k_chunk_size, int64_t blk, int64_t kb, bool horiz, bool force = false) const {
    const int64_t dec = horiz ? m_dec : n_dec, span = KSpan(k_chunk_size, kb);
    const int l1_matrix = static_cast<int>(2 * dec * span * 2);
    int l2_matrix = static_cast<int>(blk * span * 2);
    if (force) l2_matrix += static_cast<int>(blk * kb * k_chunk_size * 2);
    const int c_post = static_cast<int>(horiz ? 2 * m_dec * RndUp(blk * 2, 64) : 2 * RndUp(n_dec * 2, 64) * blk);
    const int c_tmp = static_cast<int>(kb == K() ? 2 * m_dec * n_dec * 4 : 2 * dec * blk * 4);
    return static_cast<int64_t>(static_cast<size_t>(l1_matrix + l2_matrix + c_tmp + c_post));
  }

  int64_t L2MatrixAndCUsage(int64_t k_chunk_size, int64_t blk, int64_t kb, bool horiz) const {
    const int64_t per = horiz ? M() : N(), span = KSpan(k_chunk_size, kb);
    return static_cast<int>(2 * per * span * 2) + static_cast<int>(2 * blk * span * 2) + per * blk * 4;
  }

  float Ratio(int64_t mb, int64_t k_chunk_size, int64_t kb, int64_t nb, bool horiz) const {
    const int64_t span = KSpan(k_chunk_size, kb);
    const int compute = static_cast<int>(mb * span * nb);
    const bool c_free = L2MatrixAndCUsage(k_chunk_size, horiz ? nb : mb, kb, horiz) < L2Thr() || span == K();
    const int bw = static_cast<int>(mb * span * 2 + nb * span * 2 + (c_free ? 0 : mb * nb * 4));
    return static_cast<float>(compute) / bw;
  }

  float Evaluate(int64_t k_chunk_size, int64_t blk, int64_t kb, bool horiz, bool force = false) const {
    if (L2MatrixUsage(k_chunk_size, blk, kb, horiz, force) > L2Thr()) return 0.0f;
    return horiz ? Ratio(m_dec, k_chunk_size, kb, blk, true) : Ratio(blk, k_chunk_size, kb, n_dec, false);
  }

  int64_t CalcKBlk(int64_t l1_dim) const {
    const int64_t c_tiles = m_dec * n_dec * 4, d_tiles = m_dec * RndUp(n_dec * 2, 64);
    const int64_t avail = c->L1Threshold() - (c_tiles * 2 + d_tiles);
    const int64_t largest_k_tiles = avail / (l1_dim * 2) / k_tmul;
    const int64_t k_tiles = DivUp(K(), k_tmul);
    const int64_t blocks = DivUp(k_tiles, largest_k_tiles);
    return std::min(DivUp(k_tiles, blocks) * k_tmul, K());
  }

  static std::set<int64_t> Candidates(int64_t dim, int64_t dec) {
    std::set<int64_t> s;
    const int64_t inner = DivUp(dim, dec);
    for (int64_t g = 1; g <= inner; ++g) s.insert(DivUp(inner, g));
    return s;
  }

  float Scores() const;
  bool SetBlocking(bool force_horizontal = false, bool force_b_to_l2 = false);
  bool SmallDims();
  bool Better(const Macro& o) const;  // operator>
};

float Macro::Scores() const {
  const bool use_b = c->use_buffer_b;
  const bool b_h = is_horizontal && use_b, b_v = !is_horizontal && use_b;
  const bool b_in_l2_h = b_h && L2MatrixUsage(k_chunk, n_blk, k_blk, true, true) < L2Thr();
  const int64_t a_size = M() * K() * 2, b_size = N() * K() * 2;
  const int cycles_per_tmul = static_cast<int>(m_tmul * 64 * 16 / 1024);
  float s1_shared, s1_private, mid_shared, mid_private, tmuls, strips, nt_miss, l1_reuse;
  if (is_horizontal) {
    const int64_t dst = m_dec * N() * 2;
    tmuls = static_cast<float>(m_dec * K() * N() / (m_tmul * k_tmul * n_tmul));
    strips = static_cast<float>(DivUp(M(), m_dec));
    nt_miss = static_cast<float>(b_size);
    l1_reuse = static_cast<float>(DivUp(n_blk, n_dec));
    s1_shared = static_cast<float>(b_size);
    s1_private = static_cast<float>(m_dec * K() * 2 + dst);
    mid_shared = static_cast<float>(m_dec * K() * 2);
    mid_private = static_cast<float>(dst);
  } else {
    const int64_t dst = n_dec * M() * 2;
    tmuls = static_cast<float>(n_dec * K() * M() / (m_tmul * k_tmul * n_tmul));
    strips = static_cast<float>(DivUp(N(), n_dec));
    nt_miss = static_cast<float>(a_size);
    l1_reuse = static_cast<float>(DivUp(m_blk, m_dec));
    s1_shared = static_cast<float>(a_size);
    s1_private = static_cast<float>(n_dec * K() * 2 + dst);
    mid_shared = static_cast<float>(n_dec * K() * 2);
    mid_private = static_cast<float>(dst);
  }
  const float t_miss = mid_shared * 2, t_hit = mid_shared * (l1_reuse - 1);
  const float c_elem = static_cast<float>(m_blk * n_blk);
  const float post_miss = static_cast<float>(m_blk * DivUp(n_blk, n_dec) * RndUp(n_dec * 2, 64));
  const float post_total = static_cast<float>(m_blk * DivUp(n_blk, n_dec) * DivUp(n_dec, 16) * 64);
  const float post_hit = post_total - post_miss, read_c_tmp = c_elem * 4;
  const float c_tmp_cycles = 4 * c_elem * static_cast<float>(k_chunk) / (k_blk == K() ? kL1LoadHit : kL1StoreMiss);
  const float c_l1 = post_miss / kL1StoreMiss + post_hit / kL1StoreHit + read_c_tmp / kL1StoreHit + c_tmp_cycles;
  const float l1 = t_miss / kL1LoadMiss + t_hit / kL1LoadHit + nt_miss / kL1LoadMiss + c_l1;
  const float transform_h = b_h ? s1_shared / kDram1 : 0, transform_v = b_v ? mid_shared / kDram1 : 0;
  float mid_dram, mid_llc;
  if (b_v) {
    mid_dram = mid_private / kDram1;
    mid_llc = mid_private / kLlc;
  } else {
    mid_dram = mid_shared / kDram1 + mid_private / kDram1;
    mid_llc = (mid_private + mid_shared) / kLlc;
  }
  const float tmul = tmuls * static_cast<float>(cycles_per_tmul);
  const float mid = transform_v + std::max({mid_dram, mid_llc, l1, tmul, 0.0f});
  const float s1 = !b_h ? s1_shared / kDram1 + s1_private / kDram1 : b_in_l2_h ? mid : s1_shared / kLlc;
  const float gemm = transform_h + s1 + (strips - 1) * mid;
  const float macs = static_cast<float>(M() * K() * N() * c->batch);
  const float total = gemm * static_cast<float>(c->batch);
  return macs / 512.0f / total;
}

bool Macro::SetBlocking(bool force_horizontal, bool force_b_to_l2) {
  const std::set<int64_t> m_cands = Candidates(M(), m_dec), n_cands = Candidates(N(), n_dec);
  int64_t best_k_h = 0, best_n_h = 0, best_m_v = 0, best_k_v = 0;
  float best_h = 0, best_v = 0;
  bool h_impossible = false, v_impossible = force_horizontal;
  auto horizontal = [&](int64_t kb, int64_t min_k_chunk) {
    const std::set<int64_t> k_cands = Candidates(K(), kb);
    best_n_h = 0;
    for (auto n = n_cands.rbegin(); n != n_cands.rend(); ++n)
      for (auto k = k_cands.rbegin(); k != k_cands.rend(); ++k) {
        const float s = Evaluate(*k, *n * n_dec, kb, true, force_b_to_l2);
        if (s > best_h && *k >= min_k_chunk) best_h = s, best_k_h = *k, best_n_h = *n;
      }
    if (best_n_h == 0) h_impossible = true;
  };
  auto vertical = [&](int64_t kb, int64_t min_k_chunk) {
    const std::set<int64_t> k_cands = Candidates(K(), kb);
    for (auto m = m_cands.rbegin(); m != m_cands.rend(); ++m)
      for (auto k = k_cands.rbegin(); k != k_cands.rend(); ++k) {
        const float s = Evaluate(*k, *m * m_dec, kb, false);
        if (s > best_v && *k >= min_k_chunk) best_v = s, best_k_v = *k, best_m_v = *m;
      }
    if (best_m_v == 0) {
      v_impossible = true;
      return;
    }
    // Critical L2 set issues for A: more than one pass over K (one thread: nthr_k = 1).
    if (DivUp(K(), kb * best_k_v) != 1) v_impossible = true;
    // The output's L2 set conflicts in a vertical traversal.
    const int64_t l2_line = c->caches.l2_sets * 64;
    int64_t stride = N() * 2 % kPage;
    if (stride == 0) stride = kPage;
    if (l2_line % stride == 0 && DivUp(stride * M(), l2_line) >= c->L2WaysThreshold()) v_impossible = true;
  };
  int64_t k_blk_h = CalcKBlk(m_dec);
  horizontal(k_blk_h, 0);
  int64_t k_blk_v = CalcKBlk(n_dec);
  vertical(k_blk_v, 0);
  if (v_impossible && h_impossible) return false;
  is_horizontal = h_impossible ? false
                  : v_impossible ? true
                  : M() < m_tmul * 2 ? true
                  : N() < n_tmul * 2 ? false
                                      : M() >= N();
  if (is_horizontal) {
    const int64_t a_l1 = k_blk_h * m_dec * 2, c_l1 = n_dec * m_dec * 4, d_post = m_dec * RndUp(n_dec * 2, 64);
    is_a_nt = false;
    if (k_blk_h < K() && DivUp(K(), k_blk_h) * a_l1 + 2 * c_l1 + d_post > c->L1Threshold()) {
      best_h = 0;  // give up on L1 blocking: K blocks of wei_k_blk that fit the L2
      horizontal(kWeiKBlk, k_blk_h / kWeiKBlk);
      k_blk_h = std::min(kWeiKBlk * best_k_h, K());
      best_k_h = 1;
      is_a_nt = true;
    }
    k_blk = k_blk_h;
    k_chunk = best_k_h;
    n_blk = std::min(best_n_h * n_dec, N());
    n_chunk = 1;
    m_blk = m_dec;
    m_chunk = DivUp(M(), m_blk);
    fused_copy_a = K() % kWeiKBlk != 0 && n_blk >= n_dec * 3 && k_blk >= 128;
    extendable_k = K() % kWeiKBlk != 0 && !SkipExtendableK() && !fused_copy_a;
  } else {
    k_blk = k_blk_v;
    k_chunk = best_k_v;
    n_blk = n_dec;
    n_chunk = DivUp(N(), n_blk);
    m_blk = std::min(best_m_v * m_dec, M());
    m_chunk = 1;
    is_a_nt = true;
    fused_copy_a = false;
    extendable_k = K() % kWeiKBlk != 0 && !SkipExtendableK();
  }
  bs = 1;
  lda = c->ActualLda(need_buf_a, k_blk);
  need_buf_c = k_blk != K();  // f32 partial sums for a bf16 result
  score = Scores();
  return true;
}

bool Macro::Better(const Macro& o) const {
  if (o.score > score) return false;
  if (o.score < score) return true;
  if (!is_horizontal && o.is_horizontal) return M() * K() + M() * N() < L2Thr() && o.is_a_nt;
  if (is_horizontal && !o.is_horizontal) return !(M() * K() + M() * N() < L2Thr() && is_a_nt);
  return m_chunk * n_chunk > o.m_chunk * o.n_chunk;
}

/// maybe_small_dims_heuristics (one thread): M ≤ 32, K ≤ wei_k_blk or N ≤ 32 take K whole.
bool Macro::SmallDims() {
  if (c->batch != 1) return false;
  if (M() <= 32 && c->transposed_b) {  // IMPLICATION(use_buffer_b, transposed_B)
    n_dec = std::min(N(), c->wei_n_blk);
    m_dec = M();
    if (M() * K() > L2Thr()) return false;
    m_blk = M();
    m_chunk = 1;
    n_blk = n_dec;
    n_chunk = RndUp(N(), n_dec) / n_dec;
  } else if (K() <= kWeiKBlk) {
    SetTmulSizes();
    SetDecomposition();
    m_blk = m_dec;
    m_chunk = DivUp(M(), m_dec);
    n_chunk = DivUp(N() * K() + N() * RndUp(K(), kWeiKBlk) + N() * m_dec, L2Thr());
    n_blk = RndUp(DivUp(N(), n_chunk), kWeiKBlk);
  } else if (N() <= 32) {
    m_dec = TmulSize(M(), 32);
    n_tmul = 16;
    n_dec = 32;
    k_tmul = std::min(kWeiKBlk, K());
    m_blk = m_dec;
    m_chunk = DivUp(M(), m_dec);
    n_blk = N();
    n_chunk = 1;
  } else {
    return false;
  }
  k_blk = K();
  k_chunk = 1;
  bs = 1;
  need_buf_c = need_buf_a = false;
  extendable_k = K() % kWeiKBlk != 0 && !SkipExtendableK();
  fused_copy_a = false;
  score = 1;
  lda = c->ActualLda(false, k_blk);
  return true;
}

}  // namespace

bool MacroBlocking(Conf& c) {
  c.N_blk = std::min(c.wei_n_blk, c.N);
  Macro best(c);
  if (!best.SmallDims()) {
    Macro cur(c);
    cur.SetTmulSizes();
    cur.SetDecomposition();
    if (cur.SetBlocking() && cur.Better(best)) best = cur;
    if (!best.is_horizontal && !c.transposed_b) {  // B copied from a plain layout: try horizontal
      if (cur.SetBlocking(true) && cur.Better(best)) best = cur;
      if (cur.SetBlocking(true, true) && cur.Better(best)) best = cur;
    }
    if (best.score == 0.0f) return false;
  }
  c.M_blk = best.m_blk, c.M_chunk = best.m_chunk, c.N_blk = best.n_blk, c.N_chunk = best.n_chunk;
  c.K_blk = best.k_blk, c.K_chunk = best.k_chunk, c.bs = best.bs;
  c.use_buffer_c = best.need_buf_c, c.use_buffer_a = best.need_buf_a, c.extendable_k = best.extendable_k;
  c.LDA = best.lda, c.use_fused_copy_a = best.fused_copy_a;
  return true;
}

}  // namespace memsim::onednn_amx
