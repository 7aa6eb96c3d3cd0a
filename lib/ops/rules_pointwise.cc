// Elementwise ops, softmax, dropout, reductions and losses. What each saves follows
// derivatives.yaml (see Note [Saved tensors] and Note [In-place activations] in docs/op-rules.md):
// outputs for relu/sigmoid/tanh/softmax; inputs for gelu/silu/leaky_relu/hardtanh/hardswish/elu/
// softplus/mish/the shrinks; in-place variants whose formula needs the pre-mutation input save a
// clone (Note [More activations]).
#include "lib/ops/autocast_lists.h"
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

Status InferUnary(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  if (c.inplace()) {
    o->Alias(x, 0);
  } else {
    o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  }
  return Status::OK();
}

Status InferSoftmax(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  if (!WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(-1), c.in[0]->dim()))
    return RuleError(c, "dim out of range for " + c.in[0]->ShapeString());
  return InferUnary(c, o);
}

/// Which activation keeps what: its output (result), or its input (self); and whether the
/// in-place variant has its own formula on the result (no copy) or must clone the input.
enum class Keeps { kResult, kSelf };
struct ActivationRow {
  OpKind kind;
  Keeps keeps;
  bool inplace_needs_clone;
};
constexpr ActivationRow kActivations[] = {
    {OpKind::kRelu, Keeps::kResult, false},      {OpKind::kSigmoid, Keeps::kResult, false},
    {OpKind::kTanh, Keeps::kResult, false},      {OpKind::kLeakyRelu, Keeps::kSelf, false},
    {OpKind::kRelu6, Keeps::kSelf, true},        {OpKind::kGelu, Keeps::kSelf, true},
    {OpKind::kSilu, Keeps::kSelf, true},         {OpKind::kHardswish, Keeps::kSelf, true},
    {OpKind::kHardsigmoid, Keeps::kSelf, true},  {OpKind::kSoftmax, Keeps::kResult, false},
    {OpKind::kLogSoftmax, Keeps::kResult, false},
    // Note [More activations]: elu_ (selu_, celu_) has its own entry on the result; hardtanh_,
    // softplus, mish and the shrinks have none, so the in-place form clones self.
    {OpKind::kElu, Keeps::kSelf, false},         {OpKind::kHardtanh, Keeps::kSelf, true},
    {OpKind::kSoftplus, Keeps::kSelf, true},     {OpKind::kMish, Keeps::kSelf, true},
    {OpKind::kHardshrink, Keeps::kSelf, true},   {OpKind::kSoftshrink, Keeps::kSelf, true},
    // threshold: threshold_backward(grad, self, threshold); threshold_ keeps original self.
    {OpKind::kThreshold, Keeps::kSelf, true},
};

const ActivationRow& Activation(OpKind k) {
  for (const ActivationRow& r : kActivations)
    if (r.kind == k) return r;
  return kActivations[0];
}

void FwdActivation(const RuleCtx& c, FwdPlan* p) {
  const ActivationRow& r = Activation(c.op.kind);
  if (r.keeps == Keeps::kResult) {
    p->Save(SavedRef::kOutput, 0);
  } else if (c.inplace() && r.inplace_needs_clone) {
    // leaky_relu_ has its own entry on the result; the others clone self before mutating.
    p->Save(SavedRef::kExtra, p->AddExtra(Bytes(*c.in[0]), "pre-inplace clone"));
  } else if (c.inplace()) {
    p->Save(SavedRef::kOutput, 0);
  } else {
    p->Save(SavedRef::kInput, 0);
  }
}

// Note [More activations]: F.rrelu / nn.RReLU. at::rrelu makes its noise with empty_like(self)
// and calls rrelu_with_noise (rrelu_with_noise_ in place), whose node saves the noise and self
// (the result in place); its backward (rrelu_with_noise_backward: grad * noise in training,
// leaky_relu_backward in eval) makes a new grad. Checked: the op probe rrelu_mlp (2.13, 1.13).
void FwdRrelu(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kExtra, p->AddExtra(Bytes(*c.in[0]), "rrelu noise"));
  if (c.inplace()) return p->Save(SavedRef::kOutput, 0);
  p->AllocOutput(0);
  p->Save(SavedRef::kInput, 0);
}

bool DropoutActive(const RuleCtx& c) {
  double prob = c.op.attrs.GetFloat("p", 0.5);
  return c.op.attrs.GetBool("training", true) && prob > 0 && c.in[0]->numel() > 0;
}

