// Ops of mixture-of-experts routing: bincount and histc (tokens per expert) and floor division
// (expert slot → token), not differentiable, sort / argsort (tokens grouped by expert), and
// grouped_mm (every expert's GEMM in one call: transformers' default experts); scatter_add lives
// with scatter (rules_llm.cc). From the 2.13 CPU kernels (Note [MoE routing ops] in
// docs/op-rules.md); the routed split itself is `split` with per-expert count symbols (Note
// [Routed token counts]). Expert parallel's token dispatch and combine (torchtitan's
// ExpertParallel, Note [Expert parallel] in docs/parallel.md) are ep_dispatch and ep_combine.
#include <algorithm>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

// bincount(X, minlength=E): int64 [max(E, max(X) + 1)]; memsim takes E (router indices < E).
Status InferBincount(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1 || c.in[0]->dim() != 1 || IsFloating(c.in[0]->dtype))
    return RuleError(c, "expected one 1-D integer input");
  auto n = c.op.attrs.GetInt("minlength", c.bindings);
  if (!n || *n <= 0) return RuleError(c, "needs \"minlength\" > 0 (the number of experts)");
  o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, {*n}));
  return Status::OK();
}

// _bincount_cpu_template (aten/src/ATen/native/SummaryOps.cpp): self.min() (the negative check)
// and self.max() (nbins) are 0-dim int64 results read with item() and freed, then the output.
void FwdBincount(const RuleCtx& c, FwdPlan* p) {
  if (c.in[0]->numel() > 0) {
    p->FreeExtra(p->AddExtra(8, "bincount min"));
    p->FreeExtra(p->AddExtra(8, "bincount max"));
  }
  p->AllocOutput(0);
}

// sort(X, dim, descending, stable) → (values, int64 indices), X's sizes.
Status InferSort(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  const TensorMeta& x = *c.in[0];
  if (!WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(-1), std::max<int64_t>(x.dim(), 1)))
    return RuleError(c, "dim out of range");
  o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, x.sizes));
  return Status::OK();
}

// sort_stable_out (aten/src/ATen/native/Sorting.cpp) allocates values and indices, then the CPU
// sort_kernel (native/cpu/SortingKernel.cpp) fills the indices through _fill_indices: an int64
// arange of the sorted dim's size, copied into every slice and freed. (The FBGEMM radix path of
// 1-D integer sorts sizes 32768 and up adds two buffers; the 2.13 CPU wheel does not take it:
// a stable argsort of 40,000 int64 allocates values, indices and the arange only.)
void FwdSort(const RuleCtx& c, FwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  int64_t d = x.dim() == 0 ? 0 : *WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(-1), x.dim());
  p->AllocOutput(0);
  p->AllocOutput(1);
  p->FreeExtra(p->AddExtra(8 * (x.dim() == 0 ? 1 : x.sizes[d]), "sort _fill_indices arange"));
  if (c.rg_in(0)) p->Save(SavedRef::kOutput, 1);
}

// floor_divide(X, number): the Python number's wrapped tensor (int64 for an int, so no cast for
// an int64 X), the output, the wrapped number freed.
Status InferFloorDivide(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1 || !c.op.attrs.Has("scalar")) return RuleError(c, "expected X and a \"scalar\" divisor");
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

void FwdFloorDivide(const RuleCtx& c, FwdPlan* p) {
  int k = c.profile.scalar_operand_bytes > 0 ? p->AddExtra(c.profile.scalar_operand_bytes, "wrapped scalar") : -1;
  bool cast = k >= 0 && c.profile.scalar_operand_cast && c.in[0]->dtype != Dtype::kInt64;
  int kc = cast ? p->AddExtra(ElementSize(c.in[0]->dtype), "wrapped scalar, cast") : -1;
  p->AllocOutput(0);
  if (kc >= 0) p->FreeExtra(kc);
  if (k >= 0) p->FreeExtra(k);
}

// histc(X, bins, min, max) → [bins] of X's dtype (transformers' grouped experts count tokens per
// expert with it, integrations/moe.py).
Status InferHistc(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 1) return RuleError(c, "expected 1 input");
  auto bins = c.op.attrs.GetInt("bins", c.bindings);
  if (!bins || *bins <= 0) return RuleError(c, "needs \"bins\" > 0");
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, {*bins}));
  return Status::OK();
}

// histogram_histc_out (aten/src/ATen/native/Histogram.cpp): an empty bin_edges tensor resized to
// bins + 1 and filled by linspace, the histogram; the CPU kernel (native/cpu/HistogramKernel.cpp
// histogramdd_cpu_contiguous) sums per-thread histograms, an [threads, bins] at::zeros, into it
// (one thread: memsim's CPU traces run OMP_NUM_THREADS=1); bin_edges dies when the op returns.
// 1.13 and 2.13 CPU measurements agree. CUDA's _histc_cuda writes the output alone.
void FwdHistc(const RuleCtx& c, FwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  int64_t bins = c.op.attrs.GetInt("bins", c.bindings).value_or(1);
  int64_t el = ElementSize(x.dtype);
  int edges = c.profile.histc_cpu_buffers ? p->AddExtra((bins + 1) * el, "histc bin_edges") : -1;
  p->AllocOutput(0);
  if (edges < 0) return;
  p->FreeExtra(p->AddExtra(bins * el, "histc per-thread histograms"));
  p->FreeExtra(edges);
}

