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

// derivatives.yaml xlogy.Tensor (2.13): `self: at::xlogy(grad, other).masked_fill((self == 0.) &
// (other <= 0.), 0.)`, `other: grad * self / other`: the node keeps self and other.
void FwdXlogy(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
}

/// A comparison with a number inside a formula (`self == 0.`): its bool mask, and on the CPU the
/// wrapped number and its cast around it (Note [Scalar overloads]).
int CompareMask(const RuleCtx& c, BwdPlan* p, const TensorMeta& x, std::string_view label) {
  if (c.profile.scalar_operand_bytes == 0) return p->Temp(x.numel(), label);
  int w = p->Temp(c.profile.scalar_operand_bytes, "wrapped number");
  int cast = p->Temp(ElementSize(x.dtype), "wrapped number, cast");
  int m = p->Temp(x.numel(), label);
  p->FreeTemp(cast);
  p->FreeTemp(w);
  return m;
}

// other's grad first (the generated node's order, as DivBackward0's): `grad * self`, then `/ other`.
// self's: xlogy(grad, other), the masks `self == 0.`, `other <= 0.` and their `&`, then the
// masked_fill copy: the grad; the statement's temporaries die after it.
void BwdXlogy(const RuleCtx& c, BwdPlan* p) {
  const int64_t out = c.out.empty() ? Bytes(*c.in[0]) : Bytes(*c.out[0]);
  const int64_t n = c.out.empty() ? c.in[0]->numel() : c.out[0]->numel();
  if (c.rg_in(1)) {
    int t = p->Temp(out, "grad * self");
    p->GradNew(1);
    p->FreeTemp(t);
  }
  if (c.rg_in(0)) {
    std::vector<int> temps = {p->Temp(out, "xlogy(grad, other)")};
    temps.push_back(CompareMask(c, p, *c.in[0], "self == 0"));
    temps.push_back(CompareMask(c, p, *c.in[1], "other <= 0"));
    temps.push_back(p->Temp(n, "mask & mask"));
    p->GradNew(0);
    for (auto t = temps.rbegin(); t != temps.rend(); ++t) p->FreeTemp(*t);
  }
}

}  // namespace

const std::vector<OpRule> kLossRules = {
    {OpKind::kSoftMarginLoss, 2, 2, 1u, InferSoftMargin, FwdSoftMargin, BwdSoftMargin},
    {OpKind::kXlogy, 2, 2, 3u, InferXlogy, FwdXlogy, BwdXlogy},
};

}  // namespace memsim