Status InferDropout(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  double prob = c.op.attrs.GetFloat("p", 0.5);
  if (prob < 0 || prob > 1) return RuleError(c, "p must be in [0, 1]");
  // Eval mode or p = 0: F.dropout returns its input.
  if (!DropoutActive(c) || c.inplace()) o->Alias(*c.in[0], 0);
  else o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

/// A transient wrapped number of an ATen `.Scalar` overload called from C++ (`noise.div_(1 - p)`,
/// `noise.add(-1)`, `norm == 0`): the 8-byte double (Profile::scalar_operand_bytes; 0 where it
/// stays on the host) and its copy in the tensor's dtype, both freed at once — under 1.13 as
/// under 2.13 (their CPU traces; unlike a Python number operand of mul.Tensor, whose cast is
/// 2.13's only, Profile::scalar_operand_cast). With |out_bytes| > 0, that output is made between
/// them, as an out-of-place scalar op does.
int TransientScalar(const RuleCtx& c, FwdPlan* p, int64_t out_bytes = 0, const char* what = "") {
  if (c.profile.scalar_operand_bytes == 0) return out_bytes > 0 ? p->AddExtra(out_bytes, what) : -1;
  int k = p->AddExtra(c.profile.scalar_operand_bytes, "wrapped scalar");
  int cast = p->AddExtra(ElementSize(c.in[0]->dtype), "wrapped scalar, cast");
  int out = out_bytes > 0 ? p->AddExtra(out_bytes, what) : -1;
  p->FreeExtra(cast);
  p->FreeExtra(k);
  return out;
}

/// Note [Channel and alpha dropout]: the noise of a `feature` dropout is [N, C, 1, ...] (one draw
/// per channel), of a plain one input-sized.
int64_t DropoutNoiseBytes(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  if (!c.op.attrs.GetBool("feature", false) || x.dim() < 2) return x.bytes();
  return x.sizes[0] * x.sizes[1] * ElementSize(x.dtype);
}

/// Dropout.cpp _dropout_impl<feature, alpha> (every device: only plain dropout has a fused
/// kernel): noise = new_empty(...).bernoulli_(1 - p); plain or feature: noise.div_(1 - p);
/// alpha: b = noise.add(-1).mul_(αa).add_(αap), noise.mul_(a); then input * noise (its node
/// keeps the noise) and, for alpha, .add_(b); b dies with the forward.
void FwdNoiseDropout(const RuleCtx& c, FwdPlan* p) {
  const int64_t nb = DropoutNoiseBytes(c);
  int k = p->AddExtra(nb, "dropout noise");
  int b = -1;
  if (c.op.attrs.GetBool("alpha", false)) {
    b = TransientScalar(c, p, nb, "alpha dropout shift b");
    for (int i = 0; i < 3; ++i) TransientScalar(c, p);  // mul_(αa), add_(αap), noise.mul_(a)
  } else {
    TransientScalar(c, p);  // div_(1 - p)
  }
  p->SaveNow(SavedRef::kExtra, k);
  if (!c.inplace()) p->AllocOutput(0);
  if (b >= 0) p->FreeExtra(b);
}

void FwdDropout(const RuleCtx& c, FwdPlan* p) {
  if (!DropoutActive(c)) return;
  if (c.op.attrs.GetBool("feature", false) || c.op.attrs.GetBool("alpha", false)) return FwdNoiseDropout(c, p);
  const TensorMeta& x = *c.in[0];
  int k;
  if (c.profile.dropout_keeps_noise || c.inplace()) {
    // _dropout / dropout_: noise = bernoulli(1-p) / (1-p) in the input dtype, then x * noise
    // (whose node saves the noise before its kernel).
    k = p->AddExtra(x.bytes(), "dropout noise");
    p->SaveNow(SavedRef::kExtra, k);
    if (!c.inplace()) p->AllocOutput(0);
  } else {
    // native_dropout: output and a bool mask.
    p->AllocOutput(0);
    k = p->AddExtra(x.numel(), "dropout mask");
    p->Save(SavedRef::kExtra, k);
  }
}

// Eval mode or p = 0: F.dropout returns its input itself, so autograd has no node there and
// the grad passes through unchanged (aten/src/ATen/native/Dropout.cpp _dropout_impl: `if (p == 0
// || !train || input.numel() == 0) return input;`). Active: grad · noise (or the mask), new.
void BwdDropout(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  if (DropoutActive(c)) p->GradNew(0);
  else p->GradAlias(0);
}

// Arithmetic. `scalar` (no second input) saves nothing.
/// torch.result_type of two tensor operands: a floating one wins over an integer one; two
/// floating ones give the wider, except that a 0-dim operand defers to a dimensioned one.
Dtype BinaryResultType(const TensorMeta& a, const TensorMeta& b) {
  if (!IsFloating(a.dtype)) return IsFloating(b.dtype) ? b.dtype : a.dtype;
  if (!IsFloating(b.dtype) || a.dtype == b.dtype) return a.dtype;
  if ((a.dim() == 0) != (b.dim() == 0)) return a.dim() == 0 ? b.dtype : a.dtype;
  return PromoteFloating(a.dtype, b.dtype);
}

/// The layout TensorIterator gives a new output (aten/src/ATen/TensorIterator.cpp): the
/// dimensions sorted by the inputs' strides (reorder_dimensions: the first input whose strides
/// of two dims differ, neither broadcast, decides; equal strides keep the larger size outer),
/// then contiguous in that order (contiguous inputs give the identity order: a contiguous
/// output, as fast_set_up does). Note [Elementwise output layout].
std::optional<TensorMeta> IteratorOutput(Dtype dt, const std::vector<int64_t>& sizes,
                                         const std::vector<const TensorMeta*>& in) {
  std::optional<TensorMeta> out = TensorMeta::Contiguous(dt, sizes);
  const int64_t n = static_cast<int64_t>(sizes.size());
  if (!out || n < 2) return out;
  // each input's strides broadcast to |sizes| (size-1 and missing dims: stride 0)
  std::vector<std::vector<int64_t>> st;
  for (const TensorMeta* m : in) {
    std::vector<int64_t> s(n, 0);
    const int64_t off = n - m->dim();
    for (int64_t d = 0; d < m->dim(); ++d)
      s[off + d] = (m->sizes[d] == 1 && sizes[off + d] != 1) ? 0 : m->strides[d];
    st.push_back(std::move(s));
  }
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (const auto& s : st) {
      if (s[d0] == 0 || s[d1] == 0) continue;
      if (s[d0] < s[d1]) return -1;
      if (s[d0] > s[d1]) return 1;
      if (sizes[d0] > sizes[d1]) return 1;
    }
    return 0;
  };
  std::vector<int64_t> perm(n);  // perm[0]: the fastest-moving dim
  for (int64_t i = 0; i < n; ++i) perm[i] = n - 1 - i;
  for (int64_t i = 1; i < n; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      int cmp = should_swap(perm[d0], perm[d1]);
      if (cmp > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (cmp < 0) {
        break;
      }
    }
  }
  int64_t stride = 1;
  for (int64_t i = 0; i < n; ++i) {
    out->strides[perm[i]] = stride;
    stride *= sizes[perm[i]];
  }
  return out;
}

