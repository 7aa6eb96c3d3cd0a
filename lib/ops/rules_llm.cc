// Ops language-model code uses: comparisons, bool ops (any, bitwise_and, bitwise_not), where, exp/log/pow/rsqrt/sqrt/neg/cos/sin, value-selecting
// reductions (max/min/topk and their indices, amax, logsumexp), gather/scatter, advanced
// indexing, unbind, tril/triu, cumsum and repeat_interleave. What each saves and what its
// backward allocates follows derivatives.yaml (1.13 and 2.x agree for these ops unless a
// Profile field says otherwise); docs/op-rules.md lists them.
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

Status Fail(const RuleCtx& c, const char* msg) { return RuleError(c, msg); }

std::optional<int64_t> Dim(const RuleCtx& c, int64_t rank, int64_t dflt = -1) {
  return WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(dflt), rank);
}

/// The sizes of one input, or of two broadcast together (comparisons, bitwise ops).
Status OneOrTwoBroadcast(const RuleCtx& c, std::vector<int64_t>* sizes) {
  if (c.in.empty() || c.in.size() > 2) return Fail(c, "expected 1 or 2 inputs");
  *sizes = c.in[0]->sizes;
  if (c.in.size() == 2) {
    auto b = BroadcastShapes(*sizes, c.in[1]->sizes);
    if (!b) return Fail(c, "inputs do not broadcast");
    *sizes = *b;
  }
  return Status::OK();
}

// ---- comparisons: eq ne lt le gt ge (X, [Y] or `scalar`) → bool, not differentiable -----------
Status InferCompare(const RuleCtx& c, InferOut* o) {
  std::vector<int64_t> sizes;
  if (Status st = OneOrTwoBroadcast(c, &sizes); !st.ok()) return st;
  if (c.in.size() == 1 && !c.op.attrs.Has("scalar")) {
    return Fail(c, "needs a second input or a \"scalar\" attribute");
  }
  o->Fresh(TensorMeta::Contiguous(Dtype::kBool, sizes));
  return Status::OK();
}

/// Note [Scalar overloads]: a comparison with a number is its `.Scalar` overload, whose kernel
/// wraps the number (`wrapped_scalar_tensor`: 8 bytes, Profile::scalar_operand_bytes) and the
/// CPU TensorIterator copies it to X's dtype; both die when the op returns, the output made
/// between them. Only ops the exporter marks `scalar_overload` (ATen ops of a composite) take it.
void FwdCompare(const RuleCtx& c, FwdPlan* p) {
  if (c.in.size() != 1 || !c.op.attrs.GetBool("scalar_overload", false) || c.profile.scalar_operand_bytes == 0) return;
  int k = p->AddExtra(c.profile.scalar_operand_bytes, "wrapped scalar");
  int cast = p->AddExtra(ElementSize(c.in[0]->dtype), "wrapped scalar, cast");
  p->AllocOutput(0);
  p->FreeExtra(cast);
  p->FreeExtra(k);
}

// ---- bool ops: any (a reduction), bitwise_and / bitwise_not (elementwise); not differentiable ---
Status InferAny(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return Fail(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  std::vector<int64_t> sizes;
  if (auto dims = c.op.attrs.GetInts("dim", c.bindings)) {
    std::vector<bool> reduce(x.dim(), false);
    for (int64_t d : *dims) {
      auto w = WrapDim(d, x.dim());
      if (!w) return Fail(c, "dim out of range");
      if (x.dim() > 0) reduce[*w] = true;
    }
    const bool keep = c.op.attrs.GetBool("keepdim", false);
    for (int64_t i = 0; i < x.dim(); ++i)
      if (!reduce[i] || keep) sizes.push_back(reduce[i] ? 1 : x.sizes[i]);
  }
  o->Fresh(TensorMeta::Contiguous(Dtype::kBool, sizes));
  return Status::OK();
}

Status InferBitwise(const RuleCtx& c, InferOut* o) {
  std::vector<int64_t> sizes;
  if (Status st = OneOrTwoBroadcast(c, &sizes); !st.ok()) return st;
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, sizes));
  return Status::OK();
}

