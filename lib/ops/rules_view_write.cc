// In-place writes into a view of a base tensor (`x[:, :k] = y`, `x[:, 0] = 0.0`,
// `x[:, k:].masked_fill_(m, v)`, `x[:, idx] = y`, `x[mask] = 0.0`, `x[mask] = y`,
// `x.masked_scatter_(mask, y)`, `x.zero_()`, `noise.bernoulli_(p)`): the `view_write` op, whose output is the base written in place.
// Autograd records the inner op's node (CopyBackwards, FillBackward, MaskedFillBackward0,
// IndexPutBackward0, MaskedScatterBackward0) and, when the write went into a real view of the base,
// wraps it in a CopySlices node (Note [Writes into views] in docs/op-rules.md).
#include <algorithm>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

enum class Write { kCopy, kFill, kMaskedFill, kIndexPut, kMaskFill, kMaskPut, kMaskedScatter, kScalar };

std::optional<Write> ParseWrite(const std::string& w) {
  if (w == "copy") return Write::kCopy;
  if (w == "fill") return Write::kFill;
  if (w == "masked_fill") return Write::kMaskedFill;
  if (w == "index_put") return Write::kIndexPut;
  if (w == "mask_fill") return Write::kMaskFill;
  if (w == "mask_put") return Write::kMaskPut;
  if (w == "masked_scatter") return Write::kMaskedScatter;
  if (w == "scalar") return Write::kScalar;
  return std::nullopt;
}

Write WriteOf(const RuleCtx& c) { return ParseWrite(c.op.attrs.GetString("write", "copy")).value_or(Write::kCopy); }

/// Inputs: base, view (a view of the base, or the base itself), then per write: copy the value;
/// masked_fill the mask; index_put the value and a 1-D int64 index (along `dim` of the view);
/// mask_fill (`x[mask] = number`) the bool mask; mask_put (`x[mask] = y`) and masked_scatter the
/// value and the bool mask; scalar (an in-place op of the view with no tensor operand:
/// `fill_(number)`, `zero_()`, `bernoulli_(p)`, `uniform_()`, `normal_()`; its ATen name in `fn`)
/// nothing more.
size_t ArityOf(Write w) {
  switch (w) {
    case Write::kCopy: return 3;
    case Write::kFill: return 2;
    case Write::kScalar: return 2;
    case Write::kMaskedFill: return 3;
    case Write::kIndexPut: return 4;
    case Write::kMaskFill: return 3;
    case Write::kMaskPut: return 4;
    case Write::kMaskedScatter: return 4;
  }
  return 0;
}

/// The mask input: the third (masked_fill, mask_fill) or fourth (mask_put, masked_scatter).
const TensorMeta& MaskOf(const RuleCtx& c) { return *c.in[c.in.size() == 4 ? 3 : 2]; }