/// Profile::mixed_dtype_input_copies: the CPU TensorIterator copies an operand whose dtype
/// differs from the result's before it allocates the output, and frees it when the op ends.
bool MixedDtypeCopies(const RuleCtx& c, FwdPlan* p) {
  if (!c.profile.mixed_dtype_input_copies || c.in.size() != 2) return false;
  if (!IsFloating(c.in[0]->dtype) || !IsFloating(c.in[1]->dtype) || c.in[0]->dtype == c.in[1]->dtype) return false;
  Dtype to = BinaryResultType(*c.in[0], *c.in[1]);
  std::vector<int> copies;
  for (const TensorMeta* m : c.in)
    if (m->dtype != to) copies.push_back(p->AddExtra(m->numel() * ElementSize(to), "mixed-dtype input copy"));
  if (!c.inplace()) p->AllocOutput(0);
  for (int k : copies) p->FreeExtra(k);
  return true;
}

Status InferBinary(const RuleCtx& c, InferOut* o) {
  if (c.in.empty() || c.in.size() > 2) return RuleError(c, "expected 1 or 2 inputs");
  const TensorMeta& a = *c.in[0];
  std::vector<int64_t> sizes = a.sizes;
  Dtype dt = a.dtype;
  if (c.in.size() == 2) {
    auto b = BroadcastShapes(a.sizes, c.in[1]->sizes);
    if (!b) return RuleError(c, "cannot broadcast " + a.ShapeString() + " with " + c.in[1]->ShapeString());
    sizes = *b;
    dt = BinaryResultType(a, *c.in[1]);
  } else if (!c.op.attrs.Has("scalar")) {
    return RuleError(c, "needs a second input or a \"scalar\" attribute");
  }
  if (c.inplace()) {
    if (sizes != a.sizes) return RuleError(c, "in-place result would change the shape of the first input");
    o->Alias(a, 0);
  } else {
    o->Fresh(IteratorOutput(dt, sizes, c.in));
  }
  return Status::OK();
}

/// The wrapped-number tensor of a Python number operand (Profile::scalar_operand_bytes),
/// allocated before the output; -1 when there is none. An op marked `scalar_overload` (an ATen
/// `.Scalar` overload a composite calls from C++, Note [Scalar overloads]) wraps its number
/// inside the call: the double and its cast (under 1.13 as under 2.13) die when it returns, and
/// the node keeps no tensor of it (mul.Scalar saves the Scalar itself).
int ScalarOperand(const RuleCtx& c, FwdPlan* p) {
  if (c.in.size() != 1 || c.profile.scalar_operand_bytes == 0) return -1;
  const bool overload = c.op.attrs.GetBool("scalar_overload", false);
  int k = p->AddExtra(c.profile.scalar_operand_bytes, "wrapped scalar");
  p->extras[k].wrapped_number = !overload;
  int cast = c.profile.scalar_operand_cast || overload ? p->AddExtra(ElementSize(c.in[0]->dtype), "wrapped scalar, cast") : -1;
  if (!c.inplace()) p->AllocOutput(0);
  if (cast >= 0) p->FreeExtra(cast);
  if (!overload) return k;
  p->FreeExtra(k);
  return -1;
}

void FwdAddSub(const RuleCtx& c, FwdPlan* p) {  // transient
  ScalarOperand(c, p);
  MixedDtypeCopies(c, p);
}