// ---- where(cond, X, Y); X or Y may be a number (attrs `self` / `other`) ------------------------
Status InferWhere(const RuleCtx& c, InferOut* o) {
  size_t want = 3 - (c.op.attrs.Has("self") ? 1 : 0) - (c.op.attrs.Has("other") ? 1 : 0);
  if (c.in.size() != want) return Fail(c, "expected (condition, self, other), numbers given as attrs");
  if (c.in[0]->dtype != Dtype::kBool) return Fail(c, "condition must be bool");
  std::vector<int64_t> sizes = c.in[0]->sizes;
  Dtype dt = want > 1 ? c.in[1]->dtype : Dtype::kFloat32;
  for (size_t i = 1; i < c.in.size(); ++i) {
    auto b = BroadcastShapes(sizes, c.in[i]->sizes);
    if (!b) return Fail(c, "inputs do not broadcast");
    sizes = *b;
  }
  o->Fresh(TensorMeta::Contiguous(dt, sizes));
  return Status::OK();
}

// WhereBackward keeps the condition; each tensor branch gets where(cond, grad, 0).
void FwdWhere(const RuleCtx& c, FwdPlan* p) {
  if (c.rg.any()) p->Save(SavedRef::kInput, 0);
}

void BwdEachNew(const RuleCtx& c, BwdPlan* p) {
  for (int i = 0; i < c.num_in(); ++i)
    if (c.rg_in(i)) p->GradNew(i);
}

// ---- unary math ---------------------------------------------------------------------------------
Status InferSameShape(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return Fail(c, "expected 1 input");
  if (c.op.attrs.GetBool("inplace", false)) o->Alias(*c.in[0], 0);
  else o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

void SaveOutput(const RuleCtx& c, FwdPlan* p) { p->Save(SavedRef::kOutput, 0); }
void SaveInput(const RuleCtx& c, FwdPlan* p) { p->Save(SavedRef::kInput, 0); }

/// |n| input-sized temporaries alive while the grad is computed (one C++ full-expression).
void GradWithTemps(const RuleCtx& c, BwdPlan* p, int n, std::string_view label) {
  for (int k = 0; k < n; ++k) p->Temp(Bytes(*c.in[0]), label);
  p->GradNew(0);
}

// exp: grad * result; log: grad / self; neg: -grad.
void BwdOneNew(const RuleCtx& c, BwdPlan* p) { p->GradNew(0); }
// pow(self, e): grad * (e * self.pow(e - 1)) — two input-sized temporaries.
void BwdPow(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 2, "pow backward"); }
// cos: grad * -self.sin() — sin(self) and its negation; sin: grad * self.cos() — one
// temporary (derivatives.yaml).
void BwdCos(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 2, "cos backward"); }
void BwdSin(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 1, "sin backward"); }
// log2: grad / (self * 0.6931471805599453) — the product, then the quotient (derivatives.yaml).
void BwdLog2(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 1, "log2 backward"); }
// rsqrt: -0.5 * grad * result.pow(3) — two temporaries.
void BwdRsqrt(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 2, "rsqrt backward"); }
// sqrt: grad / (2 * result) — one temporary.
void BwdSqrt(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 1, "sqrt backward"); }

// ---- reductions ---------------------------------------------------------------------------------
std::vector<int64_t> Reduced(const TensorMeta& x, int64_t d, bool keep, int64_t keep_size = 1) {
  std::vector<int64_t> s = x.sizes;
  if (x.dim() == 0) return s;
  if (keep) s[d] = keep_size;
  else s.erase(s.begin() + d);
  return s;
}

// max/min with `dim`: (values, int64 indices); without `dim`: one 0-dim value.
Status InferMaxMin(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return Fail(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  if (!c.op.attrs.Has("dim")) {
    o->Fresh(TensorMeta::Contiguous(x.dtype, {}));
    return Status::OK();
  }
  auto d = Dim(c, x.dim());
  if (!d) return Fail(c, "dim out of range");
  auto s = Reduced(x, *d, c.op.attrs.GetBool("keepdim", false));
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, s));
  return Status::OK();
}