// grouped_mm(A [S, K], B [E, K, N], offs int32 [E]) → [S, N]: torch._grouped_mm with offsets (2-D
// × 3-D, the MoE case). create_grouped_gemm_output_tensor (aten/src/ATen/native/GroupedMMUtils.h)
// pads each output row to 16 bytes (empty_strided with stride {N_pad, 1}).
int64_t PaddedRow(int64_t n, Dtype t) {
  int64_t align = std::max<int64_t>(1, 16 / ElementSize(t));
  return (n + align - 1) / align * align;
}

Status InferGroupedMm(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 3) return RuleError(c, "expected A, B and offs");
  const TensorMeta& a = *c.in[0];
  const TensorMeta& b = *c.in[1];
  if (a.dim() != 2 || b.dim() != 3 || c.in[2]->dim() != 1)
    return RuleError(c, "expected a 2-D A, a 3-D B and 1-D offs (the 2-D × 3-D grouped GEMM)");
  if (a.sizes[1] != b.sizes[1] || c.in[2]->sizes[0] != b.sizes[0])
    return RuleError(c, "A " + a.ShapeString() + ", B " + b.ShapeString() + " and offs do not match");
  TensorMeta m{a.dtype, {a.sizes[0], b.sizes[2]}, {PaddedRow(b.sizes[2], a.dtype), 1}};
  o->Fresh(std::move(m));
  return Status::OK();
}

// The CPU kernel (_grouped_mm_fallback) runs one mm_out per group into slices of the output: no
// other buffer. derivatives.yaml: self: _grouped_mm_mat1_backward(grad, mat2, …, offs),
// mat2: _grouped_mm_mat2_backward(grad, self, …, offs); the node keeps mat2 iff self needs a grad,
// self iff mat2 does, and offs (SavedVariables in argument-name order: mat2, offs, self).
void FwdGroupedMm(const RuleCtx& c, FwdPlan* p) {
  const TensorMeta& out = *c.out[0];
  int64_t padded = out.sizes[0] * out.strides[0] * ElementSize(out.dtype);
  p->AllocOutput(0, padded > out.bytes() ? padded : 0);
  if (c.rg_in(0)) p->Save(SavedRef::kInput, 1);
  if (c.rg_in(0) || c.rg_in(1)) p->Save(SavedRef::kInput, 2);
  if (c.rg_in(1)) p->Save(SavedRef::kInput, 0);
}

// Backward (a 2.13 CPU dispatch log): mat2's grad first (the generated code's order, as mm's), the
// 2-D × 2-D grouped GEMM gradᵀ · self giving [E, N, K] returned transposed, so the grad has B's
// layout (an expert weight's transpose view: AccumulateGrad steals it); then self's, grad · Bᵀ.
void BwdGroupedMm(const RuleCtx& c, BwdPlan* p) {
  auto mat2 = [&] {
    if (c.rg_in(1)) p->GradNewLike(1, *c.in[1]);
  };
  if (c.profile.mm_grad_mat2_first) mat2();
  if (c.rg_in(0)) p->GradNew(0);
  if (!c.profile.mm_grad_mat2_first) mat2();
}

// sort's backward (values): value_selecting_reduction_backward, a zero grad scattered: one new.
void BwdSort(const RuleCtx& c, BwdPlan* p) { p->GradNew(0); }

// ep_dispatch(routed [T, ...], counts [E] int64) → (received [R, ...], local counts [E/N] int64,
// permutation [R] int64): torchtitan's ExpertParallel._token_dispatch with _permute (without the
// grouped GEMM's alignment padding). Attributes: "world" N, "recv" R (this rank's received rows),
// "rows" the rows source s sends to local expert j, listed j-major (the permutation's order).
Status InferEpDispatch(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 2 || c.in[0]->dim() < 1 || c.in[1]->dim() != 1) return RuleError(c, "expected routed rows and [E] counts");
  auto n = c.op.attrs.GetInt("world", c.bindings);
  auto recv = c.op.attrs.GetInt("recv", c.bindings);
  const int64_t experts = c.in[1]->sizes[0];
  if (!n || *n < 1 || experts % *n != 0) return RuleError(c, "\"world\" must divide the experts");
  if (!recv || *recv < 0) return RuleError(c, "needs \"recv\" (the received rows)");
  std::vector<int64_t> sizes = c.in[0]->sizes;
  sizes[0] = *recv;
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, sizes));
  o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, {experts / *n}));
  o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, {*recv}));
  return Status::OK();
}

