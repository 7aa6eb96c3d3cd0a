// bitsandbytes' quantized linears (Note [Quantized base weights]): `linear_4bit` is Linear4bit's
// forward over MatMul4Bit (NF4 / FP4, QLoRA), `linear_8bit` Linear8bitLt's over MatMul8bitFp
// (LLM.int8 weights in training, the CPU/XPU path). ApplyQuantizedBase (lib/ir/quantized_base.h)
// writes them. Inputs (X, W[, b]); W is the packed quantized weight, so the logical [out, in]
// comes from the attributes out_features / in_features. The weight is frozen: only X gets a grad.
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

struct QuantLinear {
  int64_t out = 0, in = 0, rows = 0;  ///< the weight [out, in]; X's rows (numel / in)
  int64_t blocks = 0;                 ///< 4-bit absmax blocks: ceil(out * in / blocksize)
  bool nested = false;                ///< double quantization
  Dtype x = Dtype::kFloat32;          ///< the input's dtype (Linear4bit's inp_dtype)
  Dtype compute = Dtype::kFloat32;    ///< the dtype of the dequantized weight and the matmul
  Dtype weight = Dtype::kFloat32;     ///< QuantState.dtype: the weight's dtype before quantization
  bool clone = false;                 ///< peft's LoRA Linear4bit clones the base result
};

QuantLinear Read(const RuleCtx& c) {
  QuantLinear q;
  q.out = c.op.attrs.GetInt("out_features", c.bindings).value_or(0);
  q.in = c.op.attrs.GetInt("in_features", c.bindings).value_or(0);
  q.x = c.in[0]->dtype;
  q.rows = q.in > 0 ? c.in[0]->numel() / q.in : 0;
  const int64_t bs = c.op.attrs.GetInt("blocksize", c.bindings).value_or(64);
  q.blocks = bs > 0 ? (q.out * q.in + bs - 1) / bs : 0;
  q.nested = c.op.attrs.GetBool("double_quant", false);
  q.compute = ParseDtype(c.op.attrs.GetString("compute", "")).value_or(q.x);
  q.weight = ParseDtype(c.op.attrs.GetString("weight_dtype", "float32")).value_or(Dtype::kFloat32);
  q.clone = c.op.attrs.GetBool("clone", false);
  return q;
}