// With dim: MaxBackward keeps the indices; without: self and result (evenly_distribute_backward).
void FwdMaxMin(const RuleCtx& c, FwdPlan* p) {
  if (!c.rg_in(0)) return;
  if (c.op.attrs.Has("dim")) {
    p->Save(SavedRef::kOutput, 1);
  } else {
    p->Save(SavedRef::kInput, 0);
    p->Save(SavedRef::kOutput, 0);
  }
}

// value_selecting_reduction_backward: zeros(self.sizes()).scatter_(dim, indices, grad).
// evenly_distribute_backward (no dim): a bool mask of self, then the grad.
void BwdMaxMin(const RuleCtx& c, BwdPlan* p) {
  if (!c.op.attrs.Has("dim")) p->Temp(c.in[0]->numel(), "max == self mask");
  p->GradNew(0);
}

Status InferAmax(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return Fail(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  bool keep = c.op.attrs.GetBool("keepdim", false);
  auto dims = c.op.attrs.GetInts("dim", c.bindings);
  std::vector<bool> red(x.dim(), !dims || dims->empty());
  if (dims)
    for (int64_t d : *dims) {
      auto w = WrapDim(d, x.dim());
      if (!w) return Fail(c, "dim out of range");
      if (x.dim() > 0) red[*w] = true;
    }
  std::vector<int64_t> s;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!red[i]) s.push_back(x.sizes[i]);
    else if (keep) s.push_back(1);
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  return Status::OK();
}

void SaveInputAndOutput(const RuleCtx& c, FwdPlan* p) {
  if (!c.rg_in(0)) return;
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kOutput, 0);
}

// amax: scale_grad_by_count(grad, result == self): a bool mask, then the grad.
void BwdAmax(const RuleCtx& c, BwdPlan* p) {
  p->Temp(c.in[0]->numel(), "amax == self mask");
  p->GradNew(0);
}

// logsumexp_backward: grad * (self - result).exp() — two input-sized temporaries.
void BwdLogsumexp(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 2, "logsumexp backward"); }

// topk(k, dim): values and int64 indices, [..., k, ...]; backward as max with dim.
Status InferTopk(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return Fail(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  auto d = Dim(c, x.dim());
  auto k = c.op.attrs.GetInt("k", c.bindings);
  if (!d || !k || x.dim() == 0 || *k < 0 || *k > x.sizes[*d]) return Fail(c, "bad k/dim");
  auto s = Reduced(x, *d, true, *k);
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, s));
  return Status::OK();
}

void SaveIndicesOutput(const RuleCtx& c, FwdPlan* p) {
  if (c.rg_in(0)) p->Save(SavedRef::kOutput, 1);
}

// ---- gather / scatter / index -------------------------------------------------------------------
Status InferGather(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 2) return Fail(c, "expected (self, index)");
  if (c.in[0]->dim() != c.in[1]->dim() || !Dim(c, c.in[0]->dim(), 0))
    return Fail(c, "index must have the rank of self, dim in range");
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[1]->sizes));
  return Status::OK();
}

// gather, index: the backward keeps the index (a zero grad of self, then scatter_add_/index_put_).
void SaveIndexInput(const RuleCtx& c, FwdPlan* p) {
  if (c.rg_in(0)) p->Save(SavedRef::kInput, 1);
}

// scatter(self, index, src): ScatterBackward keeps the index; grad of self = grad.scatter(0),
// grad of src = grad.gather(index).
Status InferScatter(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 3 && !(c.in.size() == 2 && c.op.attrs.Has("value")))
    return Fail(c, "expected (self, index, src) or (self, index) with `value`");
  if (!Dim(c, c.in[0]->dim(), 0)) return Fail(c, "dim out of range");
  if (c.op.attrs.GetBool("inplace", false)) o->Alias(*c.in[0], 0);
  else o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

void FwdScatter(const RuleCtx& c, FwdPlan* p) {
  if (c.rg_in(0) || c.rg_in(2)) p->Save(SavedRef::kInput, 1);
}

