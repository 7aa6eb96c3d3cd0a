// Shape and view ops: views share their input's storage and save nothing (autograd keeps only
// sizes); reshape/flatten/contiguous copy only when a view is impossible; cat/stack/index_select
// make new tensors. Backward: views pass the grad through (reshaped or permuted), narrowing
// views (select, slice, split) and expand build a new input-sized grad.
#include <algorithm>
#include <numeric>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

Status Arity(const RuleCtx& c, size_t n) {
  return c.in.size() == n ? Status::OK()
                          : RuleError(c, "expected " + std::to_string(n) + " input(s)");
}

/// A view of input 0 with |sizes| and |strides|.
void View(const RuleCtx& c, InferOut* o, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  TensorMeta m;
  m.dtype = c.in[0]->dtype;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  o->Alias(std::move(m), 0);
}

/// reshape/view/flatten to |sizes|: a view when strides allow, else (|may_copy|) a copy.
Status ReshapeTo(const RuleCtx& c, InferOut* o, std::vector<int64_t> sizes, bool may_copy) {
  const TensorMeta& x = *c.in[0];
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (infer >= 0) return RuleError(c, "only one dimension can be -1");
      infer = static_cast<int64_t>(i);
    } else if (sizes[i] < 0) {
      return RuleError(c, "negative size " + std::to_string(sizes[i]));
    } else {
      known *= sizes[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return RuleError(c, "cannot infer the -1 dimension for input " + x.ShapeString());
    sizes[infer] = x.numel() / known;
  }
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (n != x.numel())
    return RuleError(c, "shape does not match input " + x.ShapeString() + " (" +
                            std::to_string(x.numel()) + " elements)");
  if (auto st = ViewStrides(x.sizes, x.strides, sizes)) {
    View(c, o, std::move(sizes), std::move(*st));
    return Status::OK();
  }
  if (!may_copy) return RuleError(c, "view is not possible on a non-contiguous input; use reshape");
  o->Fresh(TensorMeta::Contiguous(x.dtype, std::move(sizes)));
  return Status::OK();
}

Status InferReshape(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  auto shape = c.op.attrs.GetInts("shape", c.bindings);
  if (!shape) return RuleError(c, "attribute \"shape\" is missing or has an unbound symbol");
  return ReshapeTo(c, o, *shape, c.op.kind != OpKind::kView);
}

Status InferFlatten(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto s = WrapDim(c.op.attrs.GetInt("start_dim", c.bindings).value_or(0), x.dim());
  auto e = WrapDim(c.op.attrs.GetInt("end_dim", c.bindings).value_or(-1), x.dim());
  if (!s || !e || *s > *e) return RuleError(c, "bad start_dim/end_dim for " + x.ShapeString());
  std::vector<int64_t> sizes;
  if (x.dim() == 0) return ReshapeTo(c, o, {1}, true);
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i > *s && i <= *e) sizes.back() *= x.sizes[i];
    else sizes.push_back(x.sizes[i]);
  }
  return ReshapeTo(c, o, sizes, true);
}

Status InferTranspose(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto a = WrapDim(c.op.attrs.GetInt("dim0", c.bindings).value_or(0), x.dim());
  auto b = WrapDim(c.op.attrs.GetInt("dim1", c.bindings).value_or(1), x.dim());
  if (!a || !b) return RuleError(c, "dim0/dim1 out of range for " + x.ShapeString());
  auto sizes = x.sizes, strides = x.strides;
  if (x.dim() > 0) {
    std::swap(sizes[*a], sizes[*b]);
    std::swap(strides[*a], strides[*b]);
  }
  View(c, o, sizes, strides);
  return Status::OK();
}

Status InferPermute(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto dims = c.op.attrs.GetInts("dims", c.bindings);
  if (!dims || static_cast<int64_t>(dims->size()) != x.dim())
    return RuleError(c, "\"dims\" must list every dimension of " + x.ShapeString());
  std::vector<int64_t> sizes, strides;
  std::vector<bool> seen(x.dim(), false);
  for (int64_t d : *dims) {
    auto w = WrapDim(d, x.dim());
    if (!w || seen[*w]) return RuleError(c, "\"dims\" is not a permutation");
    seen[*w] = true;
    sizes.push_back(x.sizes[*w]);
    strides.push_back(x.strides[*w]);
  }
  View(c, o, sizes, strides);
  return Status::OK();
}

