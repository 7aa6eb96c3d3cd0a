// nn modules beyond rules_nn.cc: the margin losses over class indices (multi_margin_loss,
// multilabel_margin_loss; Note [Margin losses]), bilinear (aten::_trilinear; Note [Bilinear]) and
// CrossMapLRN2d (torch's own autograd.Function; Note [CrossMapLRN2d]).
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

// multi_margin_loss(X [N, C] or [C], target (int64 [N] or 0-dim)); multilabel_margin_loss(X [N, C]
// or [C], target int64 of X's shape). Output: 0-dim, or [N] with reduction "none" on a 2-D input.
Status InferMarginLoss(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 3));
  const TensorMeta& x = *c.in[0];
  if (x.dim() < 1 || x.dim() > 2) return RuleError(c, "input must be [N, C] or [C], got " + x.ShapeString());
  if (IsFloating(c.in[1]->dtype)) return RuleError(c, "target must hold class indices (an integer tensor)");
  if (c.op.kind == OpKind::kMultilabelMarginLoss && c.in[1]->sizes != x.sizes)
    return RuleError(c, "target must have the input's shape " + x.ShapeString());
  const std::string red = c.op.attrs.GetString("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none") return RuleError(c, "reduction must be mean, sum or none");
  std::vector<int64_t> sizes;
  if (red == "none" && x.dim() == 2) sizes = {x.sizes[0]};
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

// multi_margin_loss_cpu (LossMultiMargin.cpp, 1.13 and 2.x): the output alone (contiguous inputs
// are not copied); derivatives.yaml keeps self, target (and weight).
void FwdMultiMargin(const RuleCtx& c, FwdPlan* p) {
  for (int i = 0; i < c.num_in(); ++i) p->Save(SavedRef::kInput, i);
}

// multilabel_margin_loss_forward_out_cpu_template (LossMultilabelMargin.cpp, 1.13 and 2.x): the
// output, is_target (`resize_as_(target)` in the input's dtype), then TORCH_CHECKs on
// `target.min().item()` and `target.max().item()` (two 0-dim temporaries). derivatives.yaml
// `multilabel_margin_loss_forward`: keeps self, target and is_target.
void FwdMultilabelMargin(const RuleCtx& c, FwdPlan* p) {
  p->AllocOutput(0);
  int is_target = p->AddExtra(c.in[0]->numel() * ElementSize(c.in[0]->dtype), "is_target");
  for (const char* what : {"target.min()", "target.max()"})
    p->FreeExtra(p->AddExtra(ElementSize(c.in[1]->dtype), what));
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
  p->Save(SavedRef::kExtra, is_target);
}

// multilabel_margin_loss_backward_cpu_template: grad_input, then the checks on target.min/max and
// is_target.min/max (0-dim temporaries, each freed at once).
void BwdMultilabelMargin(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  p->GradNew(0);
  const int64_t te = ElementSize(c.in[1]->dtype), xe = ElementSize(c.in[0]->dtype);
  for (int64_t b : {te, te, xe, xe}) p->FreeTemp(p->Temp(b, "range check"));
}

// bilinear(x1 [B, I1], x2 [B, I2], weight [O, I1, I2]) -> [B, O] (the bias is a separate add).
Status InferBilinear(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 3, 3));
  const TensorMeta &a = *c.in[0], &b = *c.in[1], &w = *c.in[2];
  if (a.dim() != 2 || b.dim() != 2 || w.dim() != 3 || a.sizes[0] != b.sizes[0] || w.sizes[1] != a.sizes[1] ||
      w.sizes[2] != b.sizes[1])
    return RuleError(c, "expects x1 [B, I1], x2 [B, I2], weight [O, I1, I2], got " + a.ShapeString() + ", " +
                            b.ShapeString() + ", " + w.ShapeString());
  o->Fresh(TensorMeta::Contiguous(a.dtype, {a.sizes[0], w.sizes[0]}));
  return Status::OK();
}

// Note [Bilinear]: _trilinear (Linear.cpp) makes its zeros output, then per output feature k two
// sumproduct_pair results, freed after `output.narrow(1, k, 1).add_(buf)`: x1 · W[k] ([B, I2]) and
// its product with x2 ([B]). The node keeps x1, W, x2 (2.x: each only when another input's grad
// needs it; 1.13: all, Profile::trilinear_saves_all).
void FwdBilinear(const RuleCtx& c, FwdPlan* p) {
  const int64_t rows = c.in[0]->sizes[0], e = ElementSize(c.in[0]->dtype), o = c.in[2]->sizes[0];
  p->AllocOutput(0);
  for (int64_t k = 0; k < o; ++k) {
    int a = p->AddExtra(rows * c.in[1]->sizes[1] * e, "x1 . W[k]");
    int b = p->AddExtra(rows * e, "(x1 . W[k]) . x2");
    p->FreeExtra(a);
    p->FreeExtra(b);
  }
  for (int i = 0; i < 3; ++i) {
    bool other = false;
    for (int j = 0; j < 3; ++j) other = other || (j != i && c.rg_in(j));
    if (other || c.profile.trilinear_saves_all) p->Save(SavedRef::kInput, i);
  }
}

