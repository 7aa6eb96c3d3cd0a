// Ops of mixture-of-experts routing: bincount (tokens per expert) and floor division (expert slot
// → token), not differentiable, and sort / argsort (tokens grouped by expert); scatter_add lives
// with scatter (rules_llm.cc). From the 2.13 CPU kernels (Note [MoE routing ops] in
// docs/op-rules.md); the routed split itself is `split` with per-expert count symbols (Note
// [Routed token counts]).
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

// sort's backward (values): value_selecting_reduction_backward, a zero grad scattered: one new.
void BwdSort(const RuleCtx& c, BwdPlan* p) { p->GradNew(0); }

constexpr uint32_t kFirst = 1u;
constexpr uint32_t kNotDiff = 0u;

}  // namespace

const std::vector<OpRule> kMoeRules = {
    {OpKind::kBincount, 1, 1, kNotDiff, InferBincount, FwdBincount, nullptr},
    {OpKind::kSort, 1, 1, kFirst, InferSort, FwdSort, BwdSort},
    {OpKind::kFloorDivide, 1, 1, kNotDiff, InferFloorDivide, FwdFloorDivide, nullptr},
};

}  // namespace memsim
