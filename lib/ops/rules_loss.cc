// Losses beyond the pointwise family's (rules_pointwise.cc: cross_entropy, nll, mse, bce, smooth
// L1, huber): soft_margin_loss (Note [Soft margin loss] in docs/op-rules.md); xlogy, the
// elementwise op of kl_div's composite (Note [Composite losses]).
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

/// A Python number an ATen kernel passes on to a Tensor overload (`add_(1.)`, `div_(numel)`,
/// `mul_(-norm)` inside Loss.cpp): wrapped in an 8-byte double (Profile::scalar_operand_bytes)
/// which the CPU TensorIterator copies to the op's dtype, both freed when the op returns (the
/// 1.13 and 2.13 soft_margin traces: 8 B, then 4 B for float32). CUDA keeps the number on the host.
void KernelScalar(const RuleCtx& c, FwdPlan* p) {
  if (c.profile.scalar_operand_bytes == 0) return;
  int w = p->AddExtra(c.profile.scalar_operand_bytes, "wrapped number");
  int cast = p->AddExtra(ElementSize(c.in[0]->dtype), "wrapped number, cast");
  p->FreeExtra(cast);
  p->FreeExtra(w);
}

void KernelScalar(const RuleCtx& c, BwdPlan* p) {
  if (c.profile.scalar_operand_bytes == 0) return;
  int w = p->Temp(c.profile.scalar_operand_bytes, "wrapped number");
  p->FreeTemp(p->Temp(ElementSize(c.in[0]->dtype), "wrapped number, cast"));
  p->FreeTemp(w);
}

/// (input, target) of broadcastable shapes; the 0-dim reduction, or the input's sizes for "none".
Status InferSoftMargin(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 2));
  const TensorMeta& x = *c.in[0];
  const std::string red = c.op.attrs.GetString("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none") return RuleError(c, "unknown reduction " + red);
  auto b = BroadcastShapes(x.sizes, c.in[1]->sizes);
  if (!b || *b != x.sizes) return RuleError(c, "target " + c.in[1]->ShapeString() + " does not broadcast to " + x.ShapeString());
  o->Fresh(TensorMeta::Contiguous(x.dtype, red == "none" ? x.sizes : std::vector<int64_t>{}));
  return Status::OK();
}

// aten/src/ATen/native/Loss.cpp soft_margin_loss_out: output = empty({0}), then in place
// `neg_out(output, input).mul_(target).exp_()` and log1p_ (2.x) or add_(1.).log_() (1.13,
// Profile::soft_margin_log1p); for mean/sum `tmp = apply_loss_reduction(output)` (mean's
// sum_out(...).div_(numel)), `output.resize_({})`, `output.copy_(tmp)`: the 0-dim result keeps its
// input-sized storage. derivatives.yaml: soft_margin_loss_backward(grad, self, target, reduction).
void FwdSoftMargin(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
  const std::string red = c.op.attrs.GetString("reduction", "mean");
  p->AllocOutput(0, Bytes(*c.in[0]));
  if (!c.profile.soft_margin_log1p) KernelScalar(c, p);
  if (red == "none") return;
  int tmp = p->AddExtra(ElementSize(c.in[0]->dtype), "reduced loss");
  if (red == "mean") KernelScalar(c, p);
  p->FreeExtra(tmp);
}

// soft_margin_loss_backward_out (1.13 and 2.x): z = exp(-target * input) (`-target`, the product,
// then z; the first two die with the expression), grad_input = mul_out(target, z).mul_(-norm),
// z.add_(1), grad_input.div_(z).mul_(grad_output); z dies when the kernel returns.
void BwdSoftMargin(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const int64_t n = Bytes(*c.in[0]);
  int neg = p->Temp(Bytes(*c.in[1]), "-target");
  int prod = p->Temp(n, "-target * input");
  int z = p->Temp(n, "z = exp(-target * input)");
  p->FreeTemp(prod);
  p->FreeTemp(neg);
  p->GradNew(0);
  KernelScalar(c, p);  // mul_(-norm)
  KernelScalar(c, p);  // z.add_(1)
  p->FreeTemp(z);
}

/// xlogy(self, other) of two tensors: broadcast, the wider floating dtype.
Status InferXlogy(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 2));
  auto b = BroadcastShapes(c.in[0]->sizes, c.in[1]->sizes);
  if (!b) return RuleError(c, "cannot broadcast " + c.in[0]->ShapeString() + " with " + c.in[1]->ShapeString());
  Dtype dt = c.in[0]->dtype;
  if (IsFloating(c.in[1]->dtype) && (!IsFloating(dt) || ElementSize(c.in[1]->dtype) > ElementSize(dt))) dt = c.in[1]->dtype;
  o->Fresh(TensorMeta::Contiguous(dt, *b));
  return Status::OK();
}

// derivatives.yaml xlogy.Tensor: `self: grad * at::xlogy((self != 0), other)`, `other: grad *
// self / other`: the node keeps self and other (1.13 and 2.x).
void FwdXlogy(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
}

// other's grad first (the generated node's order, as DivBackward0's): `grad * self` (output-sized)
// then `/ other`; self's: the bool mask `self != 0`, xlogy(mask, other), then `grad *` it.
void BwdXlogy(const RuleCtx& c, BwdPlan* p) {
  const int64_t out = c.out.empty() ? Bytes(*c.in[0]) : Bytes(*c.out[0]);
  if (c.rg_in(1)) {
    int t = p->Temp(out, "grad * self");
    p->GradNew(1);
    p->FreeTemp(t);
  }
  if (c.rg_in(0)) {
    int mask = p->Temp(c.in[0]->numel(), "self != 0");
    int x = p->Temp(out, "xlogy(self != 0, other)");
    p->GradNew(0);
    p->FreeTemp(x);
    p->FreeTemp(mask);
  }
}

}  // namespace

const std::vector<OpRule> kLossRules = {
    {OpKind::kSoftMarginLoss, 2, 2, 1u, InferSoftMargin, FwdSoftMargin, BwdSoftMargin},
    {OpKind::kXlogy, 2, 2, 3u, InferXlogy, FwdXlogy, BwdXlogy},
};

}  // namespace memsim