Status InferExpand(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto sizes = c.op.attrs.GetInts("sizes", c.bindings);
  if (!sizes || static_cast<int64_t>(sizes->size()) < x.dim())
    return RuleError(c, "\"sizes\" is missing or shorter than the input's rank");
  size_t lead = sizes->size() - x.sizes.size();
  std::vector<int64_t> strides(sizes->size(), 0);
  for (size_t i = 0; i < sizes->size(); ++i) {
    if (i < lead) {
      if ((*sizes)[i] < 0) return RuleError(c, "-1 is not allowed for a new leading dimension");
      continue;
    }
    int64_t xs = x.sizes[i - lead];
    int64_t& s = (*sizes)[i];
    if (s == -1) s = xs;
    if (s != xs && xs != 1) return RuleError(c, "cannot expand " + x.ShapeString());
    strides[i] = s == xs ? x.strides[i - lead] : 0;
  }
  View(c, o, *sizes, strides);
  return Status::OK();
}

Status InferUnsqueeze(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), x.dim() + 1);
  if (!d) return RuleError(c, "dim out of range");
  auto sizes = x.sizes, strides = x.strides;
  int64_t st = *d < x.dim() ? sizes[*d] * strides[*d] : 1;
  sizes.insert(sizes.begin() + *d, 1);
  strides.insert(strides.begin() + *d, st);
  View(c, o, sizes, strides);
  return Status::OK();
}

Status InferSqueeze(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  std::vector<int64_t> sizes, strides;
  auto dim = c.op.attrs.GetInt("dim", c.bindings);
  std::optional<int64_t> d;
  if (dim) {
    d = WrapDim(*dim, x.dim());
    if (!d) return RuleError(c, "dim out of range");
  }
  for (int64_t i = 0; i < x.dim(); ++i) {
    bool drop = x.sizes[i] == 1 && (!d || *d == i);
    if (!drop) {
      sizes.push_back(x.sizes[i]);
      strides.push_back(x.strides[i]);
    }
  }
  View(c, o, sizes, strides);
  return Status::OK();
}

// `clone`: ATen's clone (aten.clone of a composite, Tensor.clone) copies whatever the layout.
Status InferContiguous(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  if (x.is_contiguous() && !c.op.attrs.GetBool("clone", false)) View(c, o, x.sizes, x.strides);
  else o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  return Status::OK();
}

Status InferSelect(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), x.dim());
  auto idx = c.op.attrs.GetInt("index", c.bindings);
  if (!d || x.dim() == 0 || !idx) return RuleError(c, "bad dim/index for " + x.ShapeString());
  if (*idx < -x.sizes[*d] || *idx >= x.sizes[*d]) return RuleError(c, "index out of range");
  auto sizes = x.sizes, strides = x.strides;
  sizes.erase(sizes.begin() + *d);
  strides.erase(strides.begin() + *d);
  View(c, o, sizes, strides);
  return Status::OK();
}

Status InferSlice(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), x.dim());
  if (!d || x.dim() == 0) return RuleError(c, "dim out of range for " + x.ShapeString());
  int64_t n = x.sizes[*d];
  int64_t start = c.op.attrs.GetInt("start", c.bindings).value_or(0);
  int64_t end = c.op.attrs.GetInt("end", c.bindings).value_or(n);
  int64_t step = c.op.attrs.GetInt("step", c.bindings).value_or(1);
  if (step <= 0) return RuleError(c, "step must be positive");
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  auto sizes = x.sizes, strides = x.strides;
  sizes[*d] = (end - start + step - 1) / step;
  strides[*d] *= step;
  View(c, o, sizes, strides);
  return Status::OK();
}