void FwdMul(const RuleCtx& c, FwdPlan* p) {
  if (int k = ScalarOperand(c, p); k >= 0 && c.rg_in(0) && c.profile.scalar_operand_saved) p->Save(SavedRef::kExtra, k);
  if (c.in.size() < 2) return;
  MixedDtypeCopies(c, p);
  if (c.rg_in(1)) {
    if (c.inplace()) p->Save(SavedRef::kExtra, p->AddExtra(Bytes(*c.in[0]), "pre-inplace clone"));
    else p->Save(SavedRef::kInput, 0);
  }
  if (c.rg_in(0)) p->Save(SavedRef::kInput, 1);
}

void FwdDiv(const RuleCtx& c, FwdPlan* p) {
  if (int k = ScalarOperand(c, p); k >= 0 && c.rg_in(0) && c.profile.scalar_operand_saved) p->Save(SavedRef::kExtra, k);
  if (c.in.size() < 2) return;
  MixedDtypeCopies(c, p);
  p->Save(SavedRef::kInput, 1);
  if (c.rg_in(1)) p->Save(SavedRef::kInput, 0);
}

void BwdAddSub(const RuleCtx& c, BwdPlan* p) {
  // `number - X` (rsub.Scalar, Python's 2 - x): derivatives.yaml `self: maybe_multiply(-grad,
  // alpha)`, a new tensor.
  if (c.rg_in(0) && c.op.attrs.GetBool("reverse", false)) p->GradNew(0);
  else if (c.rg_in(0)) p->GradAlias(0);
  // sub's second grad is -grad, a new tensor; add's is the grad itself (maybe * alpha).
  double alpha = c.op.attrs.GetFloat("alpha", 1.0);
  if (c.num_in() > 1 && c.rg_in(1)) {
    if (c.op.kind == OpKind::kSub || alpha != 1.0) p->GradNew(1);
    else p->GradAlias(1);
  }
}

/// The grad of input |i| as the formula makes it: at the output's shape when the input was
/// broadcast (validate_outputs then sums it to the input's shape, Note [Broadcast grads]).
void GradAtOutputShape(const RuleCtx& c, BwdPlan* p, int i) {
  if (c.out.empty() || c.in[i]->sizes == c.out[0]->sizes) return p->GradNew(i);
  p->GradNewLike(i, *TensorMeta::Contiguous(c.out[0]->dtype, c.out[0]->sizes));
}

// mul: self: grad * other, other: grad * self (derivatives.yaml mul_tensor_backward); div: self:
// grad / other, other: -grad * ((self / other) / other) (div_tensor_other_backward), whose three
// output-shaped temporaries live until the product is made. The generated MulBackward0 /
// DivBackward0 compute the grad of other first.
void BwdScaled(const RuleCtx& c, BwdPlan* p) {
  if (c.num_in() > 1 && c.rg_in(1)) {
    std::vector<int> temps;
    if (c.op.kind == OpKind::kDiv && !c.out.empty()) {
      for (std::string_view label : {"self / other", "(self / other) / other", "-grad"})
        temps.push_back(p->Temp(Bytes(*c.out[0]), label));
    }
    GradAtOutputShape(c, p, 1);
    for (auto t = temps.rbegin(); t != temps.rend(); ++t) p->FreeTemp(*t);  // destroyed last first
  }
  if (c.rg_in(0)) GradAtOutputShape(c, p, 0);
}

// Reductions.
Status InferReduce(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  bool keep = c.op.attrs.GetBool("keepdim", false);
  auto dims = c.op.attrs.GetInts("dim", c.bindings);
  std::vector<bool> reduce(x.dim(), !dims.has_value());
  if (dims)
    for (int64_t d : *dims) {
      auto w = WrapDim(d, x.dim());
      if (!w) return RuleError(c, "dim out of range for " + x.ShapeString());
      if (x.dim() > 0) reduce[*w] = true;
    }
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (!reduce[i]) sizes.push_back(x.sizes[i]);
    else if (keep) sizes.push_back(1);
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

// Profile::mean_keeps_input (1.13): mean.dim's backward reads self; mean.default's (no `dim`,
// `grad.expand(self.sizes()) / self.numel()`) keeps sizes only (the 1.13 traces of nll_loss_mlp:
// gaussian_nll_loss's and poisson_nll_loss's `loss.mean()` free their input).
void FwdMean(const RuleCtx& c, FwdPlan* p) {
  if (c.profile.mean_keeps_input && c.op.attrs.GetInts("dim", c.bindings).has_value()) p->Save(SavedRef::kInput, 0);
}

// torch.linalg.vector_norm (derivatives.yaml linalg_vector_norm: linalg_vector_norm_backward(grad,
// self, ord, result, dim, keepdim)) keeps its input and its result; the CPU kernel writes the
// reduction straight into the fresh result (Note [Vector norms]).
void FwdVectorNorm(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kOutput, 0);
}