// _trilinear_backward (FunctionsManual.cpp): grad_x1, grad_W, grad_x2 in turn, each a _trilinear
// with the grad in one slot: a zeros result, then per output feature two sumproduct_pair buffers:
// x1: grad[:, k] ⊗ W[k] ([B, I1, I2]) and its product with x2 ([B, I1]); W: x1 · grad[:, k] ([B, I1])
// and its product with x2 ([I1, I2]); x2: x1 · W[k] ([B, I2]) and its product with grad[:, k] ([B, I2]).
void BwdBilinear(const RuleCtx& c, BwdPlan* p) {
  const int64_t rows = c.in[0]->sizes[0], i1 = c.in[0]->sizes[1], i2 = c.in[1]->sizes[1];
  const int64_t o = c.in[2]->sizes[0], e = ElementSize(c.in[0]->dtype);
  const int slot[3] = {0, 2, 1};  // grad_i1 (x1), grad_i2 (weight), grad_i3 (x2)
  const int64_t first[3] = {rows * i1 * i2, rows * i1, rows * i2};
  const int64_t second[3] = {rows * i1, i1 * i2, rows * i2};
  for (int s = 0; s < 3; ++s) {
    if (!c.rg_in(slot[s])) continue;
    p->GradNew(slot[s]);
    for (int64_t k = 0; k < o; ++k) {
      int a = p->Temp(first[s] * e, "trilinear buf");
      int b = p->Temp(second[s] * e, "trilinear buf . third");
      p->FreeTemp(a);
      p->FreeTemp(b);
    }
  }
}

// Note [CrossMapLRN2d]: nn.CrossMapLRN2d is torch's own autograd.Function _cross_map_lrn2d
// (torch/nn/modules/_functions.py, the same buffers in 1.13 and 2.x). Forward: output and
// ctx.scale, each `input.new()` then `resize_as_(input)`; the per-channel sums run in place;
// `ctx.scale.mul_(alpha / size).add_(k)` take Python numbers (each modelled as a wrapped number and
// its cast, transient); `save_for_backward(input, output)`, and ctx.scale is a ctx attribute (kept
// until the graph dies). Backward: paddded_ratio [C + size - 1, H, W], accum_ratio [H, W], then
// grad_input (`resize_as_(input)`); the two scratch buffers die as the function returns.
Status InferCrossMapLrn(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 1, 1));
  const TensorMeta& x = *c.in[0];
  if (x.dim() != 4) return RuleError(c, "CrossMapLRN2d expects a 4-D input, got " + x.ShapeString());
  if (c.op.attrs.GetInt("size", c.bindings).value_or(0) <= 0) return RuleError(c, "needs a positive \"size\"");
  o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  return Status::OK();
}

void FwdCrossMapLrn(const RuleCtx& c, FwdPlan* p) {
  p->AllocOutput(0);
  int scale = p->AddExtra(Bytes(*c.in[0]), "ctx.scale");
  for (int i = 0; i < 2 && c.profile.scalar_operand_bytes > 0; ++i) {  // mul_(alpha / size), add_(k)
    int w = p->AddExtra(c.profile.scalar_operand_bytes, "wrapped number");
    p->FreeExtra(p->AddExtra(ElementSize(c.in[0]->dtype), "wrapped number, cast"));
    p->FreeExtra(w);
  }
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kOutput, 0);
  p->KeepAsCtxAttribute(SavedRef::kExtra, scale);
}

void BwdCrossMapLrn(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const TensorMeta& x = *c.in[0];
  const int64_t size = c.op.attrs.GetInt("size", c.bindings).value_or(1), e = ElementSize(x.dtype);
  int padded = p->Temp((x.sizes[1] + size - 1) * x.sizes[2] * x.sizes[3] * e, "paddded_ratio");
  int accum = p->Temp(x.sizes[2] * x.sizes[3] * e, "accum_ratio");
  p->GradNew(0);
  p->FreeTemp(accum);
  p->FreeTemp(padded);
}

constexpr uint32_t kFirst = 1u;

}  // namespace

const std::vector<OpRule> kNnExtraRules = {
    {OpKind::kMultiMarginLoss, 2, 3, kFirst, InferMarginLoss, FwdMultiMargin, nullptr},
    {OpKind::kMultilabelMarginLoss, 2, 2, kFirst, InferMarginLoss, FwdMultilabelMargin, BwdMultilabelMargin},
    {OpKind::kBilinear, 3, 3, 7u, InferBilinear, FwdBilinear, BwdBilinear},
    {OpKind::kCrossMapLrn2d, 1, 1, kFirst, InferCrossMapLrn, FwdCrossMapLrn, BwdCrossMapLrn},
};

}  // namespace memsim