Status InferSplit(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 1));
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), x.dim());
  if (!d || x.dim() == 0) return RuleError(c, "dim out of range for " + x.ShapeString());
  int64_t n = x.sizes[*d];
  std::vector<int64_t> parts;
  if (c.op.kind == OpKind::kChunk) {
    auto chunks = c.op.attrs.GetInt("chunks", c.bindings);
    if (!chunks || *chunks <= 0) return RuleError(c, "\"chunks\" must be positive");
    int64_t each = (n + *chunks - 1) / *chunks;
    for (int64_t s = 0; s < n; s += each) parts.push_back(std::min(each, n - s));
  } else if (auto sections = c.op.attrs.GetInts("sections", c.bindings)) {
    parts = *sections;
  } else {
    auto each = c.op.attrs.GetInt("split_size", c.bindings);
    if (!each || *each <= 0) return RuleError(c, "\"split_size\" must be positive");
    for (int64_t s = 0; s < n; s += *each) parts.push_back(std::min(*each, n - s));
  }
  const int64_t total = std::accumulate(parts.begin(), parts.end(), int64_t{0});
  if (total != n && c.op.attrs.Has("routing")) {  // Note [Routed token counts]
    const std::string l = std::to_string(c.op.attrs.GetInt("routing", c.bindings).value_or(0));
    return RuleError(c, "the routed token counts routed" + l + "_e* add up to " + std::to_string(total) + " but routing " +
                            l + " routes " + std::to_string(n) + " rows: --set every routed" + l +
                            "_e<i> (adding up to " + std::to_string(n) + ") or none (--moe-routing)");
  }
  if (total != n) return RuleError(c, "split sizes do not add up to " + std::to_string(n));
  if (parts.size() != c.op.outputs.size())
    return RuleError(c, "the split makes " + std::to_string(parts.size()) + " pieces but the op lists " +
                            std::to_string(c.op.outputs.size()) + " outputs");
  for (int64_t p : parts) {
    auto sizes = x.sizes;
    sizes[*d] = p;
    View(c, o, sizes, x.strides);
  }
  return Status::OK();
}

Status InferCat(const RuleCtx& c, InferOut* o) {
  if (c.in.empty()) return RuleError(c, "needs at least one input");
  const TensorMeta& x = *c.in[0];
  bool stack = c.op.kind == OpKind::kStack;
  int64_t rank = x.dim() + (stack ? 1 : 0);
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), rank);
  if (!d) return RuleError(c, "dim out of range");
  std::vector<int64_t> sizes = x.sizes;
  if (stack) sizes.insert(sizes.begin() + *d, 0);
  else if (!sizes.empty()) sizes[*d] = 0;
  for (const TensorMeta* t : c.in) {
    if (t->dim() != x.dim()) return RuleError(c, "inputs have different ranks");
    for (int64_t i = 0; i < x.dim(); ++i) {
      int64_t j = stack && i >= *d ? i + 1 : i;
      if (j != *d && t->sizes[i] != x.sizes[i])
        return RuleError(c, "input sizes differ outside dim: " + t->ShapeString() + " vs " + x.ShapeString());
    }
    sizes[*d] += stack ? 1 : t->sizes[*d];
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

Status InferIndexSelect(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 2));
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), x.dim());
  if (!d || c.in[1]->dim() > 1) return RuleError(c, "bad dim or index rank");
  auto sizes = x.sizes;
  if (!sizes.empty()) sizes[*d] = c.in[1]->numel();
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

Status InferArange(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 0));
  auto end = c.op.attrs.GetInt("end", c.bindings);
  int64_t start = c.op.attrs.GetInt("start", c.bindings).value_or(0);
  if (!end || *end < start) return RuleError(c, "\"end\" is missing or below \"start\"");
  auto dt = ParseDtype(c.op.attrs.GetString("dtype", "int64"));
  if (!dt) return RuleError(c, "unknown dtype");
  o->Fresh(TensorMeta::Contiguous(*dt, {*end - start}));
  return Status::OK();
}

/// full (torch.zeros/ones/full/empty/tensor called in forward): a new contiguous tensor of
/// `shape` and `dtype` (default float32); no autograd node.
Status InferFull(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity(c, 0));
  auto shape = c.op.attrs.GetInts("shape", c.bindings);
  if (!shape) return RuleError(c, "\"shape\" must list the sizes (e.g. [2, 64])");
  auto dt = ParseDtype(c.op.attrs.GetString("dtype", "float32"));
  if (!dt) return RuleError(c, "unknown dtype");
  o->Fresh(TensorMeta::Contiguous(*dt, *shape));
  return Status::OK();
}