// In the order of the 2.13 CPU trace (tests/data/traces_ep_2_13): the counts' all_to_all_single
// into empty_like(counts); the input and output splits, each a [N] sum read with tolist(); the
// starts (cumsum - counts, the cumsum freed); per (local expert, source) a 0-dim sum and an int64
// arange of the rows (an empty one allocates nothing); their cat (the permutation), the aranges
// freed from the list's end; all_to_all_single_autograd's output (new_empty in
// _c10d_functional::all_to_all_single), indexed by the permutation and freed; the local counts
// (the grid's column sums); the starts and the counts' copy die when the hook returns. The
// permutation is kept by the IndexBackward node (and by ExpertParallel, Note [Expert parallel]).
void FwdEpDispatch(const RuleCtx& c, FwdPlan* p) {
  const int64_t experts = c.in[1]->sizes[0], n = c.op.attrs.GetInt("world", c.bindings).value_or(1);
  const int counts_group = p->AddExtra(8 * experts, "all_to_all counts");
  p->FreeExtra(p->AddExtra(8 * n, "input splits"));
  p->FreeExtra(p->AddExtra(8 * n, "output splits"));
  const int cumsum = p->AddExtra(8 * experts, "cumsum");
  const int starts = p->AddExtra(8 * experts, "starts");
  p->FreeExtra(cumsum);
  std::vector<int> aranges;
  for (int64_t rows : c.op.attrs.GetInts("rows", c.bindings).value_or(std::vector<int64_t>{})) {
    p->FreeExtra(p->AddExtra(8, "arange end"));
    if (rows > 0) aranges.push_back(p->AddExtra(8 * rows, "arange"));
  }
  p->AllocOutput(2);
  for (auto it = aranges.rbegin(); it != aranges.rend(); ++it) p->FreeExtra(*it);
  const int received = p->AddExtra(Bytes(*c.out[0]), "all_to_all_single output");
  p->AllocOutput(0);
  p->FreeExtra(received);
  p->AllocOutput(1);
  p->FreeExtra(starts);
  p->FreeExtra(counts_group);
  if (c.rg_in(0)) p->Save(SavedRef::kOutput, 2);
}

// IndexBackward (zeros of the received rows, the grad index_put_ into them), the incoming grad
// dropped, then the reverse all_to_all_single into the routed rows' grad; the zeros freed.
void BwdEpDispatch(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const int zeros = p->Temp(Bytes(*c.out[0]), "index grad");
  p->ReleaseGradOut();
  p->GradNew(0);
  p->FreeTemp(zeros);
}

// ep_combine(out [R, ...], permutation [R], local counts) → [T, ...]: _unpermute (new_empty, the
// rows written back by index_put_) and the reverse all_to_all_single_autograd. Attribute "rows":
// T, the rows this rank routed.
Status InferEpCombine(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 3 || c.in[0]->dim() < 1) return RuleError(c, "expected the experts' output, the permutation and the counts");
  auto rows = c.op.attrs.GetInt("rows", c.bindings);
  if (!rows || *rows < 0) return RuleError(c, "needs \"rows\" (the routed rows)");
  std::vector<int64_t> sizes = c.in[0]->sizes;
  sizes[0] = *rows;
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, sizes));
  return Status::OK();
}

void FwdEpCombine(const RuleCtx& c, FwdPlan* p) {
  const int unpermuted = p->AddExtra(Bytes(*c.in[0]), "unpermuted");
  p->AllocOutput(0);
  p->FreeExtra(unpermuted);
  if (c.rg_in(0)) p->Save(SavedRef::kInput, 1);
}

// all_to_all_single's backward (the grad sent back: received-sized), the incoming grad dropped,
// then IndexPutBackward's values grad (grad.index(permutation)); the received grad freed. The
// unpermuted buffer had no history: no grad for it.
void BwdEpCombine(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const int received = p->Temp(Bytes(*c.in[0]), "all_to_all grad");
  p->ReleaseGradOut();
  p->GradNew(0);
  p->FreeTemp(received);
}

constexpr uint32_t kFirst = 1u;
constexpr uint32_t kNotDiff = 0u;

}  // namespace

const std::vector<OpRule> kMoeRules = {
    {OpKind::kBincount, 1, 1, kNotDiff, InferBincount, FwdBincount, nullptr},
    {OpKind::kSort, 1, 1, kFirst, InferSort, FwdSort, BwdSort},
    {OpKind::kFloorDivide, 1, 1, kNotDiff, InferFloorDivide, FwdFloorDivide, nullptr},
    {OpKind::kEpDispatch, 2, 2, kFirst, InferEpDispatch, FwdEpDispatch, BwdEpDispatch},
    {OpKind::kEpCombine, 3, 3, kFirst, InferEpCombine, FwdEpCombine, BwdEpCombine},
    {OpKind::kHistc, 1, 1, kNotDiff, InferHistc, FwdHistc, nullptr},
    {OpKind::kGroupedMm, 3, 3, 3u, InferGroupedMm, FwdGroupedMm, BwdGroupedMm, nullptr, false, true},
};

}  // namespace memsim
