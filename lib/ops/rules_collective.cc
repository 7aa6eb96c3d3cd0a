// The collectives of tensor and sequence parallelism (Note [Tensor parallel] in docs/parallel.md),
// as DTensor's redistribute runs them through the functional collectives
// (torch/distributed/tensor/_redistribute.py, placement_types.py, and
// torch/distributed/_functional_collectives.py; the C++ ops in
// torch/csrc/distributed/c10d/Functional.cpp allocate their outputs):
//   all_reduce(x)          Partial → Replicate: a contiguous clone reduced in place; backward
//                          passes the grad through (Replicate → Partial needs no communication).
//   grad_all_reduce(x)     the input of a ColwiseParallel module (DTensor.from_local, Replicate):
//                          forward the same tensor; backward the Partial grad all-reduced into a
//                          new tensor (_FromTorchTensor.backward).
//   all_gather(x)          Shard(dim) → Replicate: all_gather_into_tensor gathers on dim 0 into a
//                          new tensor; for dim ≠ 0 the chunks are concatenated on dim into the
//                          output (a second full-size tensor) and the gathered one freed, unless
//                          every dim before dim is 1 (a microbatch of one sequence): then
//                          _maybe_view_chunk_cat (torch/_utils.py, 2.x) returns a view of it.
//                          Backward: the Partial grad reduce-scattered (below).
//   reduce_scatter(x)      Partial → Shard(dim): for dim ≠ 0, reduce_scatter_tensor first
//                          concatenates the chunks on dim 0 (a full-size tensor), then the
//                          scattered output; backward all-gathers the grad.
//   tp_embedding(ids, w)   a RowwiseParallel embedding's local lookup (w: the rank's [V/world, h] rows):
//                          DTensor's _MaskPartial masks the ids outside the rank's rows (two
//                          comparisons, their or: the mask, kept until the output is reduced), the
//                          ids shifted (a clone, then the subtraction) and looked up; the output is
//                          Partial (the reduction follows as all_reduce / reduce_scatter). Backward:
//                          EmbeddingBackward0 saved the replicated ids, so embedding_dense_backward
//                          runs on every rank's full [V, h] weight grad, narrowed (a view) to the
//                          rank's Shard(0) rows: the grad keeps the whole buffer.
//   tp_cross_entropy(x, t) cross entropy of vocabulary-sharded logits inside loss_parallel()
//                          (torch/distributed/tensor/parallel/loss.py): _log_softmax in the
//                          computation dtype (a float copy of half logits), its row max and
//                          sum of exps all-reduced; the result (in the logits' dtype) saved, the
//                          float copy and the shifted logits held until it is cast (locals);
//                          nll_loss gathers the rank's target column (_MaskPartial). Backward
//                          (_nll_loss_and_log_softmax_backward): zeros_like(x) with the target
//                          columns set, then (grad_input + exp(x)) * grad_output.
// Attributes: "world" (the group's ranks) and, for all_gather / reduce_scatter, "dim".
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

constexpr uint32_t kFirst = 1u;

Status Arity1(const RuleCtx& c) {
  if (c.num_in() != 1) return RuleError(c, "takes one tensor");
  return Status::OK();
}

int64_t World(const RuleCtx& c) { return c.op.attrs.GetInt("world", c.bindings).value_or(1); }

/// The gathered / scattered dimension, normalized; -1 when out of range.
int64_t Dim(const RuleCtx& c) {
  const int64_t rank = c.in[0]->dim();
  int64_t d = c.op.attrs.GetInt("dim", c.bindings).value_or(0);
  if (d < 0) d += rank;
  return d >= 0 && d < rank ? d : -1;
}

Status InferAllReduce(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity1(c));
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
  return Status::OK();
}

Status InferGradAllReduce(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Arity1(c));
  o->Alias(*c.in[0], 0);
  return Status::OK();
}