// index_select saves the index; its backward scatters into a zero-filled input-sized grad.
void FwdIndexSelect(const RuleCtx& c, FwdPlan* p) { p->Save(SavedRef::kInput, 1); }

void BwdNarrowing(const RuleCtx& c, BwdPlan* p) { p->GradNew(0); }

/// Note [Whole slices]: `x[:, ...]` over a whole dim at step 1 is `self` in eager PyTorch 2.x
/// (at::indexing::impl::applySlice in ATen/TensorIndexing.h returns it when length <= stop): no
/// SliceBackward node, so the grad reaches the input as it is. 1.13 compared stop == length, which
/// Python's `:` (stop INT64_MAX) never met: a SliceBackward0 and its new zero-filled grad, as for
/// any other slice (profile field `whole_slice_is_self`).
void BwdSlice(const RuleCtx& c, BwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(0), x.dim());
  const int64_t n = d ? x.sizes[*d] : 0;
  const int64_t start = c.op.attrs.GetInt("start", c.bindings).value_or(0);
  const int64_t end = c.op.attrs.GetInt("end", c.bindings).value_or(n);
  const int64_t step = c.op.attrs.GetInt("step", c.bindings).value_or(1);
  // (`aten`: a slice ATen's C++ takes, as circular padding does: always a SliceBackward0)
  if (c.profile.whole_slice_is_self && !c.op.attrs.GetBool("aten", false) && d && start == 0 && end >= n && step == 1)
    p->GradAlias(0);
  else p->GradNew(0);
}

void BwdPassThrough(const RuleCtx& c, BwdPlan* p) {
  for (int i = 0; i < c.num_in(); ++i)
    if (c.rg_in(i)) p->GradAlias(i);
}

constexpr uint32_t kFirst = 1u;
constexpr uint32_t kAll = ~0u;

// Grad layouts of the pass-through backwards: the incoming grad with the view undone.
std::optional<TensorMeta> AliasGradTranspose(const Op& op, const Bindings& b, const TensorMeta& grad,
                                             const TensorMeta& in) {
  TensorMeta m = grad;
  auto a = WrapDim(op.attrs.GetInt("dim0", b).value_or(0), in.dim());
  auto c = WrapDim(op.attrs.GetInt("dim1", b).value_or(1), in.dim());
  if (a && c && in.dim() > 0) {
    std::swap(m.sizes[*a], m.sizes[*c]);
    std::swap(m.strides[*a], m.strides[*c]);
  }
  return m;
}

std::optional<TensorMeta> AliasGradPermute(const Op& op, const Bindings& b, const TensorMeta& grad,
                                           const TensorMeta& in) {
  TensorMeta m = grad;
  auto dims = op.attrs.GetInts("dims", b).value_or(std::vector<int64_t>{});
  if (static_cast<int64_t>(dims.size()) != in.dim()) return m;
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = *WrapDim(dims[k], in.dim());
    m.sizes[d] = grad.sizes[k];
    m.strides[d] = grad.strides[k];
  }
  return m;
}

std::optional<TensorMeta> AliasGradCat(const Op&, const Bindings&, const TensorMeta& grad, const TensorMeta& in) {
  TensorMeta m = grad;
  m.sizes = in.sizes;
  return m;
}

std::optional<TensorMeta> AliasGradStack(const Op& op, const Bindings& b, const TensorMeta& grad,
                                         const TensorMeta& in) {
  TensorMeta m = grad;
  auto d = WrapDim(op.attrs.GetInt("dim", b).value_or(0), in.dim() + 1);
  m.sizes = in.sizes;
  m.strides.erase(m.strides.begin() + (d ? *d : 0));
  return m;
}

// ---- Note [Padding and resampling]: pad, upsample, roll, repeat, dtype casts, detach ---------