/// Note [Vector norms]: FunctionsManual.cpp norm_backward. ord 2: grad * (self / norm)
/// .masked_fill_(norm == 0, 0) — an input-sized quotient, the wrapped 0 and a bool mask of the
/// norm's size, then the grad; the temporaries die with the statement. ord 1: self.sgn() * grad.
/// Other orders: the grad alone (their pow/abs temporaries are not derived).
void BwdVectorNorm(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const double ord = c.op.attrs.GetFloat("ord", 2.0);
  const int64_t xs = Bytes(*c.in[0]);
  if (ord == 2.0) {
    int q = p->Temp(xs, "self / norm");
    int w = c.profile.scalar_operand_bytes > 0 ? p->Temp(c.profile.scalar_operand_bytes, "wrapped 0") : -1;
    int wc = w >= 0 ? p->Temp(ElementSize(c.out[0]->dtype), "wrapped 0, cast") : -1;
    int mask = p->Temp(c.out[0]->numel(), "norm == 0 mask");
    if (w >= 0) p->FreeTemp(w);
    if (wc >= 0) p->FreeTemp(wc);
    p->GradNew(0);
    p->FreeTemp(mask);
    p->FreeTemp(q);
  } else if (ord == 1.0) {
    int sgn = p->Temp(xs, "self.sgn()");
    p->GradNew(0);
    p->FreeTemp(sgn);
  } else {
    p->GradNew(0);
  }
}

void BwdSum(const RuleCtx& c, BwdPlan* p) { p->GradAlias(0); }  // grad.expand(sizes): a view

std::optional<TensorMeta> AliasGradExpand(const Op&, const Bindings&, const TensorMeta& grad, const TensorMeta& in) {
  TensorMeta m = grad;
  m.sizes = in.sizes;
  m.strides.assign(in.sizes.size(), 0);  // grad.expand(sizes)
  return m;
}

/// cross_entropy of fp16/bf16 logits under CUDA autocast (CastPolicy::kInnerNllFp32): the
/// log_softmax in the logits' dtype, nll_loss on an fp32 copy of it, an fp32 loss.
bool InnerNllFp32(const RuleCtx& c) {
  const Dtype t = c.in[0]->dtype;
  return c.autocast && (t == Dtype::kFloat16 || t == Dtype::kBFloat16) &&
         AutocastPolicy(c.profile.autocast_table, c.op.kind) == CastPolicy::kInnerNllFp32;
}

// Losses: a scalar (reduction mean/sum) or per-element output.
Status InferLoss(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 2) return RuleError(c, "expected (input, target)");
  const TensorMeta& x = *c.in[0];
  const TensorMeta& t = *c.in[1];
  std::string red = c.op.attrs.GetString("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none") return RuleError(c, "unknown reduction " + red);
  if (c.op.kind == OpKind::kMseLoss || c.op.kind == OpKind::kBceWithLogits || c.op.kind == OpKind::kSmoothL1Loss ||
      c.op.kind == OpKind::kHuberLoss || c.op.kind == OpKind::kBinaryCrossEntropy) {
    if (!BroadcastShapes(x.sizes, t.sizes)) return RuleError(c, "target shape does not match");
    o->Fresh(TensorMeta::Contiguous(x.dtype, red == "none" ? x.sizes : std::vector<int64_t>{}));
    return Status::OK();
  }
  if (x.dim() < 1) return RuleError(c, "input must have a class dimension");
  bool probs = t.sizes == x.sizes && IsFloating(t.dtype);
  if (!probs) {
    std::vector<int64_t> expect = x.sizes;
    if (x.dim() >= 2) expect.erase(expect.begin() + 1);
    else expect.clear();
    if (t.sizes != expect) return RuleError(c, "target " + t.ShapeString() + " does not match input " + x.ShapeString());
  }
  std::vector<int64_t> sizes;
  if (red == "none") {
    sizes = x.sizes;
    if (x.dim() >= 2) sizes.erase(sizes.begin() + 1);
    else sizes.clear();
  }
  o->Fresh(TensorMeta::Contiguous(InnerNllFp32(c) ? Dtype::kFloat32 : x.dtype, sizes));
  return Status::OK();
}

// cross_entropy = log_softmax (LogSoftmaxBackward saves its result L) then nll_loss
// (NllLossBackward saves L as self and the target before its kernel, then a 0-dim total_weight):
// saved = [L, L, target, total_weight], one entry per SavedVariable.
// Under CUDA autocast (InnerNllFp32) nll_loss saves an fp32 copy of L instead (ToCopyBackward
// saves nothing), and its output and total_weight are fp32.
void FwdCrossEntropy(const RuleCtx& c, FwdPlan* p) {
  const bool up = InnerNllFp32(c);
  int L = p->AddExtra(Bytes(*c.in[0]), "log_softmax");
  p->SaveNow(SavedRef::kExtra, L);
  const int nll_in = up ? p->AddExtra(c.in[0]->numel() * 4, "log_softmax in fp32 (nll_loss autocast)") : L;
  p->SaveNow(SavedRef::kExtra, nll_in);
  p->SaveNow(SavedRef::kInput, 1);
  p->AllocOutput(0);
  int tw = p->AddExtra(up ? 4 : ElementSize(c.in[0]->dtype), "total_weight");
  p->Save(SavedRef::kExtra, tw);
}

