#include "lib/ops/onednn_scratchpad.h"

#include <algorithm>
#include <limits>

namespace memsim {
namespace {

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RndUp(int64_t a, int64_t b) { return DivUp(a, b) * b; }

/// memory_tracking.hpp, registry_t::book: every booked piece costs its bytes plus its alignment
/// (at least 128); an empty piece costs nothing.
int64_t Entry(int64_t bytes, int64_t align = 1) { return bytes == 0 ? 0 : bytes + std::max<int64_t>(align, 128); }

/// simple_barrier::ctx_t (cpu_barrier.hpp): 4096 bytes aligned to 4096.
constexpr int64_t kBarrier = 4096;

/// utils::best_divider (dnnl_thread / jit_uni_1x1_conv_utils): the divisor of |value| in
/// [min_d, max_d] with the least rounding loss (float, as oneDNN computes it); ties go to the
/// smallest divisor when |find_max| is false.
int64_t BestDivider(int64_t value, int64_t min_d, int64_t max_d, bool find_max) {
  max_d = std::max<int64_t>(1, std::min(max_d, value));
  min_d = std::max<int64_t>(1, std::min(min_d, max_d));
  float min_loss = std::numeric_limits<float>::infinity();
  int64_t x = max_d;
  for (int64_t d = max_d; d >= min_d; --d) {
    const int64_t r = RndUp(value, d);
    const float loss = static_cast<float>(r - value) / static_cast<float>(r);
    if (find_max ? loss < min_loss : loss <= min_loss) {
      min_loss = loss;
      x = d;
    }
  }
  return x;
}

enum class Impl { kJit, kJit1x1, kDepthwise, kGemm };

/// cpu_convolution_list.cpp's choice for bf16 with blocked (format-any) layouts: brgemm
/// convolutions never apply; jit_uni_dw, then jit_bf16_1x1, then jit_bf16, then gemm.
Impl ImplOf(const OneDnnConv& c, OneDnnPass pass) {
  const int64_t icg = c.in_ch / c.groups, ocg = c.out_ch / c.groups;
  const bool dilated = c.dil_h != 1 || c.dil_w != 1;
  if (c.groups > 1 && icg == 1 && ocg == 1)
    return !dilated && c.kw <= 3 && c.stride_w <= c.kw ? Impl::kDepthwise : Impl::kGemm;
  if (c.groups == 1 && c.kh == 1 && c.kw == 1 && c.pad_h == 0 && c.pad_w == 0 && !dilated) {
    const bool unit = c.stride_h == 1 && c.stride_w == 1;
    if (unit || (c.oh * c.stride_h == c.ih && c.ow * c.stride_w == c.iw)) return Impl::kJit1x1;
  }
  if (c.groups > 1) {
    if (pass == OneDnnPass::kBackwardWeights) return icg % 16 || ocg % 16 ? Impl::kGemm : Impl::kJit;
    for (int64_t b : {16, 8, 4})
      if (icg % b == 0 && ocg % b == 0) return Impl::kJit;
    return Impl::kGemm;
  }
  return Impl::kJit;
}

/// jit_avx512_core_bf16_convolution: jit_avx512_core_bf16_fwd_kernel::init_scratchpad and
/// jit_avx512_core_bf16_conv_bwd_weights_kernel_f32::init_conf / init_scratchpad (nthr_mb = 1;
/// the permw transposition needs 5-D or nhwc layouts, so it never applies here).
int64_t JitConv(const OneDnnConv& c, OneDnnPass pass, int64_t l2_bytes) {
  const int64_t g = c.groups;
  int64_t ic = c.in_ch / g, oc = c.out_ch / g;
  if (pass == OneDnnPass::kForward)
    return c.bias && g == 1 && oc % 16 ? Entry(RndUp(oc, 16) * 2, 2) : 0;  // padded bias
  if (pass == OneDnnPass::kBackwardData) return 0;
  const bool first = ic < 16 && g == 1;  // is_1stconv: the source is read untransposed
  if (g == 1 && !first) {
    ic = RndUp(ic, 16);
    oc = RndUp(oc, 16);
  }
  const int64_t ic_block = first ? ic : 16, nb_ic = DivUp(ic, ic_block), nb_oc = DivUp(oc, 16);
  const int64_t ekw = (c.kw - 1) * c.dil_w + 1;
  const int64_t r_pad = (c.ow - 1) * c.stride_w + ekw - c.iw - c.pad_w;
  const int64_t tr_pad = RndUp(std::max(c.pad_w, r_pad + 1), 2);
  const int64_t tr_iw = first ? c.iw : RndUp(DivUp(c.iw, c.stride_w) + tr_pad, 2) * c.stride_w;
  const int64_t tr_ow = RndUp(c.ow, 2);
  const bool spatial_blocking = first && oc * c.oh * c.ow >= l2_bytes / 4 && c.ow >= 124 && c.oh > 1;
  const bool global_transpose = !spatial_blocking;
  const int64_t tr_src = first ? 0 : (global_transpose ? nb_ic * g : 1) * tr_iw * ic_block * c.ih;
  const int64_t tr_diff_dst = (global_transpose ? nb_oc * g : 1) * tr_ow * 16 * c.oh;
  const int64_t wei = g * nb_oc * 16 * nb_ic * ic_block * c.kh * c.kw;
  const int64_t bia = c.bias ? g * nb_oc * 16 : 0;
  return Entry((tr_src + tr_pad) * 2, 2) + Entry(tr_diff_dst * 2, 2) + Entry((wei + bia) * 4, 4) +
         (global_transpose ? Entry(kBarrier, kBarrier) : 0);
}

/// jit_avx512_core_bf16_1x1_convolution: the kernel's init_conf / init_scratchpad and, for a
/// strided 1×1 ("reduce to unit stride"), rtus_prepare_space_info (jit_uni_1x1_conv_utils.hpp).
int64_t Jit1x1(const OneDnnConv& c, OneDnnPass pass, int64_t l2_bytes) {
  const int64_t ic = RndUp(c.in_ch, 16), oc = RndUp(c.out_ch, 16);
  const bool rtus = c.stride_h != 1 || c.stride_w != 1;
  const int64_t os = c.oh * c.ow, is = rtus ? os : c.ih * c.iw;
  const int64_t padded_bias = c.bias && c.out_ch % 16 ? Entry(oc * 2, 2) : 0;
  if (pass == OneDnnPass::kBackwardWeights) {
    int64_t total = padded_bias + Entry((oc * ic + (c.bias ? oc : 0)) * 4, 4);
    const int64_t load_blk = BestDivider(DivUp(oc, 16), 16, DivUp(oc, 16), false);
    const int64_t bcast_blk = BestDivider(DivUp(ic, 16), 5, DivUp(ic, 16), false);
    if (!(c.oh > 14 && c.ow > 14))  // no permw: transposed diff_dst and src
      total += Entry(RndUp(is, 2) * 16 * load_blk * 2, 2) + Entry(RndUp(is, 2) * 16 * bcast_blk * 2, 2);
    if (rtus) total += Entry(bcast_blk * is * 16 * 2, 2);
    return total;
  }
  const bool fwd = pass == OneDnnPass::kForward;
  const int64_t reduce = fwd ? ic : oc, load = fwd ? oc : ic, bcast = fwd ? is : os;
  const int64_t spatial = fwd || rtus ? c.oh : c.ih;
  int64_t max_regs = 9, min_regs = 6;
  if (load > 128 && load < 256 && spatial > 10 && spatial < 28) max_regs = 6, min_regs = 5;
  int64_t ur = 1;
  for (int64_t u = max_regs; u >= min_regs; --u) {
    if ((spatial >= 14 && spatial % u == 0) || (spatial < 14 && os % u == 0)) {
      ur = u;
      break;
    }
  }
  if (ur == 1) {  // the tail search
    ur = std::min(max_regs, os);
    int64_t tail = os % max_regs;
    for (int64_t i = max_regs; i >= min_regs; --i) {
      const int64_t t = os % i;
      if (t > tail || t == 0) {
        ur = i;
        tail = t;
        if (t == 0) break;
      }
    }
  }
  int64_t total = (fwd ? padded_bias : 0) + Entry(RndUp(bcast, ur) * RndUp(load, 16) * 4, 4);  // store workspace
  if (rtus) {
    int64_t blocks = DivUp(reduce, 16);
    if (!fwd) {
      int64_t load_blocking = load;
      const bool small_bcast_big_weights = bcast <= 64 && load * reduce >= l2_bytes / 2;
      if (!small_bcast_big_weights && bcast <= 49 && c.batch <= 1 && load > 512 && load / reduce >= 4)
        load_blocking = 16;
      blocks = DivUp(load_blocking, 16);
    }
    total += Entry(blocks * is * 16 * 2, 2);
  }
  return total;
}

/// jit_uni_dw_convolution (avx512_core, bf16): jit_uni_dw_conv_kernel_utils.cpp init_scratchpad.
int64_t Depthwise(const OneDnnConv& c, OneDnnPass pass) {
  const int64_t ch = RndUp(c.groups, 16);
  const int64_t bias = c.bias ? Entry(ch * 4, 4) : 0;
  if (pass == OneDnnPass::kForward) return bias;
  if (pass == OneDnnPass::kBackwardData) return 0;
  return Entry(ch * c.kh * c.kw * 4, 4) + bias;
}

/// gemm_bf16_convolution, backward weights (gemm_convolution_utils.cpp init_conf, nthr = 1):
/// the weight size is booked in bytes as floats, twice. Forward and backward data on this path
/// are not derived (0).
int64_t GemmConv(const OneDnnConv& c, OneDnnPass pass) {
  if (pass != OneDnnPass::kBackwardWeights) return 0;
  const int64_t icg = c.in_ch / c.groups, ocg = c.out_ch / c.groups, ks = c.kh * c.kw;
  const bool unit = c.oh == c.ih && c.ow == c.iw && c.stride_h == 1 && c.stride_w == 1 && ks == 1;
  const int64_t wbytes = c.groups * ocg * icg * ks * 2;
  return 2 * Entry(wbytes * 4, 4) + (c.bias ? Entry(c.groups * ocg * 4, 4) : 0) +
         Entry(unit ? 0 : icg * ks * c.oh * c.ow * 2, 2);
}

}  // namespace

int64_t OneDnnBf16ConvScratchpad(const OneDnnConv& c, OneDnnPass pass, int64_t l2_bytes) {
  switch (ImplOf(c, pass)) {
    case Impl::kJit:
      return JitConv(c, pass, l2_bytes);
    case Impl::kJit1x1:
      return Jit1x1(c, pass, l2_bytes);
    case Impl::kDepthwise:
      return Depthwise(c, pass);
    case Impl::kGemm:
      return GemmConv(c, pass);
  }
  return 0;
}

bool OneDnnBf16Gemm(int64_t m, int64_t k, int64_t n, int64_t batch) {
  return static_cast<__int128>(batch) * m * k * n > 16 * 16 * 16;  // 128-bit: no overflow
}

int64_t OneDnnBf16MatmulScratchpad(int64_t m, int64_t k, int64_t n, bool transposed_a) {
  // brgemm_matmul_utils.cpp: init_brgemm_matmul_conf, compute_blocking_heuristic_avx512 (one
  // thread), init_aux_values, init_scratchpad; bf16 always copies B, and A when transposed.
  if (n == 1 && m != 1) std::swap(m, n);  // addmm_impl_cpu_: a one-column result swaps operands
  // init_brgemm_matmul_conf: A is copied when transposed, or when its leading dimension is a
  // large power of 2 (cache aliasing).
  const bool big_pow2_lda = !transposed_a && k >= 4096 && (k & (k - 1)) == 0 && m >= 1024;
  const bool buffer_a = transposed_a || big_pow2_lda;
  const int64_t n_blk = std::min<int64_t>(64, n);
  const int64_t k_blk = std::min<int64_t>(k, k > 1024 && !transposed_a ? 1024 : 512);
  const int64_t num_n_blk = DivUp(n, n_blk);
  int64_t best_m_blk = std::min<int64_t>(256, m), best_n_chunk = 1;
  float best = 1.0f;
  for (int64_t n_chunk = std::min<int64_t>(buffer_a ? 16 : 1, num_n_blk); n_chunk >= 1; --n_chunk) {
    for (int64_t m_blk = std::min<int64_t>(256, m); m_blk >= std::min<int64_t>(32, m); --m_blk) {
      const float m_dis = static_cast<float>((m_blk * DivUp(m, m_blk)) % m) / static_cast<float>(m);
      const float n_dis =
          static_cast<float>(DivUp(num_n_blk, n_chunk) * n_chunk - num_n_blk) / static_cast<float>(num_n_blk);
      const int64_t mod = k % k_blk;
      const float k_dis =
          static_cast<float>(k < k_blk ? k_blk - mod : std::min(k_blk - mod, mod)) / static_cast<float>(k_blk);
      const float score = (0.0f + m_dis + n_dis + 0.0f + k_dis) / 5.0f;
      if (score < best) {
        best = score;
        best_m_blk = m_blk;
        best_n_chunk = n_chunk;
      }
    }
  }
  int64_t lda = RndUp(k_blk, 32);
  if (lda >= 512 && (lda & (lda - 1)) == 0) lda += 32;
  const bool buffer_c = k > k_blk || k % k_blk > 0;  // f32 accumulation for a bf16 result
  return Entry(16 * 32, 64) +                        // the brgemm batch
         (buffer_a ? Entry(2 * best_m_blk * lda) : 0) + Entry(2 * 64 * RndUp(k_blk, 32)) +
         (buffer_c ? Entry(4 * n_blk * best_m_blk * best_n_chunk) : 0);
}

}  // namespace memsim