/// pad(X): `pad` lists (before, after) pairs from the last dim backwards, as F.pad; `mode`
/// constant (ConstantPadNdBackward0 keeps nothing) or reflect / replicate (their backward nodes
/// keep self). Backward: one input-sized grad.
Status InferPad(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  auto pad = c.op.attrs.GetInts("pad", c.bindings);
  std::string mode = c.op.attrs.GetString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "replicate")
    return RuleError(c, "mode must be constant, reflect or replicate (circular is not supported)");
  if (!pad || pad->size() % 2 != 0 || static_cast<int64_t>(pad->size()) > 2 * x.dim())
    return RuleError(c, "\"pad\" needs (before, after) pairs for at most " + std::to_string(x.dim()) + " dims");
  std::vector<int64_t> sizes = x.sizes;
  for (size_t k = 0; k < pad->size() / 2; ++k) {
    int64_t& d = sizes[sizes.size() - 1 - k];
    d += (*pad)[2 * k] + (*pad)[2 * k + 1];
    if (d < 0) return RuleError(c, "padding makes a negative size for " + x.ShapeString());
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

void FwdPad(const RuleCtx& c, FwdPlan* p) {
  if (c.op.attrs.GetString("mode", "constant") != "constant") p->Save(SavedRef::kInput, 0);
}

/// upsample(X [N, C, spatial...]): `size` the output's spatial sizes, `mode` nearest,
/// nearest-exact, linear (1-D), bilinear or bicubic (2-D), trilinear (3-D). The backward nodes
/// keep sizes only; backward: one input-sized grad.
Status InferUpsample(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  auto size = c.op.attrs.GetInts("size", c.bindings);
  std::string mode = c.op.attrs.GetString("mode", "nearest");
  const int64_t nsp = x.dim() - 2;
  const bool ok = mode == "nearest" || mode == "nearest-exact" || (mode == "linear" && nsp == 1) ||
                  ((mode == "bilinear" || mode == "bicubic") && nsp == 2) || (mode == "trilinear" && nsp == 3);
  if (!ok) return RuleError(c, "mode " + mode + " does not apply to " + x.ShapeString() +
                               " (nearest, nearest-exact: 1-3 spatial dims; linear: 1; bilinear, bicubic: 2; trilinear: 3)");
  if (!size || nsp < 1 || nsp > 3 || nsp != static_cast<int64_t>(size->size()))
    return RuleError(c, "\"size\" needs one output size per spatial dim of " + x.ShapeString());
  std::vector<int64_t> sizes = {x.sizes[0], x.sizes[1]};
  sizes.insert(sizes.end(), size->begin(), size->end());
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

/// Points each output element interpolates from per dim (UpSampleKernel.cpp HelperInterp*::interp_size).
int64_t InterpSize(const std::string& mode) {
  if (mode == "bicubic") return 4;
  if (mode == "linear" || mode == "bilinear" || mode == "trilinear") return 2;
  return 1;  // nearest, nearest-exact
}

// Profile::upsample_channels_last_small (aten/src/ATen/native/cpu/UpSampleKernel.cpp
// _use_vectorized_kernel_cond_2d): a contiguous 2-D nearest / bilinear input with more than one
// channel whose output has H + W <= 128 runs the channels-last kernel, which makes a
// channels-last copy of the input and a channels-last output, copied into the result and freed.
// Note [Upsample index buffers]: every other CPU upsample runs upsample_generic_Nd_kernel_impl,
// which after the output makes, per spatial dim, interp_size pairs of an int64 index and a
// weight in the input's dtype, each of the output's size along that dim, freed in order at the end.
void FwdUpsample(const RuleCtx& c, FwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& y = *c.out[0];
  const std::string mode = c.op.attrs.GetString("mode", "nearest");
  const bool small = x.dim() == 4 && x.sizes[1] > 1 && y.sizes[2] + y.sizes[3] <= 128 &&
                     (mode == "nearest" || mode == "bilinear");
  if (c.profile.upsample_channels_last_small && small) {
    p->AllocOutput(0);
    int in_cl = p->AddExtra(Bytes(x), "channels-last input");
    int out_cl = p->AddExtra(Bytes(y), "channels-last output");
    p->FreeExtra(out_cl);
    p->FreeExtra(in_cl);
    return;
  }
  if (!c.profile.upsample_index_buffers) return;
  p->AllocOutput(0);
  std::vector<int> bufs;
  for (int64_t d = 2; d < y.dim(); ++d)
    for (int64_t i = 0; i < InterpSize(mode); ++i) {
      bufs.push_back(p->AddExtra(y.sizes[d] * 8, "upsample indices"));
      bufs.push_back(p->AddExtra(y.sizes[d] * ElementSize(x.dtype), "upsample weights"));
    }
  for (int k : bufs) p->FreeExtra(k);
}

/// roll(X): a new tensor; RollBackward0 keeps the shifts only, its backward rolls the grad back.
Status InferSameNew(const RuleCtx& c, InferOut* o) {
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

/// pixel_shuffle(X [*, C·r², H, W], upscale_factor r) -> [*, C, H·r, W·r]; pixel_unshuffle(X [*, C,
/// H·r, W·r], downscale_factor r) -> [*, C·r², H, W]. Both CPU kernels (PixelShuffle.cpp, 1.13 and
/// 2.x) write a new tensor; derivatives.yaml: each one's grad is the other of the grad, nothing kept
/// (Note [Flip and pixel shuffle]).
Status InferPixelShuffle(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  const bool up = c.op.kind == OpKind::kPixelShuffle;
  const int64_t r = c.op.attrs.GetInt(up ? "upscale_factor" : "downscale_factor", c.bindings).value_or(0);
  if (r <= 0 || x.dim() < 3) return RuleError(c, "needs a positive factor and an input [*, C, H, W]");
  std::vector<int64_t> s = x.sizes;
  const size_t n = s.size();
  if (up) {
    if (s[n - 3] % (r * r) != 0) return RuleError(c, "channels of " + x.ShapeString() + " not divisible by r^2");
    s[n - 3] /= r * r, s[n - 2] *= r, s[n - 1] *= r;
  } else {
    if (s[n - 2] % r != 0 || s[n - 1] % r != 0) return RuleError(c, "H, W of " + x.ShapeString() + " not divisible by r");
    s[n - 3] *= r * r, s[n - 2] /= r, s[n - 1] /= r;
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  return Status::OK();
}

/// channel_shuffle(X [N, C, *], groups g): the CPU kernel (ChanelShuffle.cpp, 2.x) writes a new
/// tensor; derivatives.yaml: `channel_shuffle(grad, C / g)`, nothing kept. 1.13 has no derivative
/// (the exporter refuses it there; Note [Flip and pixel shuffle]).
Status InferChannelShuffle(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  const int64_t g = c.op.attrs.GetInt("groups", c.bindings).value_or(0);
  if (g <= 0 || x.dim() < 3 || x.sizes[1] % g != 0)
    return RuleError(c, "groups must divide the channels of " + x.ShapeString());
  o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  return Status::OK();
}

/// repeat(X): `repeats`, one per output dim (at least X's rank). RepeatBackward0 keeps sizes;
/// its backward sums a view of the grad to X's shape (one new grad).
Status InferRepeat(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  auto reps = c.op.attrs.GetInts("repeats", c.bindings);
  if (!reps || static_cast<int64_t>(reps->size()) < x.dim())
    return RuleError(c, "\"repeats\" needs at least one entry per dim of " + x.ShapeString());
  std::vector<int64_t> sizes = *reps;
  const size_t lead = reps->size() - x.sizes.size();
  for (size_t k = 0; k < x.sizes.size(); ++k) sizes[lead + k] *= x.sizes[k];
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

/// to_dtype(X): `dtype`; _to_copy makes a new tensor, ToCopyBackward0 keeps nothing and casts
/// the grad back (a new grad in X's dtype). to_dtype(X, LIKE): `X.to(LIKE.dtype)` (torchao's
/// `self.bias.to(output.dtype)`), which returns X itself when the dtypes already agree.
Status InferToDtype(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  if (c.num_in() == 2) {
    if (c.in[1]->dtype == x.dtype) View(c, o, x.sizes, x.strides);
    else o->Fresh(TensorMeta::Contiguous(c.in[1]->dtype, x.sizes));
    return Status::OK();
  }
  auto dt = ParseDtype(c.op.attrs.GetString("dtype", ""));
  if (!dt) return RuleError(c, "\"dtype\" must name a dtype (float32, float16, bfloat16, float64, ...)");
  o->Fresh(TensorMeta::Contiguous(*dt, x.sizes));
  return Status::OK();
}

/// The grad of to_dtype: a new one in X's dtype, or the grad itself where `.to` returned X.
void BwdToDtype(const RuleCtx& c, BwdPlan* p) {
  if (c.num_in() == 2 && c.in[1]->dtype == c.in[0]->dtype) p->GradAlias(0);
  else p->GradNew(0);
}

/// detach(X): a view that does not require grad (no node; the row's input is not differentiable).
Status InferDetach(const RuleCtx& c, InferOut* o) {
  o->Alias(*c.in[0], 0);
  return Status::OK();
}

}  // namespace

const std::vector<OpRule> kShapeRules = {
    {OpKind::kView, 1, 1, kFirst, InferReshape, nullptr, BwdPassThrough},
    {OpKind::kReshape, 1, 1, kFirst, InferReshape, nullptr, BwdPassThrough},
    {OpKind::kFlatten, 1, 1, kFirst, InferFlatten, nullptr, BwdPassThrough},
    {OpKind::kTranspose, 1, 1, kFirst, InferTranspose, nullptr, BwdPassThrough, AliasGradTranspose},
    {OpKind::kPermute, 1, 1, kFirst, InferPermute, nullptr, BwdPassThrough, AliasGradPermute},
    {OpKind::kExpand, 1, 1, kFirst, InferExpand, nullptr, BwdNarrowing},
    {OpKind::kUnsqueeze, 1, 1, kFirst, InferUnsqueeze, nullptr, BwdPassThrough},
    {OpKind::kSqueeze, 1, 1, kFirst, InferSqueeze, nullptr, BwdPassThrough},
    {OpKind::kContiguous, 1, 1, kFirst, InferContiguous, nullptr, BwdPassThrough},
    {OpKind::kSelect, 1, 1, kFirst, InferSelect, nullptr, BwdNarrowing},
    {OpKind::kSlice, 1, 1, kFirst, InferSlice, nullptr, BwdSlice},
    {OpKind::kSplit, 1, 1, kFirst, InferSplit, nullptr, BwdNarrowing},
    {OpKind::kChunk, 1, 1, kFirst, InferSplit, nullptr, BwdNarrowing},
    {OpKind::kCat, 1, 1024, kAll, InferCat, nullptr, BwdPassThrough, AliasGradCat},
    {OpKind::kStack, 1, 1024, kAll, InferCat, nullptr, BwdPassThrough, AliasGradStack},
    {OpKind::kIndexSelect, 2, 2, kFirst, InferIndexSelect, FwdIndexSelect, BwdNarrowing},
    {OpKind::kArange, 0, 0, 0, InferArange, nullptr, nullptr},
    {OpKind::kFull, 0, 0, 0, InferFull, nullptr, nullptr},
    {OpKind::kPad, 1, 1, kFirst, InferPad, FwdPad, BwdNarrowing},
    {OpKind::kUpsample, 1, 1, kFirst, InferUpsample, FwdUpsample, BwdNarrowing},
    {OpKind::kRoll, 1, 1, kFirst, InferSameNew, nullptr, BwdNarrowing},
    {OpKind::kFlip, 1, 1, kFirst, InferSameNew, nullptr, BwdNarrowing},
    {OpKind::kPixelShuffle, 1, 1, kFirst, InferPixelShuffle, nullptr, BwdNarrowing},
    {OpKind::kPixelUnshuffle, 1, 1, kFirst, InferPixelShuffle, nullptr, BwdNarrowing},
    {OpKind::kChannelShuffle, 1, 1, kFirst, InferChannelShuffle, nullptr, BwdNarrowing},
    {OpKind::kRepeat, 1, 1, kFirst, InferRepeat, nullptr, BwdNarrowing},
    {OpKind::kToDtype, 1, 2, kFirst, InferToDtype, nullptr, BwdToDtype, AliasGradSame},
    {OpKind::kDetach, 1, 1, 0, InferDetach, nullptr, nullptr},
};

}  // namespace memsim