// NllLossBackward: a zero-filled [N, C] grad, then it releases its saved L (or L's fp32 copy),
// target and total_weight; [ToCopyBackward: the grad cast back to the logits' dtype;] then
// LogSoftmaxBackward: the input grad.
void BwdCrossEntropy(const RuleCtx& c, BwdPlan* p) {
  const bool up = InnerNllFp32(c);
  int nll_grad = p->Temp(up ? c.in[0]->numel() * 4 : Bytes(*c.in[0]), "nll_loss grad");
  for (int k = 1; k <= 3; ++k) p->ReleaseSaved(k);
  if (up) {
    int back = p->Temp(Bytes(*c.in[0]), "nll_loss grad, cast back");
    p->FreeTemp(nll_grad);
    nll_grad = back;
  }
  p->GradNew(0);
  p->FreeTemp(nll_grad);
}

void FwdNllLoss(const RuleCtx& c, FwdPlan* p) {
  p->AllocOutput(0);
  p->Save(SavedRef::kExtra, p->AddExtra(ElementSize(c.in[0]->dtype), "total_weight"));
  p->Save(SavedRef::kInput, 0);
}

void FwdMseLoss(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
}

// binary_cross_entropy_with_logits(X, target), mean: X and target saved. Forward
// (aten/src/ATen/native/Loss.cpp), Profile::bce_logits_log_sigmoid: 2.x takes log_sigmoid(X) (its
// CPU buffer freed at once), then (1 - target).mul_(X).sub_(log_sigmoid) and the mean; 1.13 builds
// max_val = (-X).clamp_min_(0) and (1 - target).mul_(X).add_(max_val).add_((-max_val).exp_()
// .add_((-X - max_val).exp_()).log_()), whose three temporaries die with the statement. Backward
// (FunctionsManual.cpp binary_cross_entropy_with_logits_backward): (sigmoid(X) - target) * grad.
void FwdBceWithLogits(const RuleCtx& c, FwdPlan* p) {
  const int64_t n = Bytes(*c.in[0]);
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
  if (c.op.attrs.GetString("reduction", "mean") == "none") return;
  std::vector<int> locals;  // freed after the mean, last first
  if (c.profile.bce_logits_log_sigmoid) {
    locals.push_back(p->AddExtra(n, "log_sigmoid(input)"));
    if (c.profile.log_sigmoid_buffer) p->FreeExtra(p->AddExtra(n, "log_sigmoid buffer"));
    locals.push_back(p->AddExtra(n, "elementwise loss"));
  } else {
    locals.push_back(p->AddExtra(n, "max_val"));
    locals.push_back(p->AddExtra(n, "elementwise loss"));
    int t[3];
    for (int& k : t) k = p->AddExtra(n, "log-sum-exp temporary");
    for (int k = 2; k >= 0; --k) p->FreeExtra(t[k]);
  }
  p->AllocOutput(0);
  for (auto k = locals.rbegin(); k != locals.rend(); ++k) p->FreeExtra(*k);
}

void BwdBceWithLogits(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  int sig = p->Temp(Bytes(*c.in[0]), "sigmoid(input)");
  int diff = p->Temp(Bytes(*c.in[0]), "sigmoid(input) - target");
  p->FreeTemp(sig);
  p->GradNew(0);
  p->FreeTemp(diff);
}

// smooth_l1_loss / huber_loss (X, target), X and target saved; backward: one grad (zeros_like
// then the _backward_out kernel). smooth_l1 is a structured kernel (aten/src/ATen/native/Loss.cpp
// TORCH_META_FUNC(smooth_l1_loss)): its meta builds a binary TensorIterator, so the result is
// allocated X-sized, then resize_({})d for mean/sum, keeping that storage; the impl's own iterator
// writes the elementwise loss into a temporary that mean_out reads. huber_loss allocates the
// elementwise loss (empty_like) and returns its reduction: a 0-dim result.
void FwdSmoothL1(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
  if (c.op.attrs.GetString("reduction", "mean") == "none") return;
  const int64_t n = Bytes(*c.in[0]);
  const bool structured = c.op.kind == OpKind::kSmoothL1Loss;
  if (structured) p->AllocOutput(0, n);
  int loss = p->AddExtra(n, "elementwise loss");
  if (!structured) p->AllocOutput(0);
  p->FreeExtra(loss);
}

