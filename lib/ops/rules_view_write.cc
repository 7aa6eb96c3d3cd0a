// In-place writes into a view of a base tensor (`x[:, :k] = y`, `x[:, 0] = 0.0`,
// `x[:, k:].masked_fill_(m, v)`, `x[:, idx] = y`): the `view_write` op, whose output is the base
// written in place. Autograd records the inner op's node (CopyBackwards, FillBackward,
// MaskedFillBackward0, IndexPutBackward0) and, when the write went into a real view of the base,
// wraps it in a CopySlices node (Note [Writes into views] in docs/op-rules.md).
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

enum class Write { kCopy, kFill, kMaskedFill, kIndexPut };

std::optional<Write> ParseWrite(const std::string& w) {
  if (w == "copy") return Write::kCopy;
  if (w == "fill") return Write::kFill;
  if (w == "masked_fill") return Write::kMaskedFill;
  if (w == "index_put") return Write::kIndexPut;
  return std::nullopt;
}

Write WriteOf(const RuleCtx& c) { return ParseWrite(c.op.attrs.GetString("write", "copy")).value_or(Write::kCopy); }

/// Inputs: base, view (a view of the base, or the base itself), then per write: copy the value;
/// masked_fill the mask; index_put the value and a 1-D int64 index (along `dim` of the view).
size_t ArityOf(Write w) {
  switch (w) {
    case Write::kCopy: return 3;
    case Write::kFill: return 2;
    case Write::kMaskedFill: return 3;
    case Write::kIndexPut: return 4;
  }
  return 0;
}

/// The shape index_put_ writes into: the view with dim `dim` replaced by the index's length.
std::vector<int64_t> IndexedSizes(const RuleCtx& c) {
  std::vector<int64_t> s = c.in[1]->sizes;
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), c.in[1]->dim());
  if (d && c.in.size() > 3 && c.in[3]->dim() == 1) s[*d] = c.in[3]->sizes[0];
  return s;
}

Status InferViewWrite(const RuleCtx& c, InferOut* o) {
  auto w = ParseWrite(c.op.attrs.GetString("write", "copy"));
  if (!w) return RuleError(c, "\"write\" must be copy, fill, masked_fill or index_put");
  if (c.in.size() != ArityOf(*w))
    return RuleError(c, "expected " + std::to_string(ArityOf(*w)) + " inputs (base, view" +
                            (*w == Write::kCopy ? ", value)" : *w == Write::kMaskedFill ? ", mask)"
                                                    : *w == Write::kIndexPut ? ", value, index)" : ")"));
  const TensorMeta& base = *c.in[0];
  const TensorMeta& view = *c.in[1];
  if (view.dtype != base.dtype || view.numel() > base.numel())
    return RuleError(c, "the view " + view.ShapeString() + " is not a view of the base " + base.ShapeString());
  if (*w == Write::kCopy || *w == Write::kIndexPut) {
    const TensorMeta& value = *c.in[2];
    if (value.dtype != base.dtype) return RuleError(c, "the value's dtype differs from the base's (cast it first)");
    std::vector<int64_t> target = *w == Write::kCopy ? view.sizes : IndexedSizes(c);
    auto b = BroadcastShapes(target, value.sizes);
    if (!b || *b != target)
      return RuleError(c, "value " + value.ShapeString() + " does not broadcast to " + TensorMeta{value.dtype, target, {}}.ShapeString());
  }
  if (*w == Write::kIndexPut) {
    if (c.in[3]->dim() != 1 || !c.op.attrs.GetInt("dim", c.bindings))
      return RuleError(c, "index_put takes a 1-D index and \"dim\"");
  }
  if (*w == Write::kMaskedFill) {
    auto b = BroadcastShapes(view.sizes, c.in[2]->sizes);
    if (!b || *b != view.sizes) return RuleError(c, "mask " + c.in[2]->ShapeString() + " does not broadcast to " + view.ShapeString());
  }
  o->Alias(base, 0);
  return Status::OK();
}

/// `x[...] = 0.0` wraps the number in a 0-dim tensor of the base's dtype on its device
/// (python_variable_indexing.cpp valueToTensor → at::indexing::scalarToTensor) for fill_; it dies
/// with the statement. MaskedFillBackward0 keeps the mask, IndexPutBackward0 the indices;
/// CopySlices, CopyBackwards and FillBackward keep only sizes.
void FwdViewWrite(const RuleCtx& c, FwdPlan* p) {
  switch (WriteOf(c)) {
    case Write::kFill: p->FreeExtra(p->AddExtra(ElementSize(c.in[0]->dtype), "fill value")); break;
    case Write::kMaskedFill: p->Save(SavedRef::kInput, 2); break;
    case Write::kIndexPut: p->Save(SavedRef::kInput, 3); break;
    case Write::kCopy: break;
  }
}

