// The torchao float8 linear (Note [FP8 training]): torchao/float8/float8_linear.py
// matmul_with_hp_or_float8_args, one autograd node that keeps the high-precision input and weight
// and casts to float8 in every GEMM that needs an operand, forward and backward. Inputs: x, W
// (the bias is a separate add, as Float8Linear.forward writes it). Attribute "recipe":
// "tensorwise" (Float8LinearConfig()) or "rowwise" (Float8LinearConfig.from_recipe_name("rowwise"));
// "weight": "float8" where FSDP2's float8 all-gather hands the GEMMs a float8 weight.
#include <algorithm>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

/// The autocast dtype memsim models torchao float8 under (the simulator refuses --fp8 with
/// --amp fp16: RuleCtx::autocast says only that a region is open).
constexpr Dtype kAutocastDtype = Dtype::kBFloat16;

/// Float8Linear.forward under CUDA autocast (torch.is_autocast_enabled() reads the CUDA state):
/// `input = input.to(autocast_dtype)`, a copy the autograd.Function then keeps.
bool CudaInputCast(const RuleCtx& c) { return c.autocast && c.profile.cuda && c.in[0]->dtype != kAutocastDtype; }

Status InferFp8Linear(const RuleCtx& c, InferOut* o) {
  if (c.num_in() != 2) return RuleError(c, "fp8_linear takes x and weight (the bias is a separate add)");
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  if (x.dim() < 1 || w.dim() != 2 || x.sizes.back() != w.sizes[1])
    return RuleError(c, "input " + x.ShapeString() + " does not match weight " + w.ShapeString());
  const std::string recipe = c.op.attrs.GetString("recipe", "tensorwise");
  if (recipe != "tensorwise" && recipe != "rowwise" && recipe != "te")
    return RuleError(c, "recipe \"" + recipe + "\": expected tensorwise, rowwise or te");
  if (recipe == "te" && !c.profile.cuda)
    return RuleError(c, "Transformer Engine's te.Linear runs on CUDA only: use the cuda profile");
  auto sizes = x.sizes;
  sizes.back() = w.sizes[0];
  // float8_mm's output_dtype is the input's Float8TrainingTensor's _orig_dtype: x's dtype, or
  // inside an autocast region the region's (the mm's cast of a Float8TrainingTensor is torchao's
  // autocast_to_copy, which keeps the bits and changes _orig_dtype; on CUDA Float8Linear.forward
  // casts the input itself).
  o->Fresh(TensorMeta::Contiguous(c.autocast ? kAutocastDtype : x.dtype, sizes));
  return Status::OK();
}

