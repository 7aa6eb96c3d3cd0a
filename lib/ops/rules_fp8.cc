// The torchao float8 linear (Note [FP8 training]): torchao/float8/float8_linear.py
// matmul_with_hp_or_float8_args, one autograd node that keeps the high-precision input and weight
// and casts to float8 in every GEMM that needs an operand, forward and backward. Inputs: x, W
// (the bias is a separate add, as Float8Linear.forward writes it). Attribute "recipe":
// "tensorwise" (Float8LinearConfig()) or "rowwise" (Float8LinearConfig.from_recipe_name("rowwise")).
#include <algorithm>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

Status InferFp8Linear(const RuleCtx& c, InferOut* o) {
  if (c.num_in() != 2) return RuleError(c, "fp8_linear takes x and weight (the bias is a separate add)");
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  if (x.dim() < 1 || w.dim() != 2 || x.sizes.back() != w.sizes[1])
    return RuleError(c, "input " + x.ShapeString() + " does not match weight " + w.ShapeString());
  const std::string recipe = c.op.attrs.GetString("recipe", "tensorwise");
  if (recipe != "tensorwise" && recipe != "rowwise")
    return RuleError(c, "recipe \"" + recipe + "\": expected tensorwise or rowwise");
  auto sizes = x.sizes;
  sizes.back() = w.sizes[0];
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

/// The sizes one fp8 linear works with: x [M, K], W [N, K], the high-precision element size.
struct Fp8Dims {
  int64_t m, k, n, hp;
  bool rowwise;
  explicit Fp8Dims(const RuleCtx& c)
      : m(c.in[0]->numel() / std::max<int64_t>(c.in[0]->sizes.back(), 1)),
        k(c.in[0]->sizes.back()),
        n(c.in[1]->sizes[0]),
        hp(ElementSize(c.in[0]->dtype)),
        rowwise(c.op.attrs.GetString("recipe", "tensorwise") == "rowwise") {}
};

/// Allocations of one plan (forward extras or backward temps) behind one interface, so that the
/// cast and the GEMM are written once for both directions.
template <typename Plan>
struct Mem;
template <>
struct Mem<FwdPlan> {
  FwdPlan* p;
  int Alloc(int64_t b, std::string_view l) { return p->AddExtra(b, l); }
  void Free(int k) { p->FreeExtra(k); }
};
template <>
struct Mem<BwdPlan> {
  BwdPlan* p;
  int Alloc(int64_t b, std::string_view l) { return p->Temp(b, l); }
  void Free(int k) { p->FreeTemp(k); }
};

/// An fp8 operand: its float8 bits and (row-wise) its scale, both live until the caller frees them.
struct Fp8Operand {
  int bits = -1, scale = -1;
};

/// hp_tensor_to_float8_dynamic (float8_scaling_utils.py) of a |numel|-element high-precision
/// tensor, scaled per |scale_rows| rows (row-wise) or as a whole: tensor_to_amax's abs (freed
/// once max / amax has reduced it; torch.max of the non-contiguous Wᵀ first copies it
/// contiguous, ReduceAllOps), then _ToFloat8ConstrFunc: `tensor.to(float32) * scale` and
/// to_fp8_saturated's clamp (fp32, both alive until the fp8 copy is made), the 1-byte result.
/// Scalars of the tensor-wise scale (4 and 8 bytes) are left out.
template <typename Plan>
Fp8Operand Cast(Mem<Plan> m, const Fp8Dims& d, int64_t numel, int64_t scale_rows, bool noncontig) {
  int abs = m.Alloc(numel * d.hp, "fp8 cast: abs");
  if (noncontig && !d.rowwise) m.Free(m.Alloc(numel * d.hp, "fp8 cast: max's contiguous copy"));
  m.Free(abs);
  Fp8Operand q;
  if (d.rowwise) q.scale = m.Alloc(scale_rows * 4, "fp8 cast: row-wise scale");
  int up = d.hp != 4 ? m.Alloc(numel * 4, "fp8 cast: fp32 upcast") : -1;
  int scaled = m.Alloc(numel * 4, "fp8 cast: scaled");
  if (up >= 0) m.Free(up);
  int clamped = m.Alloc(numel * 4, "fp8 cast: clamped");
  q.bits = m.Alloc(numel, "fp8 cast: float8 bits");
  m.Free(scaled);
  m.Free(clamped);
  return q;
}

void Drop(auto m, const Fp8Operand& q) {
  m.Free(q.bits);
  if (q.scale >= 0) m.Free(q.scale);
}

/// float8_ops.py float8_mm → addmm_float8_unwrapped → torch._scaled_mm of a [rows, inner] by a
/// [inner, cols] operand into the |out| callback's allocation. |copies| are the Python-side
/// contiguous copies preprocess_addmm makes first (a not row-major, b row-major), in bytes.
/// |mixed|: the operands are e5m2 × e4m3 (tensor-wise backward).
template <typename Plan, typename Out>
void ScaledMm(const RuleCtx& c, Mem<Plan> m, const Fp8Dims& d, int64_t rows, int64_t inner, int64_t cols,
              std::vector<int64_t> copies, bool fast_accum, bool mixed, Out out) {
  std::vector<int> held;
  for (int64_t b : copies) held.push_back(m.Alloc(b, "fp8 mm: contiguous operand"));
  const int64_t out_es = d.rowwise && d.hp == 4 ? 2 : d.hp;  // row-wise fp32 goes through a bf16 result
  int post = d.rowwise && !fast_accum ? m.Alloc(rows * cols * 4, "fp8 mm: post scale (a⁻¹·b⁻¹)") : -1;
  if (c.profile.scaled_mm_mat2_copy) held.push_back(m.Alloc(inner * cols, "scaled_mm: contiguous mat2"));
  const bool direct = out_es == d.hp;
  int res = direct ? -1 : m.Alloc(rows * cols * out_es, "fp8 mm: bf16 result");
  if (direct) out();
  const bool rowwise_scales = d.rowwise && fast_accum;
  if (c.profile.scaled_mm_cpu_emulation && (rowwise_scales || mixed)) {
    int a = m.Alloc(rows * inner * 4, "scaled_mm: fp32 mat_a");
    int as = m.Alloc(rows * inner * 4, "scaled_mm: scaled mat_a");
    m.Free(a);
    int b = m.Alloc(inner * cols * 4, "scaled_mm: fp32 mat_b");
    int bs = m.Alloc(inner * cols * 4, "scaled_mm: scaled mat_b");
    m.Free(b);
    int r32 = m.Alloc(rows * cols * 4, "scaled_mm: fp32 result");
    if (out_es != 4) {
      int r = m.Alloc(rows * cols * out_es, "scaled_mm: result cast");
      m.Free(r32);
      r32 = r;
    }
    m.Free(r32);
    m.Free(bs);
    m.Free(as);
  }
  if (c.profile.scaled_mm_mat2_copy) m.Free(held.back()), held.pop_back();
  if (post >= 0 && c.profile.mixed_dtype_input_copies) {
    // `output *= post_inverse_scale`: a bf16 result times fp32 scales, in place; the CPU
    // TensorIterator computes in fp32 (the result's fp32 copy and the product), then copies back
    int up = m.Alloc(rows * cols * 4, "fp8 mm: fp32 copy of the result");
    int prod = m.Alloc(rows * cols * 4, "fp8 mm: post-scaled result");
    m.Free(up);
    m.Free(prod);
  }
  if (!direct) {
    out();  // output.to(orig_dtype)
    m.Free(res);
  }
  if (post >= 0) m.Free(post);
  for (int k : held) m.Free(k);
}

void FwdFp8Linear(const RuleCtx& c, FwdPlan* p) {
  const Fp8Dims d(c);
  Mem<FwdPlan> m{p};
  Fp8Operand x = Cast(m, d, d.m * d.k, d.m, false);
  Fp8Operand w = Cast(m, d, d.n * d.k, d.n, true);  // Wᵀ, a column-major view
  ScaledMm(c, m, d, d.m, d.k, d.n, {}, /*fast_accum=*/true, /*mixed=*/false, [&] { p->AllocOutput(0); });
  Drop(m, w);
  Drop(m, x);
  // ctx.save_for_backward(input_hp, weight_hp_t): the high-precision input and Wᵀ (a view of the
  // parameter), whichever needs a grad.
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1, /*transposed=*/true);
}

