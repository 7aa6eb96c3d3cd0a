// Sliding windows: `im2col` (F.unfold, nn.Unfold), `col2im` (F.fold, nn.Fold) and `unfold`
// (Tensor.unfold, a view). Each other's backward; nothing saved but sizes (1.13's Im2ColBackward0
// keeps `self`), one input-sized grad (Note [Unfold and fold] in docs/op-rules.md).
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

struct Window {
  std::vector<int64_t> kernel, dilation, padding, stride;
};

std::optional<Window> WindowOf(const RuleCtx& c) {
  auto pair = [&](const char* name, int64_t dflt) {
    return c.op.attrs.GetInts(name, c.bindings).value_or(std::vector<int64_t>{dflt, dflt});
  };
  Window w{pair("kernel_size", 0), pair("dilation", 1), pair("padding", 0), pair("stride", 1)};
  for (const auto* v : {&w.kernel, &w.dilation, &w.padding, &w.stride})
    if (v->size() != 2) return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (w.kernel[i] < 1 || w.dilation[i] < 1 || w.stride[i] < 1 || w.padding[i] < 0) return std::nullopt;
  return w;
}

/// Blocks along one spatial dim of size |n| (aten/src/ATen/native/im2col_shape_check.h).
int64_t Blocks(const Window& w, int i, int64_t n) {
  return (n + 2 * w.padding[i] - w.dilation[i] * (w.kernel[i] - 1) - 1) / w.stride[i] + 1;
}

/// im2col: [N, C, H, W] (or [C, H, W]) → [N, C·kh·kw, L].
Status InferIm2col(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  auto w = WindowOf(c);
  if (!w) return RuleError(c, "\"kernel_size\", \"dilation\", \"padding\", \"stride\" must be pairs of positive sizes");
  if (x.dim() != 3 && x.dim() != 4) return RuleError(c, "expected a 3-D or 4-D input, got " + x.ShapeString());
  const int64_t h = x.sizes[x.dim() - 2], wd = x.sizes[x.dim() - 1];
  const int64_t bh = Blocks(*w, 0, h), bw = Blocks(*w, 1, wd);
  if (bh < 1 || bw < 1) return RuleError(c, "the window does not fit the input " + x.ShapeString());
  std::vector<int64_t> s = {x.sizes[x.dim() - 3] * w->kernel[0] * w->kernel[1], bh * bw};
  if (x.dim() == 4) s.insert(s.begin(), x.sizes[0]);
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  return Status::OK();
}

/// col2im: [N, C·kh·kw, L] (or 2-D) → [N, C, oh, ow].
Status InferCol2im(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  auto w = WindowOf(c);
  auto out = c.op.attrs.GetInts("output_size", c.bindings);
  if (!w || !out || out->size() != 2) return RuleError(c, "needs \"output_size\" and window pairs");
  if (x.dim() != 2 && x.dim() != 3) return RuleError(c, "expected a 2-D or 3-D input, got " + x.ShapeString());
  const int64_t k = w->kernel[0] * w->kernel[1];
  const int64_t cols = x.sizes[x.dim() - 2], len = x.sizes[x.dim() - 1];
  if (cols % k != 0 || Blocks(*w, 0, (*out)[0]) * Blocks(*w, 1, (*out)[1]) != len)
    return RuleError(c, "input " + x.ShapeString() + " does not match the window and output_size");
  std::vector<int64_t> s = {cols / k, (*out)[0], (*out)[1]};
  if (x.dim() == 3) s.insert(s.begin(), x.sizes[0]);
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  return Status::OK();
}

/// Tensor.unfold(dim, size, step): a view; dim becomes the window count, a new last dim the window.
Status InferUnfold(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), x.dim());
  const int64_t size = c.op.attrs.GetInt("size", c.bindings).value_or(0);
  const int64_t step = c.op.attrs.GetInt("step", c.bindings).value_or(0);
  if (!d || size < 1 || step < 1 || size > x.sizes[*d]) return RuleError(c, "needs \"dim\", \"size\" (within the dim) and \"step\" ≥ 1");
  TensorMeta m = x;
  m.sizes[*d] = (x.sizes[*d] - size) / step + 1;
  m.strides[*d] = x.strides[*d] * step;
  m.sizes.push_back(size);
  m.strides.push_back(x.strides[*d]);
  o->Alias(std::move(m), 0);
  return Status::OK();
}

/// aten/src/ATen/native/Im2Col.cpp and Col2Im.cpp (CPU) take `input_.contiguous()` first: a copy
/// of a non-contiguous input lives through the kernel. 1.13's Im2ColBackward0 keeps `self`
/// (derivatives.yaml's `self.size(-2)` was not turned into a saved size: `grad_fn._saved_self`);
/// 2.x keeps `self_sym_argsize_minus_1/2` (`Profile::im2col_saves_self`).
void FwdIm2col(const RuleCtx& c, FwdPlan* p) {
  if (!c.in[0]->is_contiguous()) p->AddExtra(Bytes(*c.in[0]), "contiguous input");
  if (c.op.kind == OpKind::kIm2col && c.profile.im2col_saves_self) p->Save(SavedRef::kInput, 0);
}

/// unfold_backward (aten/src/ATen/native/UnfoldBackward.h): zeros of the input's size, then
/// `_make_unfold_backward_iter_over_grad_out`'s int64 arange over the input's dim (freed at once).
void BwdUnfold(const RuleCtx& c, BwdPlan* p) {
  p->GradNew(0);
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), c.in[0]->dim());
  p->FreeTemp(p->Temp(8 * (d ? c.in[0]->sizes[*d] : 1), "unfold_backward index"));
}

constexpr uint32_t kFirst = 1u;

}  // namespace

const std::vector<OpRule> kUnfoldRules = {
    {OpKind::kIm2col, 1, 1, kFirst, InferIm2col, FwdIm2col, nullptr},
    {OpKind::kCol2im, 1, 1, kFirst, InferCol2im, FwdIm2col, nullptr},
    {OpKind::kUnfold, 1, 1, kFirst, InferUnfold, nullptr, BwdUnfold},
};

}  // namespace memsim