// scatter_add (`reduce: "add"`, torchtitan's combine of the experts' outputs): derivatives.yaml
// gives self the grad itself and src grad.gather(dim, index), a new src-sized tensor.
void BwdScatter(const RuleCtx& c, BwdPlan* p) {
  bool add = c.op.attrs.GetString("reduce", "") == "add";
  if (c.rg_in(0)) {
    if (add) p->GradAlias(0);
    else p->GradNew(0);
  }
  if (c.num_in() > 2 && c.rg_in(2)) p->GradNew(2);
}

// index(self, indices) with one integer index tensor at `dim`: output
// self.sizes[:dim] + index.sizes + self.sizes[dim+1:].
Status InferIndex(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 2) return Fail(c, "expected (self, index)");
  const TensorMeta& x = *c.in[0];
  const TensorMeta& idx = *c.in[1];
  if (IsFloating(idx.dtype)) return Fail(c, "index must be an integer or bool tensor");
  auto d = Dim(c, x.dim(), 0);
  if (!d || x.dim() == 0) return Fail(c, "dim out of range");
  std::vector<int64_t> s(x.sizes.begin(), x.sizes.begin() + *d);
  s.insert(s.end(), idx.sizes.begin(), idx.sizes.end());
  s.insert(s.end(), x.sizes.begin() + *d + 1, x.sizes.end());
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  return Status::OK();
}

// index_backward: new_zeros(self.sizes()).index_put_(indices, grad, accumulate=True). On CUDA
// the accumulate path sorts: a linear index and the sorted and original positions (int64 each).
void BwdIndex(const RuleCtx& c, BwdPlan* p) {
  p->GradNew(0);
  int64_t n = c.in[1]->numel();
  for (int k = 0; k < c.profile.index_put_sort_buffers; ++k) p->Temp(8 * n, "index_put_ sort buffer");
}