Status InferResized(const RuleCtx& c, InferOut* o, bool gather) {
  MEMSIM_RETURN_IF_ERROR(Arity1(c));
  const int64_t d = Dim(c), w = World(c);
  if (d < 0) return RuleError(c, "dim is out of range for " + c.in[0]->ShapeString());
  if (w < 1) return RuleError(c, "world must be positive");
  std::vector<int64_t> sizes = c.in[0]->sizes;
  if (gather) {
    sizes[d] *= w;
  } else {
    if (sizes[d] % w != 0)
      return RuleError(c, "dimension " + std::to_string(d) + " of " + c.in[0]->ShapeString() +
                              " is not divisible by the " + std::to_string(w) + " ranks");
    sizes[d] /= w;
  }
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, sizes));
  return Status::OK();
}

Status InferAllGather(const RuleCtx& c, InferOut* o) { return InferResized(c, o, true); }
Status InferReduceScatter(const RuleCtx& c, InferOut* o) { return InferResized(c, o, false); }

/// The full-size tensor of a gather or scatter (the larger of input and output).
int64_t FullBytes(const RuleCtx& c) {
  const int64_t in = Bytes(*c.in[0]);
  return c.out.empty() ? in : std::max(in, Bytes(*c.out[0]));
}

/// Whether an all-gather of |x| on Dim(c) is a view of the gathered buffer: every dim before it
/// is 1 (_maybe_view_chunk_cat's view case); dim 0 needs no rearranging at all.
bool GatherIsView(const RuleCtx& c, const TensorMeta& x) {
  for (int64_t i = 0; i < Dim(c) && i < x.dim(); ++i)
    if (x.sizes[i] != 1) return false;
  return true;
}

/// all_gather forward: off dim 0, a full-size staging tensor (the gathered chunks) lives while
/// the output is made, unless the output is a view of it.
void FwdStaged(const RuleCtx& c, FwdPlan* p) {
  if (GatherIsView(c, *c.in[0])) return;
  const int k = p->AddExtra(FullBytes(c), "staging");
  p->AllocOutput(0);
  p->FreeExtra(k);
}

/// reduce_scatter forward: staged as above; on gloo (Profile::host_collectives)
/// ProcessGroupGloo's reduce_scatter_tensor all-reduces a copy of the whole input, which its work
/// keeps until the result is first read (the AsyncCollectiveTensor's wait_tensor).
void FwdReduceScatter(const RuleCtx& c, FwdPlan* p) {
  const int k = Dim(c) == 0 ? -1 : p->AddExtra(FullBytes(c), "staging");
  p->AllocOutput(0);
  if (c.profile.host_collectives) p->HoldUntilUse(p->AddExtra(FullBytes(c), "gloo reduce-scatter work copy"));
  if (k >= 0) p->FreeExtra(k);
}

/// Their backward: the opposite collective on the grad, staged the same way (a reduce-scatter
/// off dim 0 always; an all-gather unless it is a view).
void BwdStaged(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  if (Dim(c) == 0 || (c.op.kind == OpKind::kReduceScatter && c.grad_out && GatherIsView(c, *c.grad_out))) {
    p->GradNew(0);
    return;
  }
  const int k = p->Temp(FullBytes(c), "staging");
  p->GradNew(0);
  p->FreeTemp(k);
}

void FwdTpEmbedding(const RuleCtx& c, FwdPlan* p) {
  const int64_t n = c.in[0]->numel();
  const int lt = p->AddExtra(n, "_MaskPartial ids < offset");
  const int ge = p->AddExtra(n, "_MaskPartial ids >= offset + rows");
  const int mask = p->AddExtra(n, "_MaskPartial mask");
  p->FreeExtra(lt);
  p->FreeExtra(ge);
  const int clone = p->AddExtra(Bytes(*c.in[0]), "_MaskPartial ids clone");
  const int shifted = p->AddExtra(Bytes(*c.in[0]), "_MaskPartial ids - offset");
  p->FreeExtra(clone);
  p->AllocOutput(0);
  p->FreeExtra(shifted);
  p->FreeExtra(mask);  // apply_mask on the output before its reduction, then release_mask
  p->Save(SavedRef::kInput, 0);
}