/// The rows a bool mask selects in `x[mask] = y`: the value's elements over the view's elements
/// per mask position (the value holds one row of the unmasked trailing dims per true element).
int64_t MaskedRows(const RuleCtx& c) {
  const TensorMeta& view = *c.in[1];
  int64_t row = 1;
  for (int64_t d = MaskOf(c).dim(); d < view.dim(); ++d) row *= view.sizes[d];
  return row > 0 ? c.in[2]->numel() / row : 0;
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
  if (!w)
    return RuleError(c, "\"write\" must be copy, fill, masked_fill, index_put, mask_fill, mask_put, masked_scatter or scalar");
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
  if (*w == Write::kMaskFill || *w == Write::kMaskPut || *w == Write::kMaskedScatter) {
    const TensorMeta& mask = MaskOf(c);
    if (mask.dtype != Dtype::kBool || mask.dim() > view.dim() ||
        !std::equal(mask.sizes.begin(), mask.sizes.end(), view.sizes.begin()))
      return RuleError(c, "the mask " + mask.ShapeString() + " must be bool with the leading sizes of " + view.ShapeString());
    if (*w != Write::kMaskFill && c.in[2]->dtype != base.dtype)
      return RuleError(c, "the value's dtype differs from the base's (cast it first)");
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
///
/// A scalar write takes its operand as a C++ Scalar or double (fill_.Scalar, zero_, bernoulli_.float,
/// uniform_, normal_: no wrapped tensor); its node (FillBackward0, ZeroBackward0, BernoulliBackward1,
/// ...) keeps nothing and returns zeros_like(grad) (derivatives.yaml).
///
/// `x[mask] = number` is index_put_ with a 0-dim value, which canDispatchToMaskedFill
/// (aten/src/ATen/native/TensorAdvancedIndexing.cpp) sends to masked_fill_: the wrapped value only.
/// `x[mask] = y` runs index_put_'s expandTensors: mask.nonzero(), an int64 [rows, mask.dim()],
/// freed when the write returns. masked_scatter_ (masked_scatter__cpu) writes in place through
/// `source.contiguous()`. IndexPutBackward0 and MaskedScatterBackward0 keep the mask.
void FwdViewWrite(const RuleCtx& c, FwdPlan* p) {
  switch (WriteOf(c)) {
    case Write::kFill:
    case Write::kMaskFill: p->FreeExtra(p->AddExtra(ElementSize(c.in[0]->dtype), "fill value")); break;
    case Write::kMaskedFill: p->Save(SavedRef::kInput, 2); break;
    case Write::kIndexPut: p->Save(SavedRef::kInput, 3); break;
    case Write::kMaskPut: p->FreeExtra(p->AddExtra(MaskedRows(c) * MaskOf(c).dim() * 8, "index_put mask.nonzero()")); break;
    case Write::kMaskedScatter: {
      const TensorMeta& src = *c.in[2];
      if (src.strides != ContiguousStrides(src.sizes)) p->FreeExtra(p->AddExtra(Bytes(src), "source.contiguous()"));
      break;
    }
    case Write::kCopy:
    case Write::kScalar: break;
  }
  if (WriteOf(c) == Write::kMaskFill) p->Save(SavedRef::kInput, 2);
  if (WriteOf(c) == Write::kMaskPut || WriteOf(c) == Write::kMaskedScatter) p->Save(SavedRef::kInput, 3);
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
/// had history: zeros_like (copy, fill, scalar), grad.masked_fill(mask, 0), or
/// grad.index_put(indices, zeros_like(values)) (derivatives.yaml, CopyBackwards in
/// torch/csrc/autograd/functions/tensor.cpp). Returns the temp holding it (-1: a grad of input 0).
///
/// With a bool mask (mask_fill, mask_put) the index_put is IndexPutBackward0's: zeros_like(values)
/// (0-dim for a number), the result; a non-scalar value runs expandTensors' mask.nonzero() again
/// (canDispatchToMaskedFill fails). masked_scatter's is grad.masked_fill(mask, 0).
int InnerSelfGrad(const RuleCtx& c, BwdPlan* p, int64_t bytes, bool as_base_grad) {
  const Write w = WriteOf(c);
  int zeros = -1;
  if (w == Write::kIndexPut || w == Write::kMaskPut) zeros = p->Temp(Bytes(*c.in[2]), "zeros_like(values)");
  if (w == Write::kMaskFill) zeros = p->Temp(ElementSize(c.in[0]->dtype), "zeros_like(values)");
  int out = -1;
  if (as_base_grad) p->GradNew(0);
  else out = p->Temp(bytes, w == Write::kMaskedFill ? "masked_fill grad" : "written grad");
  if (w == Write::kMaskPut) p->FreeTemp(p->Temp(MaskedRows(c) * MaskOf(c).dim() * 8, "index_put mask.nonzero()"));
  if (zeros >= 0) p->FreeTemp(zeros);
  return out;
}

/// The inner node's grad for the value: the grad itself (copy; CopySlices hands it its clone) or
/// grad.index(indices), at the written shape (validate_outputs reduces a broadcast value).
///
/// `x[mask] = y`: grad.index(mask) runs mask.nonzero() (freed) before its [rows, ...] result.
/// masked_scatter: masked_scatter_backward (FunctionsManual.cpp) = grad.masked_select(mask)
/// viewed as the source; masked_select_out_impl_cpu counts the mask first (`_mask.sum()`: a 0-dim
/// int64 whose bool input the CPU reduction copies to int64, profile field
/// `masked_select_count_copy`), then the serial kernel (one thread) fills the result. The source
/// is taken to hold exactly the selected elements (a larger source adds zeros and a cat).
void InnerValueGrad(const RuleCtx& c, BwdPlan* p, bool alias) {
  const Write w = WriteOf(c);
  if (!c.rg_in(2) || (w != Write::kCopy && w != Write::kIndexPut && w != Write::kMaskPut && w != Write::kMaskedScatter))
    return;
  if (w == Write::kMaskPut) {
    int nz = p->Temp(MaskedRows(c) * MaskOf(c).dim() * 8, "index mask.nonzero()");
    p->GradNew(2);
    p->FreeTemp(nz);
  } else if (w == Write::kMaskedScatter) {
    int count = p->Temp(8, "masked_select count");
    if (c.profile.masked_select_count_copy) p->FreeTemp(p->Temp(c.in[1]->numel() * 8, "mask as int64 (sum)"));
    p->FreeTemp(count);
    p->GradNew(2);
  } else if (w == Write::kIndexPut) {
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
  if (WriteOf(c) != Write::kCopy) InnerValueGrad(c, p, false);
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