// Note [Binary cross entropy]: binary_cross_entropy(X, target) keeps X and target
// (derivatives.yaml). aten/src/ATen/native/Loss.cpp binary_cross_entropy_cpu: loss =
// empty_like(X), the elementwise kernel into it, then for mean/sum apply_loss_reduction (the
// reduced 0-dim tensor; mean's sum_out(...).div_(numel) with its transient wrapped number) and
// loss.resize_as_(reduced).copy_(reduced): the 0-dim result keeps the X-sized storage. Backward
// (binary_cross_entropy_backward_cpu): grad_input = empty_like(X), the kernel, and for mean
// grad_input.div_(numel).
void FwdBce(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
  const std::string red = c.op.attrs.GetString("reduction", "mean");
  if (red == "none") return;
  p->AllocOutput(0, Bytes(*c.in[0]));
  int reduced = p->AddExtra(ElementSize(c.in[0]->dtype), "reduced loss");
  if (red == "mean") TransientScalar(c, p);
  p->FreeExtra(reduced);
}

void BwdBce(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  p->GradNew(0);
  if (c.op.attrs.GetString("reduction", "mean") != "mean" || c.profile.scalar_operand_bytes == 0) return;
  int w = p->Temp(c.profile.scalar_operand_bytes, "wrapped numel");
  int wc = p->Temp(ElementSize(c.in[0]->dtype), "wrapped numel, cast");
  p->FreeTemp(wc);
  p->FreeTemp(w);
}

// masked_fill(X, mask): keeps only the (bool) mask; its backward masks the grad (a new tensor).
Status InferMaskedFill(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 2) return RuleError(c, "expected (input, mask)");
  auto b = BroadcastShapes(c.in[0]->sizes, c.in[1]->sizes);
  if (!b || *b != c.in[0]->sizes) return RuleError(c, "mask " + c.in[1]->ShapeString() + " does not broadcast to " + c.in[0]->ShapeString());
  if (c.inplace()) o->Alias(*c.in[0], 0);
  else o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

void FwdMaskedFill(const RuleCtx& c, FwdPlan* p) { p->Save(SavedRef::kInput, 1); }

// torchvision.ops.stochastic_depth: X * noise / (1-p), noise one value per sample ("row") or
// one for the batch; MulBackward keeps the small noise tensor.
bool StochasticDepthActive(const RuleCtx& c) {
  double prob = c.op.attrs.GetFloat("p", 0.0);
  return c.op.attrs.GetBool("training", true) && prob > 0 && prob < 1;
}

Status InferStochasticDepth(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  std::string mode = c.op.attrs.GetString("mode", "row");
  if (mode != "row" && mode != "batch") return RuleError(c, "mode must be \"row\" or \"batch\"");
  if (!StochasticDepthActive(c)) o->Alias(*c.in[0], 0);
  else o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

void FwdStochasticDepth(const RuleCtx& c, FwdPlan* p) {
  if (!StochasticDepthActive(c)) return;
  const TensorMeta& x = *c.in[0];
  int64_t rows = c.op.attrs.GetString("mode", "row") == "row" && x.dim() > 0 ? x.sizes[0] : 1;
  int k = p->AddExtra(rows * ElementSize(x.dtype), "stochastic depth noise");
  p->AllocOutput(0);
  p->Save(SavedRef::kExtra, k);
}

/// TransientScalar in a backward: the wrapped number and its cast (freed at once), with an
/// |out_bytes| result made between them (`grad / 2`); returns that result's temporary (-1: none).
int TransientScalarTemp(const RuleCtx& c, BwdPlan* p, Dtype dt, int64_t out_bytes, std::string_view what) {
  if (c.profile.scalar_operand_bytes == 0) return out_bytes > 0 ? p->Temp(out_bytes, what) : -1;
  int k = p->Temp(c.profile.scalar_operand_bytes, "wrapped scalar");
  int cast = p->Temp(ElementSize(dt), "wrapped scalar, cast");
  int out = out_bytes > 0 ? p->Temp(out_bytes, what) : -1;
  p->FreeTemp(cast);
  p->FreeTemp(k);
  return out;
}

// Note [Elementwise maximum]: maximum / minimum keep self and other; MaximumBackward0 computes
// other's grad first, then self's, each `at::where(self == other, grad / 2, grad).masked_fill_(self
// > other, 0)` (< for self; swapped for minimum): grad / 2 (a wrapped number, output-sized), the
// bool `self == other`, the where (the grad, at the output's shape), the bool comparison for
// masked_fill_; the temporaries die at the statement's end.
void FwdSaveBoth(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
}

void BwdMaximum(const RuleCtx& c, BwdPlan* p) {
  const TensorMeta& y = *c.out[0];
  for (int i : {1, 0}) {
    if (!c.rg_in(i)) continue;
    int half = TransientScalarTemp(c, p, y.dtype, Bytes(y), "grad / 2");
    int eq = p->Temp(y.numel(), "self == other");
    GradAtOutputShape(c, p, i);
    int cmp = p->Temp(y.numel(), "self > other");
    p->FreeTemp(cmp);
    p->FreeTemp(eq);
    p->FreeTemp(half);
  }
}

// Note [Variance]: var.correction keeps self. A CPU reduction to one element of float32/float64
// (ReduceOps.cpp std_var_out: std_var_all_cpu) takes `self.mean().item()` first (its 0-dim result
// and mean's wrapped divisor); other reductions write the result alone. var_backward
// (FunctionsManual.cpp): `(2 / dof) * grad * (self - self.mean(dim, true))`, the right factor first.
bool VarAllCpu(const RuleCtx& c) {
  const Dtype dt = c.in[0]->dtype;
  return !c.profile.cuda && c.out[0]->numel() <= 1 && (dt == Dtype::kFloat32 || dt == Dtype::kFloat64);
}

void FwdVar(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  if (!VarAllCpu(c)) return;
  p->AllocOutput(0);
  int mean = p->AddExtra(ElementSize(c.in[0]->dtype), "self.mean()");
  TransientScalar(c, p);
  p->FreeExtra(mean);
}

void BwdVar(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const TensorMeta& y = *c.out[0];
  int mean = p->Temp(Bytes(y), "self.mean(dim, true)");
  TransientScalarTemp(c, p, y.dtype, 0, "");
  int sub = p->Temp(Bytes(*c.in[0]), "self - mean");
  int scaled = TransientScalarTemp(c, p, y.dtype, Bytes(y), "(2 / dof) * grad");
  p->GradNew(0);
  p->FreeTemp(scaled);
  p->FreeTemp(sub);
  p->FreeTemp(mean);
}

constexpr uint32_t kFirst = 1u;
constexpr uint32_t kBoth = 3u;

}  // namespace