void BwdTpEmbedding(const RuleCtx& c, BwdPlan* p) {
  if (c.rg_in(1)) EmbeddingDenseBackward(c, p, c.in[1]->sizes[0] * World(c), Bytes(*c.in[1]) * World(c));
}

Status InferTpCrossEntropy(const RuleCtx& c, InferOut* o) {
  if (c.num_in() != 2 || c.in[0]->dim() != 2) return RuleError(c, "takes [N, C/world] logits and [N] targets");
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, {}));
  return Status::OK();
}

void FwdTpCrossEntropy(const RuleCtx& c, FwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  const int64_t n = x.sizes[0], e = IsFloating(x.dtype) && ElementSize(x.dtype) < 4 ? 4 : ElementSize(x.dtype);
  const int64_t full = x.numel() * e, rows = n * e;
  const int copy = e != ElementSize(x.dtype) ? p->AddExtra(full, "_log_softmax float copy") : -1;
  const int amax = p->AddExtra(rows, "row max");
  const int max = p->AddExtra(rows, "row max all-reduced");
  p->FreeExtra(amax);
  const int shifted = p->AddExtra(full, "shifted");
  const int exp = p->AddExtra(full, "exp(shifted)");
  const int sum = p->AddExtra(rows, "sum of exps");
  p->FreeExtra(exp);
  const int sum_reduced = p->AddExtra(rows, "sum of exps all-reduced");
  p->FreeExtra(sum);
  const int log = p->AddExtra(rows, "logsumexp");
  int result = p->AddExtra(full, "log_softmax");
  if (copy >= 0) {  // result = result.to(result_dtype): the float result goes at the rebinding
    const int cast = p->AddExtra(Bytes(x), "log_softmax");
    p->FreeExtra(result);
    result = cast;
  }
  // _log_softmax returns: its locals go in the order the code first names them
  if (copy >= 0) p->FreeExtra(copy);
  p->FreeExtra(shifted);
  p->FreeExtra(max);
  p->FreeExtra(sum_reduced);
  p->FreeExtra(log);
  p->SaveNow(SavedRef::kExtra, result);
  p->SaveNow(SavedRef::kInput, 1);
  p->AllocOutput(0);
}

void BwdTpCrossEntropy(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const int64_t full = Bytes(*c.in[0]);
  const int zeros = p->Temp(full, "grad_input (zeros_like)");
  const int exp = p->Temp(full, "exp(log_softmax)");
  const int sum = p->Temp(full, "grad_input + exp");
  p->FreeTemp(exp);
  p->GradNew(0);
  p->FreeTemp(sum);
  p->FreeTemp(zeros);
}

void BwdAllReduce(const RuleCtx& c, BwdPlan* p) {
  if (c.rg_in(0)) p->GradAlias(0);
}

void BwdGradAllReduce(const RuleCtx& c, BwdPlan* p) {
  if (c.rg_in(0)) p->GradNew(0);
}

}  // namespace

const std::vector<OpRule> kCollectiveRules = {
    {OpKind::kAllReduce, 1, 1, kFirst, InferAllReduce, nullptr, BwdAllReduce, AliasGradSame},
    {OpKind::kGradAllReduce, 1, 1, kFirst, InferGradAllReduce, nullptr, BwdGradAllReduce},
    {OpKind::kAllGather, 1, 1, kFirst, InferAllGather, FwdStaged, BwdStaged},
    {OpKind::kReduceScatter, 1, 1, kFirst, InferReduceScatter, FwdReduceScatter, BwdStaged},
    {OpKind::kTpEmbedding, 2, 2, 2u, InferEmbedding, FwdTpEmbedding, BwdTpEmbedding},
    {OpKind::kTpCrossEntropy, 2, 2, kFirst, InferTpCrossEntropy, FwdTpCrossEntropy, BwdTpCrossEntropy},
};

}  // namespace memsim