/// matmul_with_hp_or_float8_args.backward: grad_input = go·W in fp8 (go and W cast again), then
/// grad_weight = goᵀ·x (go and x cast again); both computed whether or not the input needs a
/// grad (the autograd.Function does not look at needs_input_grad), the fp8 locals alive until it
/// returns.
void BwdFp8Linear(const RuleCtx& c, BwdPlan* p) {
  const Fp8Dims d(c);
  Mem<BwdPlan> m{p};
  auto grad = [&](int i, int64_t bytes) {
    return [=] {
      if (c.rg_in(i)) p->GradNew(i);
      else p->Temp(bytes, "fp8 linear: unused grad");
    };
  };
  Fp8Operand go = Cast(m, d, d.m * d.n, d.m, false);
  Fp8Operand w = Cast(m, d, d.n * d.k, d.k, true);
  // b = Wᵀᵀ is row-major: b.t().contiguous().t()
  ScaledMm(c, m, d, d.m, d.n, d.k, {d.n * d.k}, false, !d.rowwise, grad(0, d.m * d.k * d.hp));
  Fp8Operand go2 = Cast(m, d, d.m * d.n, d.n, false);
  Fp8Operand x = Cast(m, d, d.m * d.k, d.k, false);
  // a = goᵀ is not row-major (a.contiguous()), b = x is (b.t().contiguous().t())
  ScaledMm(c, m, d, d.n, d.m, d.k, {d.n * d.m, d.m * d.k}, false, !d.rowwise, grad(1, d.n * d.k * d.hp));
  Drop(m, x);
  Drop(m, go2);
  Drop(m, w);
  Drop(m, go);
}

}  // namespace

const std::vector<OpRule> kFp8Rules = {
    {OpKind::kFp8Linear, 2, 2, 3u, InferFp8Linear, FwdFp8Linear, BwdFp8Linear, AliasGradSame, false, true},
};

}  // namespace memsim