Status InferQuantLinear(const RuleCtx& c, InferOut* o) {
  if (c.in.size() < 2 || c.in.size() > 3) return RuleError(c, "expected inputs (X, W[, b])");
  const QuantLinear q = Read(c);
  const TensorMeta& x = *c.in[0];
  if (q.out < 1 || q.in < 1) return RuleError(c, "needs positive \"out_features\" and \"in_features\" attributes");
  if (x.dim() < 1 || x.sizes.back() != q.in)
    return RuleError(c, "input " + x.ShapeString() + " does not match in_features " + std::to_string(q.in));
  if (c.in.size() == 3 && c.in[2]->numel() != q.out) return RuleError(c, "bias size does not match");
  auto sizes = x.sizes;
  sizes.back() = q.out;
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

// Linear4bit.forward: x.to(compute_dtype); matmul_4bit → MatMul4Bit.forward → gemm_4bit, whose
// CPU kernel is the default one (backends/default/ops.py _gemm_4bit_default_impl): with double
// quantization absmax = dequantize_blockwise(absmax_8bit, ...) + offset; B_dq = dequantize_4bit
// (an [out, in] tensor in the compute dtype); F.linear(A, B_dq); then .to(inp_dtype). Nothing is
// saved: ctx.tensors holds a view of the (frozen, resident) packed weight.
void FwdLinear4bit(const RuleCtx& c, FwdPlan* p) {
  const QuantLinear q = Read(c);
  const int64_t ce = ElementSize(q.compute);
  const bool cast = q.compute != q.x;
  const int xc = cast ? p->AddExtra(q.rows * q.in * ce, "input in the compute dtype") : -1;
  int absmax = -1;
  if (q.nested) {
    int dq = p->AddExtra(q.blocks * 4, "absmax dequantized (double quantization)");
    absmax = p->AddExtra(q.blocks * 4, "absmax + offset");
    p->FreeExtra(dq);
  }
  const int w = p->AddExtra(q.out * q.in * ce, "dequantized weight");
  // The matmul's result, unless it is the op's output: cast back to the input's dtype, or
  // cloned by peft's LoRA Linear4bit ("defensively clone", peft/tuners/lora/bnb.py).
  const int r = cast || q.clone ? p->AddExtra(q.rows * q.out * ce, "quantized linear result") : -1;
  if (r < 0) p->AllocOutput(0);
  if (absmax >= 0) p->FreeExtra(absmax);
  p->FreeExtra(w);
  if (cast && q.clone) {
    int back = p->AddExtra(q.rows * q.out * ElementSize(q.x), "result in the input's dtype");
    p->FreeExtra(r);
    p->FreeExtra(xc);
    p->AllocOutput(0);
    p->FreeExtra(back);
  } else if (r >= 0) {
    p->AllocOutput(0);
    p->FreeExtra(r);
    if (xc >= 0) p->FreeExtra(xc);
  }
}

// MatMul4Bit.backward: grad_A = matmul(grad_output, F.dequantize_4bit(B, state).to(grad dtype));
// F.dequantize_4bit dequantizes the nested absmax (+= offset in place) and the weight into
// QuantState.dtype (the weight's dtype before quantization). The casts' ToCopyBackward nodes
// around it copy the grad into the compute dtype and back.
void BwdLinear4bit(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const QuantLinear q = Read(c);
  const bool cast = q.compute != q.x;
  int g = -1;
  if (cast) {
    g = p->Temp(q.rows * q.out * ElementSize(q.compute), "grad in the compute dtype");
    p->ReleaseGradOut();
  }
  const int absmax = q.nested ? p->Temp(q.blocks * 4, "absmax dequantized (double quantization)") : -1;
  int w = p->Temp(q.out * q.in * ElementSize(q.weight), "dequantized weight");
  if (absmax >= 0) p->FreeTemp(absmax);
  if (q.weight != q.compute) {
    int w2 = p->Temp(q.out * q.in * ElementSize(q.compute), "dequantized weight in the grad's dtype");
    p->FreeTemp(w);
    w = w2;
  }
  if (!cast) {
    p->GradNew(0);
    p->FreeTemp(w);
    return;
  }
  int ga = p->Temp(q.rows * q.in * ElementSize(q.compute), "input grad in the compute dtype");
  p->FreeTemp(w);
  p->FreeTemp(g);
  p->GradNew(0);
  p->FreeTemp(ga);
}

/// SCB.unsqueeze(1).mul(1.0 / 127.0): a Python number operand (its wrapped number and, on the
/// 2.13 CPU, its float32 copy, as for any `x * 2.0`: Profile::scalar_operand_*) and the [out, 1]
/// float32 result, returned as an extra the caller frees after its mul_.
int RowScales(const RuleCtx& c, const QuantLinear& q, FwdPlan* p) {
  const int number = c.profile.scalar_operand_bytes > 0 ? p->AddExtra(c.profile.scalar_operand_bytes, "wrapped scalar") : -1;
  const int cast = number >= 0 && c.profile.scalar_operand_cast ? p->AddExtra(4, "wrapped scalar, cast") : -1;
  const int scale = p->AddExtra(q.out * 4, "row scales / 127");
  if (cast >= 0) p->FreeExtra(cast);
  if (number >= 0) p->FreeExtra(number);
  return scale;
}

// MatMul8bitFp.forward (bnb.matmul in training on CPU/XPU): CB = state.CB.to(A.dtype).mul_(
// state.SCB.unsqueeze(1).mul(1/127)); F.linear(A, CB, bias); ctx.A = A keeps the input.
void FwdLinear8bit(const RuleCtx& c, FwdPlan* p) {
  const QuantLinear q = Read(c);
  const int w = p->AddExtra(q.out * q.in * ElementSize(q.x), "dequantized weight");
  const int scale = RowScales(c, q, p);
  p->FreeExtra(scale);
  p->AllocOutput(0);
  p->FreeExtra(w);
  if (c.rg_in(0)) p->KeepAsCtxAttribute(SavedRef::kInput, 0);
}

// MatMul8bitFp.backward: CB = state.CB.to(dtype_A, copy=True).mul_(SCB/127);
// grad_A = matmul(grad_output.to(dtype_A), CB).
void BwdLinear8bit(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const QuantLinear q = Read(c);
  const int w = p->Temp(q.out * q.in * ElementSize(q.x), "dequantized weight");
  const int number = c.profile.scalar_operand_bytes > 0 ? p->Temp(c.profile.scalar_operand_bytes, "wrapped scalar") : -1;
  const int cast = number >= 0 && c.profile.scalar_operand_cast ? p->Temp(4, "wrapped scalar, cast") : -1;
  const int scale = p->Temp(q.out * 4, "row scales / 127");
  if (cast >= 0) p->FreeTemp(cast);
  if (number >= 0) p->FreeTemp(number);
  p->FreeTemp(scale);
  p->GradNew(0);
  p->FreeTemp(w);
}

}  // namespace

const std::vector<OpRule> kQuantizedRules = {
    // X is the only differentiable input: the quantized weight is frozen (Params4bit and
    // Int8Params are requires_grad=False) and a bias is frozen in every bnb training setup.
    {OpKind::kLinear4bit, 2, 3, 1u, InferQuantLinear, FwdLinear4bit, BwdLinear4bit, AliasGradSame, false, true},
    {OpKind::kLinear8bit, 2, 3, 1u, InferQuantLinear, FwdLinear8bit, BwdLinear8bit, AliasGradSame, false, true},
};

}  // namespace memsim