// ---- unbind, tril/triu, cumsum, repeat_interleave -----------------------------------------------
Status InferUnbind(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return Fail(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  auto d = Dim(c, x.dim(), 0);
  if (!d || x.dim() == 0) return Fail(c, "dim out of range");
  TensorMeta v;
  v.dtype = x.dtype;
  v.sizes = x.sizes;
  v.strides = x.strides;
  v.sizes.erase(v.sizes.begin() + *d);
  v.strides.erase(v.strides.begin() + *d);
  for (int64_t i = 0; i < x.sizes[*d]; ++i) o->Alias(v, 0);
  return Status::OK();
}

// cumsum_backward: grad.flip(dim).cumsum(dim).flip(dim) — two temporaries.
void BwdCumsum(const RuleCtx& c, BwdPlan* p) { GradWithTemps(c, p, 2, "cumsum backward"); }

// repeat_interleave(X, repeats, dim) runs as index_select with an int64 index of the output
// length along dim (repeat_interleave(repeats_tensor)), which IndexSelectBackward keeps.
Status InferRepeatInterleave(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return Fail(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  auto d = Dim(c, x.dim(), 0);
  auto r = c.op.attrs.GetInt("repeats", c.bindings);
  if (!d || !r || *r < 0 || x.dim() == 0) return Fail(c, "bad repeats/dim");
  auto s = x.sizes;
  s[*d] *= *r;
  o->Fresh(TensorMeta::Contiguous(x.dtype, s));
  return Status::OK();
}

void FwdRepeatInterleave(const RuleCtx& c, FwdPlan* p) {
  int64_t d = *Dim(c, c.in[0]->dim(), 0);
  int64_t len = c.out.empty() ? 0 : c.out[0]->sizes[d];
  int k = p->AddExtra(8 * len, "repeat_interleave index");
  p->AllocOutput(0);
  if (c.rg_in(0)) p->Save(SavedRef::kExtra, k);
}

constexpr uint32_t kFirst = 1u;
constexpr uint32_t kNotDiff = 0u;

}  // namespace

const std::vector<OpRule> kLlmRules = {
    {OpKind::kEq, 1, 2, kNotDiff, InferCompare, FwdCompare, nullptr},
    {OpKind::kNe, 1, 2, kNotDiff, InferCompare, FwdCompare, nullptr},
    {OpKind::kLt, 1, 2, kNotDiff, InferCompare, FwdCompare, nullptr},
    {OpKind::kLe, 1, 2, kNotDiff, InferCompare, FwdCompare, nullptr},
    {OpKind::kGt, 1, 2, kNotDiff, InferCompare, FwdCompare, nullptr},
    {OpKind::kGe, 1, 2, kNotDiff, InferCompare, FwdCompare, nullptr},
    {OpKind::kAny, 1, 1, kNotDiff, InferAny, nullptr, nullptr},
    {OpKind::kBitwiseAnd, 2, 2, kNotDiff, InferBitwise, nullptr, nullptr},
    {OpKind::kBitwiseNot, 1, 1, kNotDiff, InferBitwise, nullptr, nullptr},
    {OpKind::kBitwiseOr, 2, 2, kNotDiff, InferBitwise, nullptr, nullptr},
    {OpKind::kWhere, 1, 3, ~1u, InferWhere, FwdWhere, BwdEachNew},
    {OpKind::kExp, 1, 1, kFirst, InferSameShape, SaveOutput, BwdOneNew},
    {OpKind::kLog, 1, 1, kFirst, InferSameShape, SaveInput, BwdOneNew},
    {OpKind::kPow, 1, 1, kFirst, InferSameShape, SaveInput, BwdPow},
    {OpKind::kRsqrt, 1, 1, kFirst, InferSameShape, SaveOutput, BwdRsqrt},
    {OpKind::kSqrt, 1, 1, kFirst, InferSameShape, SaveOutput, BwdSqrt},
    {OpKind::kNeg, 1, 1, kFirst, InferSameShape, nullptr, BwdOneNew},
    {OpKind::kLog2, 1, 1, kFirst, InferSameShape, SaveInput, BwdLog2},
    // round, floor, ceil, trunc: zeros_like(grad), nothing saved (derivatives.yaml)
    {OpKind::kRound, 1, 1, kFirst, InferSameShape, nullptr, BwdOneNew},
    {OpKind::kFloor, 1, 1, kFirst, InferSameShape, nullptr, BwdOneNew},
    {OpKind::kCeil, 1, 1, kFirst, InferSameShape, nullptr, BwdOneNew},
    {OpKind::kTrunc, 1, 1, kFirst, InferSameShape, nullptr, BwdOneNew},
    {OpKind::kCos, 1, 1, kFirst, InferSameShape, SaveInput, BwdCos},
    {OpKind::kSin, 1, 1, kFirst, InferSameShape, SaveInput, BwdSin},
    {OpKind::kMax, 1, 1, kFirst, InferMaxMin, FwdMaxMin, BwdMaxMin},
    {OpKind::kMin, 1, 1, kFirst, InferMaxMin, FwdMaxMin, BwdMaxMin},
    {OpKind::kAmax, 1, 1, kFirst, InferAmax, SaveInputAndOutput, BwdAmax},
    {OpKind::kLogsumexp, 1, 1, kFirst, InferAmax, SaveInputAndOutput, BwdLogsumexp},
    {OpKind::kGather, 2, 2, kFirst, InferGather, SaveIndexInput, BwdOneNew},
    {OpKind::kScatter, 2, 3, 5u, InferScatter, FwdScatter, BwdScatter},
    {OpKind::kIndex, 2, 2, kFirst, InferIndex, SaveIndexInput, BwdIndex},
    {OpKind::kUnbind, 1, 1, kFirst, InferUnbind, nullptr, BwdOneNew},
    {OpKind::kTril, 1, 1, kFirst, InferSameShape, nullptr, BwdOneNew},
    {OpKind::kTriu, 1, 1, kFirst, InferSameShape, nullptr, BwdOneNew},
    {OpKind::kCumsum, 1, 1, kFirst, InferSameShape, nullptr, BwdCumsum},
    {OpKind::kTopk, 1, 1, kFirst, InferTopk, SaveIndicesOutput, BwdOneNew},
    {OpKind::kRepeatInterleave, 1, 1, kFirst, InferRepeatInterleave, FwdRepeatInterleave, BwdOneNew},
};

}  // namespace memsim
