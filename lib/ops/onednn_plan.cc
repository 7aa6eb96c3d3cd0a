#include "lib/ops/onednn_plan.h"

#include <type_traits>
#include <utility>

#include "lib/ops/onednn_amx_matmul.h"
#include "lib/ops/onednn_scratchpad.h"

namespace memsim {

bool OneDnnBf16Path(const RuleCtx& c, const TensorMeta& t) {
  return c.profile.onednn_conv_reorders && c.profile.bf16_conv_onednn && t.dtype == Dtype::kBFloat16;
}

namespace {

/// The scratchpad of one bf16 GEMM on the profile's kernels: oneDNN 3.x's AMX brgemm matmul
/// (--cpu-isa amx under 2.x; |g| with B's layout and the batch) or oneDNN 2.6's avx512_core_bf16
/// one (one thread: neither B's layout nor the batch enters).
int64_t GemmScratchpad(const RuleCtx& c, const OneDnnGemmShape& g) {
  if (c.profile.bf16_gemm_amx) {
    // addmm_impl_cpu_: a one-column result is computed transposed, Bᵀ · Aᵀ.
    const OneDnnGemmShape run = g.n != 1 || g.m == 1
                                    ? g
                                    : OneDnnGemmShape{1, g.k, g.m, g.batch, !g.transposed_b, !g.transposed_a};
    if (auto bytes = OneDnnAmxBf16MatmulScratchpad(run, c.profile.onednn_caches)) return *bytes;
    // Declined: oneDNN 3.x's avx512_core_bf16 matmul, approximated by 2.6's (not derived).
  }
  return OneDnnBf16MatmulScratchpad(g.m, g.k, g.n, g.transposed_a);
}

}  // namespace

int64_t LinearScratch(const RuleCtx& c, LinearGemm gemm) {
  const TensorMeta& x = *c.in[0];
  if (!OneDnnBf16Path(c, x)) return 0;
  const int64_t k = c.in[1]->sizes[1], n = c.in[1]->sizes[0], m = k > 0 ? x.numel() / k : 0;
  if (!OneDnnBf16Gemm(m, k, n)) return 0;
  switch (gemm) {
    case LinearGemm::kForward:  // x · Wᵀ: B is W's transposed view
      return GemmScratchpad(c, {m, k, n, 1, false, true});
    case LinearGemm::kGradInput:  // grad · W
      return GemmScratchpad(c, {m, n, k, 1, false, false});
    case LinearGemm::kGradWeight:  // gradᵀ · x
      return GemmScratchpad(c, {n, m, k, 1, true, false});
  }
  return 0;
}

void GemmScratch(FwdPlan* p, int64_t bytes) {
  if (bytes > 0) p->FreeExtra(p->AddExtra(bytes, "onednn scratchpad"));
}
void GemmScratch(BwdPlan* p, int64_t bytes) {
  if (bytes > 0) p->FreeTemp(p->Temp(bytes, "onednn scratchpad"));
}

namespace {

/// How oneDNN's matmul takes a 3-D bmm operand (PyTorch 1.13 mkldnn_matmul): contiguous (size-1
/// dims ignored) as it is, a transposed view with strides exactly (R·C, 1, R) as such, anything
/// else (other strides, a broadcast batch) as a contiguous copy made inside the op.
enum class OneDnnOperand { kPlain, kTransposed, kCopied };
OneDnnOperand OperandLayout(const TensorMeta& t, bool transpose) {
  TensorMeta v = t;
  if (transpose) {
    std::swap(v.sizes[1], v.sizes[2]);
    std::swap(v.strides[1], v.strides[2]);
  }
  if (v.is_contiguous()) return OneDnnOperand::kPlain;
  const int64_t r = v.sizes[1], cols = v.sizes[2];
  if (v.strides[0] == r * cols && v.strides[1] == 1 && v.strides[2] == r) return OneDnnOperand::kTransposed;
  return OneDnnOperand::kCopied;
}

}  // namespace

OneDnnGemm MatmulGemm(const RuleCtx& c, int ia, int ib, int grad) {
  const TensorMeta& a = *c.in[ia];
  const TensorMeta& b = *c.in[ib];
  OneDnnGemm r;
  if (!OneDnnBf16Path(c, a) || b.dtype != Dtype::kBFloat16 || a.dim() < 2 || b.dim() < 2) return r;
  const int64_t k = a.sizes.back(), n = b.sizes.back(), rows = a.sizes[a.dim() - 2];
  if (k == 0 || n == 0 || rows == 0) return r;
  // ≥3-D times 2-D folds A's batch into its rows (one mm); otherwise a bmm over the batch.
  const bool folded = b.dim() == 2;
  const int64_t m = folded ? a.numel() / k : rows;
  const int64_t batch = folded ? 1 : c.out[0]->numel() / (rows * n);
  int64_t gm = m, gk = k, gn = n;
  if (grad == ib) gm = k, gk = m;  // aᵀ · grad
  if (grad == ia) gk = n, gn = k;  // grad · bᵀ
  if (!OneDnnBf16Gemm(gm, gk, gn, batch)) return r;
  // The GEMM's two operands as oneDNN sees them (the incoming grad is contiguous).
  OneDnnOperand first = OneDnnOperand::kPlain, second = OneDnnOperand::kPlain;
  const bool bmm = a.dim() == 3 && b.dim() == 3 && c.op.kind != OpKind::kMatmul;
  if (bmm) {
    if (grad != ia) first = OperandLayout(a, grad == ib);
    if (grad != ib) second = OperandLayout(b, grad == ia);
  } else if (!folded && grad != ia) {
    const bool col_major = rows > 1 && k > 1 && a.strides[a.dim() - 2] == 1 && a.strides.back() == rows;
    if (col_major != (grad == ib)) first = OneDnnOperand::kTransposed;
  } else if (folded && grad == ib) {
    first = OneDnnOperand::kTransposed;  // the folded aᵀ
  }
  if (first == OneDnnOperand::kCopied) r.copy_a = 2 * batch * gm * gk;
  if (second == OneDnnOperand::kCopied) r.copy_b = 2 * batch * gk * gn;
  // B as oneDNN sees it: a bmm operand's layout; a 2-D b (or its transpose for grad·bᵀ) is a
  // transposed view when column-major; the incoming grad (aᵀ·grad) is contiguous.
  bool b_transposed = second == OneDnnOperand::kTransposed;
  if (!bmm && grad != ib) {
    const int64_t br = b.sizes[b.dim() - 2];
    const bool b_col_major = br > 1 && n > 1 && b.strides[b.dim() - 2] == 1 && b.strides.back() == br;
    b_transposed = b_col_major != (grad == ia);
  }
  r.scratch = GemmScratchpad(c, {gm, gk, gn, batch, first == OneDnnOperand::kTransposed, b_transposed});
  return r;
}

namespace {

template <typename Plan>
void AddTransients(Plan* p, const OneDnnGemm& g) {
  int copies[2] = {-1, -1};
  const int64_t bytes[2] = {g.copy_a, g.copy_b};
  for (int i = 0; i < 2; ++i) {
    if (bytes[i] == 0) continue;
    if constexpr (std::is_same_v<Plan, FwdPlan>)
      copies[i] = p->AddExtra(bytes[i], "onednn bmm operand copy");
    else
      copies[i] = p->Temp(bytes[i], "onednn bmm operand copy");
  }
  GemmScratch(p, g.scratch);
  for (int k : copies) {
    if (k < 0) continue;
    if constexpr (std::is_same_v<Plan, FwdPlan>)
      p->FreeExtra(k);
    else
      p->FreeTemp(k);
  }
}
}  // namespace

void GemmTransients(FwdPlan* p, const OneDnnGemm& g) { AddTransients(p, g); }
void GemmTransients(BwdPlan* p, const OneDnnGemm& g) { AddTransients(p, g); }
bool HasTransients(const OneDnnGemm& g) { return g.copy_a > 0 || g.copy_b > 0 || g.scratch > 0; }

}  // namespace memsim