/// Whether autograd wraps the inner node in CopySlices: the write went into a view of the base.
/// A view that is the whole base (`x[:, idx] = v`'s `:`) is the base itself in 2.x
/// (Note [Whole slices], `whole_slice_is_self`).
bool IntoView(const RuleCtx& c) {
  if (c.op.inputs[0] == c.op.inputs[1]) return false;
  const bool whole = c.in[1]->sizes == c.in[0]->sizes && c.in[1]->strides == c.in[0]->strides;
  return !(whole && c.profile.whole_slice_is_self);
}

/// The inner node's grad for the written tensor (`self`) at |bytes|, computed only when the base
/// had history: zeros_like (copy, fill), grad.masked_fill(mask, 0), or
/// grad.index_put(indices, zeros_like(values)) (derivatives.yaml, CopyBackwards in
/// torch/csrc/autograd/functions/tensor.cpp). Returns the temp holding it (-1: a grad of input 0).
int InnerSelfGrad(const RuleCtx& c, BwdPlan* p, int64_t bytes, bool as_base_grad) {
  int zeros = -1;
  if (WriteOf(c) == Write::kIndexPut) zeros = p->Temp(Bytes(*c.in[2]), "zeros_like(values)");
  int out = -1;
  if (as_base_grad) p->GradNew(0);
  else out = p->Temp(bytes, WriteOf(c) == Write::kMaskedFill ? "masked_fill grad" : "written grad");
  if (zeros >= 0) p->FreeTemp(zeros);
  return out;
}

/// The inner node's grad for the value: the grad itself (copy; CopySlices hands it its clone) or
/// grad.index(indices), at the written shape (validate_outputs reduces a broadcast value).
void InnerValueGrad(const RuleCtx& c, BwdPlan* p, bool alias) {
  if (!c.rg_in(2) || (WriteOf(c) != Write::kCopy && WriteOf(c) != Write::kIndexPut)) return;
  if (WriteOf(c) == Write::kIndexPut) {
    p->GradNewLike(2, *TensorMeta::Contiguous(c.in[2]->dtype, IndexedSizes(c)));
  } else if (alias) {
    p->GradAlias(2);
  } else {
    p->GradNewLike(2, *TensorMeta::Contiguous(c.in[2]->dtype, c.in[1]->sizes));
  }
}

/// CopySlices::apply (torch/csrc/autograd/functions/tensor.cpp, 1.13 and 2.13): `result` =
/// grad.new_empty_strided(base) (the base's grad, or dropped at the end when the base had no
/// history), the view's slice of it cloned contiguous for the inner node, whose self grad is
/// copied back into the slice; the clone dies when the inner node returns unless it is the
/// value's grad (CopyBackwards returns it as it is).
void BwdViewWrite(const RuleCtx& c, BwdPlan* p) {
  const bool base_rg = c.rg_in(0);
  if (!IntoView(c)) {  // the inner node alone
    if (base_rg) InnerSelfGrad(c, p, Bytes(*c.in[0]), true);
    InnerValueGrad(c, p, true);
    return;
  }
  int result = -1;
  if (base_rg) p->GradNewLike(0, *c.in[0]);
  else result = p->Temp(Bytes(*c.in[0]), "CopySlices result");
  const int64_t view_bytes = c.in[1]->numel() * ElementSize(c.in[1]->dtype);
  const bool clone_is_value_grad = WriteOf(c) == Write::kCopy && c.rg_in(2);
  int clone = -1;
  if (clone_is_value_grad) InnerValueGrad(c, p, false);
  else clone = p->Temp(view_bytes, "CopySlices grad slice");
  int self_grad = base_rg ? InnerSelfGrad(c, p, view_bytes, false) : -1;
  if (WriteOf(c) == Write::kIndexPut) InnerValueGrad(c, p, false);
  if (clone >= 0) p->FreeTemp(clone);
  if (self_grad >= 0) p->FreeTemp(self_grad);
  if (result >= 0) p->FreeTemp(result);
}

constexpr uint32_t kBaseAndValue = 1u | 4u;  // the base and the value; the view, mask, index are not

}  // namespace

const std::vector<OpRule> kViewWriteRules = {
    {OpKind::kViewWrite, 2, 4, kBaseAndValue, InferViewWrite, FwdViewWrite, BwdViewWrite, AliasGradSame},
};

}  // namespace memsim