const std::vector<OpRule> kPointwiseRules = {
    {OpKind::kRelu, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kRelu6, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kLeakyRelu, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kGelu, 1, 1, kFirst, InferUnary, FwdActivation, nullptr},
    {OpKind::kSilu, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kSigmoid, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kTanh, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kHardswish, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kHardsigmoid, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kSoftmax, 1, 1, kFirst, InferSoftmax, FwdActivation, nullptr},
    {OpKind::kLogSoftmax, 1, 1, kFirst, InferSoftmax, FwdActivation, nullptr},
    {OpKind::kDropout, 1, 1, kFirst, InferDropout, FwdDropout, BwdDropout},
    {OpKind::kAdd, 1, 2, kBoth, InferBinary, FwdAddSub, BwdAddSub, AliasGradSame},
    {OpKind::kSub, 1, 2, kBoth, InferBinary, FwdAddSub, BwdAddSub, AliasGradSame},
    {OpKind::kMul, 1, 2, kBoth, InferBinary, FwdMul, BwdScaled},
    {OpKind::kDiv, 1, 2, kBoth, InferBinary, FwdDiv, BwdScaled},
    {OpKind::kMean, 1, 1, kFirst, InferReduce, FwdMean, nullptr},
    {OpKind::kSum, 1, 1, kFirst, InferReduce, nullptr, BwdSum, AliasGradExpand},
    {OpKind::kVectorNorm, 1, 1, kFirst, InferReduce, FwdVectorNorm, BwdVectorNorm},
    {OpKind::kCrossEntropy, 2, 2, kFirst, InferLoss, FwdCrossEntropy, BwdCrossEntropy},
    {OpKind::kNllLoss, 2, 2, kFirst, InferLoss, FwdNllLoss, nullptr},
    {OpKind::kMseLoss, 2, 2, kBoth, InferLoss, FwdMseLoss, nullptr},
    {OpKind::kMaskedFill, 2, 2, kFirst, InferMaskedFill, FwdMaskedFill, nullptr},
    {OpKind::kStochasticDepth, 1, 1, kFirst, InferStochasticDepth, FwdStochasticDepth, nullptr},
    {OpKind::kElu, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kHardtanh, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kSoftplus, 1, 1, kFirst, InferUnary, FwdActivation, nullptr},
    {OpKind::kMish, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kHardshrink, 1, 1, kFirst, InferUnary, FwdActivation, nullptr},
    {OpKind::kSoftshrink, 1, 1, kFirst, InferUnary, FwdActivation, nullptr},
    {OpKind::kRrelu, 1, 1, kFirst, InferUnary, FwdRrelu, nullptr, nullptr, true},
    {OpKind::kBceWithLogits, 2, 2, kFirst, InferLoss, FwdBceWithLogits, BwdBceWithLogits},
    {OpKind::kSmoothL1Loss, 2, 2, kFirst, InferLoss, FwdSmoothL1, nullptr},
    {OpKind::kHuberLoss, 2, 2, kFirst, InferLoss, FwdSmoothL1, nullptr},
    {OpKind::kBinaryCrossEntropy, 2, 2, kFirst, InferLoss, FwdBce, BwdBce},
    {OpKind::kThreshold, 1, 1, kFirst, InferUnary, FwdActivation, nullptr, nullptr, true},
    {OpKind::kMaximum, 2, 2, kBoth, InferBinary, FwdSaveBoth, BwdMaximum},
    {OpKind::kMinimum, 2, 2, kBoth, InferBinary, FwdSaveBoth, BwdMaximum},
    {OpKind::kVar, 1, 1, kFirst, InferReduce, FwdVar, BwdVar},
};

}  // namespace memsim