/// The sizes one fp8 linear works with: x [M, K], W [N, K]; the element sizes of x, W and the
/// output (the GEMMs' output_dtype, and the grad output's in backward).
struct Fp8Dims {
  int64_t m, k, n, x_es, w_es, out_es;
  Dtype out;
  bool rowwise;
  /// FSDP2's float8 all-gather made the weight a Float8TrainingTensor: tensor_already_casted_to_fp8,
  /// so no cast of it in forward or backward (attribute "weight": "float8").
  bool w_float8;
  explicit Fp8Dims(const RuleCtx& c)
      : m(c.in[0]->numel() / std::max<int64_t>(c.in[0]->sizes.back(), 1)),
        k(c.in[0]->sizes.back()),
        n(c.in[1]->sizes[0]),
        x_es(CudaInputCast(c) ? ElementSize(kAutocastDtype) : ElementSize(c.in[0]->dtype)),
        w_es(ElementSize(c.in[1]->dtype)),
        out_es(ElementSize(c.out[0]->dtype)),
        out(c.out[0]->dtype),
        rowwise(c.op.attrs.GetString("recipe", "tensorwise") == "rowwise"),
        w_float8(c.op.attrs.GetString("weight", "") == "float8") {}
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
/// tensor of |es|-byte elements, scaled per |scale_rows| rows (row-wise) or as a whole:
/// tensor_to_amax's abs (freed once max / amax has reduced it; torch.max of the non-contiguous Wᵀ first copies it
/// contiguous, ReduceAllOps), then _ToFloat8ConstrFunc: `tensor.to(float32) * scale` and
/// to_fp8_saturated's clamp (fp32, both alive until the fp8 copy is made), the 1-byte result.
/// Scalars of the tensor-wise scale (4 and 8 bytes) are left out.
template <typename Plan>
Fp8Operand Cast(Mem<Plan> m, const Fp8Dims& d, int64_t numel, int64_t es, int64_t scale_rows, bool noncontig) {
  int abs = m.Alloc(numel * es, "fp8 cast: abs");
  if (noncontig && !d.rowwise) m.Free(m.Alloc(numel * es, "fp8 cast: max's contiguous copy"));
  m.Free(abs);
  Fp8Operand q;
  if (d.rowwise) q.scale = m.Alloc(scale_rows * 4, "fp8 cast: row-wise scale");
  int up = es != 4 ? m.Alloc(numel * 4, "fp8 cast: fp32 upcast") : -1;
  int scaled = m.Alloc(numel * 4, "fp8 cast: scaled");
  if (up >= 0) m.Free(up);
  int clamped = m.Alloc(numel * 4, "fp8 cast: clamped");
  q.bits = m.Alloc(numel, "fp8 cast: float8 bits");
  m.Free(scaled);
  m.Free(clamped);
  return q;
}

void Drop(auto m, const Fp8Operand& q) {
  if (q.bits >= 0) m.Free(q.bits);
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
  // addmm_float8_unwrapped: row-wise scaling into fp16 or fp32 goes through a bf16 result
  const bool via_bf16 = d.rowwise && (d.out == Dtype::kFloat32 || d.out == Dtype::kFloat16);
  const int64_t out_es = via_bf16 ? 2 : d.out_es;
  int post = d.rowwise && !fast_accum ? m.Alloc(rows * cols * 4, "fp8 mm: post scale (a⁻¹·b⁻¹)") : -1;
  if (c.profile.scaled_mm_mat2_copy) held.push_back(m.Alloc(inner * cols, "scaled_mm: contiguous mat2"));
  const bool direct = !via_bf16;
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

/// Note [Transformer Engine]: te.Linear's _Linear.forward (TE 1.x, module/linear.py) under
/// fp8_autocast: the input cast to the activation dtype if it is not (cast_if_needed), then
/// fp8_cast_transpose_fused makes its float8 bits and their transpose (the transpose only when the
/// weight needs a grad), the float8 GEMM writes the output in the activation dtype (out =
/// torch.empty) from the module's cached float8 weight (a buffer), and the context saves the
/// float8 transpose (not the high-precision input), the weight, the cached float8 weight
/// transpose and a clone of scaling_fwd.scale_inv (3 fp32).
void FwdTeLinear(const RuleCtx& c, FwdPlan* p) {
  const Fp8Dims d(c);
  const bool wgrad = c.rg_in(1);
  const int64_t act_es = d.out_es;
  const int cast = d.x_es != act_es ? p->AddExtra(d.m * d.k * act_es, "te.Linear: input cast_if_needed") : -1;
  const int bits = p->AddExtra(d.m * d.k, "te.Linear: float8 input");
  const int t = wgrad ? p->AddExtra(d.m * d.k, "te.Linear: float8 input transpose") : -1;
  if (cast >= 0) p->FreeExtra(cast);
  p->AllocOutput(0);
  p->FreeExtra(bits);
  if (t >= 0) p->Save(SavedRef::kExtra, t);
  p->Save(SavedRef::kExtra, p->AddExtra(3 * 4, "te.Linear: scale_inv clone"));
  p->Save(SavedRef::kInput, 1);
}

/// _Linear.backward: grad_output_preprocess casts the grad output to float8 with its transpose
/// (fp8_cast_transpose_fused), dgrad = fp8_gemm(weight_t_fp8, grad_output_c) and wgrad =
/// fp8_gemm(inputmat_t, grad_output_t), both in the activation dtype; the float8 grad outputs
/// die with the function's frame.
void BwdTeLinear(const RuleCtx& c, BwdPlan* p) {
  const Fp8Dims d(c);
  const int go = p->Temp(d.m * d.n, "te.Linear: float8 grad output");
  const int got = p->Temp(d.m * d.n, "te.Linear: float8 grad output transpose");
  for (int i = 0; i < 2; ++i) {
    if (!c.rg_in(i)) continue;
    const TensorMeta& in = *c.in[i];
    if (in.dtype == d.out) p->GradNew(i);
    else p->GradNewLike(i, *TensorMeta::Contiguous(d.out, in.sizes));
  }
  p->FreeTemp(go);
  p->FreeTemp(got);
  p->ReleaseGradOut();
}

void FwdFp8Linear(const RuleCtx& c, FwdPlan* p) {
  if (c.op.attrs.GetString("recipe", "") == "te") return FwdTeLinear(c, p);
  const Fp8Dims d(c);
  Mem<FwdPlan> m{p};
  const int input = CudaInputCast(c) ? p->AddExtra(d.m * d.k * d.x_es, "Float8Linear: input.to(autocast dtype)") : -1;
  Fp8Operand x = Cast(m, d, d.m * d.k, d.x_es, d.m, false);
  const Fp8Operand w = d.w_float8 ? Fp8Operand{} : Cast(m, d, d.n * d.k, d.w_es, d.n, true);  // Wᵀ, column-major
  ScaledMm(c, m, d, d.m, d.k, d.n, {}, /*fast_accum=*/true, /*mixed=*/false, [&] { p->AllocOutput(0); });
  Drop(m, w);
  Drop(m, x);
  // ctx.save_for_backward(input_hp, weight_hp_t): the high-precision input (its autocast copy on
  // CUDA) and Wᵀ (a view of the parameter), whichever needs a grad.
  if (input >= 0) p->Save(SavedRef::kExtra, input);
  else p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1, /*transposed=*/true);
}

/// matmul_with_hp_or_float8_args.backward: grad_input = go·W in fp8 (go and W cast again), then
/// grad_weight = goᵀ·x (go and x cast again); both computed whether or not the input needs a
/// grad (the autograd.Function does not look at needs_input_grad) and both in the grad output's
/// dtype (float8_mm: a's _orig_dtype), which the engine's validate_outputs casts to an input of
/// another dtype (under autocast). The Python frame frees the float8 locals in the order they
/// were made, then PyNode lets go of the incoming grad, before validate_outputs.
void BwdFp8Linear(const RuleCtx& c, BwdPlan* p) {
  if (c.op.attrs.GetString("recipe", "") == "te") return BwdTeLinear(c, p);
  const Fp8Dims d(c);
  Mem<BwdPlan> m{p};
  auto grad = [&](int i) {
    return [=, &c] {
      const TensorMeta& in = *c.in[i];
      if (!c.rg_in(i)) p->Temp(in.numel() * d.out_es, "fp8 linear: unused grad");
      else if (in.dtype == d.out) p->GradNew(i);
      else p->GradNewLike(i, *TensorMeta::Contiguous(d.out, in.sizes));
    };
  };
  Fp8Operand go = Cast(m, d, d.m * d.n, d.out_es, d.m, false);
  const Fp8Operand w = d.w_float8 ? Fp8Operand{} : Cast(m, d, d.n * d.k, d.w_es, d.k, true);
  // b = Wᵀᵀ is row-major: b.t().contiguous().t()
  ScaledMm(c, m, d, d.m, d.n, d.k, {d.n * d.k}, false, !d.rowwise, grad(0));
  Fp8Operand go2 = Cast(m, d, d.m * d.n, d.out_es, d.n, false);
  Fp8Operand x = Cast(m, d, d.m * d.k, d.x_es, d.k, false);
  // a = goᵀ is not row-major (a.contiguous()), b = x is (b.t().contiguous().t())
  ScaledMm(c, m, d, d.n, d.m, d.k, {d.n * d.m, d.m * d.k}, false, !d.rowwise, grad(1));
  Drop(m, go);
  Drop(m, w);
  Drop(m, go2);
  Drop(m, x);
  p->ReleaseGradOut();
}

}  // namespace

const std::vector<OpRule> kFp8Rules = {
    {OpKind::kFp8Linear, 2, 2, 3u, InferFp8Linear, FwdFp8Linear, BwdFp8Linear, AliasGradSame, false, true},
};

}  // namespace memsim
