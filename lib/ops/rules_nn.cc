// Layers: linear and the matmul family, embedding, normalisation and pooling
// (convolution: rules_conv.cc; attention: rules_attention.cc). Ops whose derivatives.yaml entry has one line per input (mm, addmm, bmm,
// baddbmm) keep an operand only if the other operand needs a grad; ops with one combined line
// (convolution, the norms, fused attention) keep everything whenever the node exists
// (Note [Saved tensors] in docs/op-rules.md).
#include <algorithm>
#include <vector>

#include "lib/ops/onednn_plan.h"
#include "lib/ops/onednn_scratchpad.h"
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {



// linear: X[..., in] × W[out, in]ᵀ (+ b).
Status InferLinear(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 3));
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  if (x.dim() < 1 || w.dim() != 2 || x.sizes.back() != w.sizes[1])
    return RuleError(c, "input " + x.ShapeString() + " does not match weight " + w.ShapeString());
  if (c.in.size() == 3 && c.in[2]->numel() != w.sizes[0]) return RuleError(c, "bias size does not match");
  auto sizes = x.sizes;
  sizes.back() = w.sizes[0];
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

/// A ≥3-D input that cannot be flattened to 2-D as a view (PyTorch copies it).
bool LinearFoldCopies(const TensorMeta& x) {
  if (x.dim() <= 2) return false;
  return !ViewStrides(x.sizes, x.strides, {x.numel() / x.sizes.back(), x.sizes.back()});
}

/// The matmul path: a ≥3-D input that is not contiguous (1.13: also used for any ≥3-D input
/// without bias). Contiguous ≥3-D input with bias takes addmm on a flattened view.
bool LinearViaMatmul(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  if (x.dim() <= 2 && c.num_in() == 3) return false;
  return !(x.is_contiguous() && c.num_in() == 3);
}

void FwdLinear(const RuleCtx& c, FwdPlan* p) {
  int copy = LinearFoldCopies(*c.in[0]) ? p->AddExtra(Bytes(*c.in[0]), "reshape copy of input") : -1;
  const bool x_saved = c.rg_in(1);  // the GEMM saves the copy as it runs, after the copy is made
  if (copy >= 0 && x_saved) p->SaveNow(SavedRef::kExtra, copy);
  const int64_t scratch = LinearScratch(c, LinearGemm::kForward);
  if (LinearViaMatmul(c) && c.num_in() == 3 && !c.profile.linear_nd_addmm) {
    // 1.13: mm into a temporary, then an out-of-place `+ bias`.
    int mm = p->AddExtra(Bytes(*c.out[0]), "mm result");
    GemmScratch(p, scratch);
    p->AllocOutput(0);
    p->FreeExtra(mm);
  } else if (scratch > 0) {
    p->AllocOutput(0);
    GemmScratch(p, scratch);
  }
  // X is kept iff W needs a grad; W (as Wᵀ, a view of the parameter) iff X does: no new memory.
  // The node saves them in the order of their names in derivatives.yaml (what a saved-tensor
  // hook sees, Note [Activation offloading]): addmm's mat1 (X) before mat2 (Wᵀ), mm's mat2 (Wᵀ)
  // before self (X).
  const bool addmm = c.num_in() == 3 && !(LinearViaMatmul(c) && !c.profile.linear_nd_addmm);
  if (c.rg_in(0) && !addmm) p->Save(SavedRef::kInput, 1, /*transposed=*/true);
  if (x_saved && copy < 0) p->Save(SavedRef::kInput, 0);
  if (c.rg_in(0) && addmm) p->Save(SavedRef::kInput, 1, /*transposed=*/true);
}

void BwdLinear(const RuleCtx& c, BwdPlan* p) {
  bool has_bias = c.num_in() == 3 && c.rg_in(2);
  auto grad_input = [&] {
    p->GradNew(0);
    GemmScratch(p, LinearScratch(c, LinearGemm::kGradInput));
  };
  auto grad_weight = [&] {
    p->GradNewView(1);  // mm_mat2_backward of Wᵀ (column-major): `grad.t().mm(x).t()`, then TBackward's `.t()`
    GemmScratch(p, LinearScratch(c, LinearGemm::kGradWeight));
  };
  if (LinearViaMatmul(c)) {
    // AddBackward runs first: the bias grad, summed to the bias's shape in its validate_outputs.
    if (has_bias) p->GradNew(2);
    // matmul's `_unsafe_view` of the mm result: UnsafeViewBackward reshapes the grad, a copy when it
    // cannot be viewed as 2-D (expanded by a sum, transposed by a recurrent layer's batch_first,
    // Note [Recurrent layers]); the incoming grad then dies, the copy when MmBackward returns.
    int copy = -1;
    if (c.grad_out && c.grad_out->dim() > 2) {
      const TensorMeta& g = *c.grad_out;
      if (!ViewStrides(g.sizes, g.strides, {g.numel() / g.sizes.back(), g.sizes.back()})) {
        copy = p->Temp(Bytes(g), "grad reshape copy");
        p->ReleaseGradOut();
      }
    }
    if (c.profile.mm_grad_mat2_first && c.rg_in(1)) grad_weight();
    if (c.rg_in(0)) grad_input();
    if (!c.profile.mm_grad_mat2_first && c.rg_in(1)) grad_weight();
    if (copy >= 0) p->FreeTemp(copy);
    return;
  }
  // addmm: dX, dW, then the bias grad reduced in validate_outputs.
  if (c.rg_in(0)) grad_input();
  if (c.rg_in(1)) grad_weight();
  if (has_bias) p->GradAlias(2);
}

// mm / bmm / matmul: operand kept iff the other needs a grad.
Status InferMatmul(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 2));
  const TensorMeta& a = *c.in[0];
  const TensorMeta& b = *c.in[1];
  if (c.op.kind == OpKind::kMm && (a.dim() != 2 || b.dim() != 2))
    return RuleError(c, "mm needs 2-D inputs");
  if (c.op.kind == OpKind::kBmm && (a.dim() != 3 || b.dim() != 3 || a.sizes[0] != b.sizes[0]))
    return RuleError(c, "bmm needs 3-D inputs with equal batch");
  if (a.dim() == 0 || b.dim() == 0) return RuleError(c, "matmul needs at least 1-D inputs");
  int64_t k_a = a.sizes.back();
  int64_t k_b = b.dim() == 1 ? b.sizes[0] : b.sizes[b.dim() - 2];
  if (k_a != k_b) return RuleError(c, "inner dimensions differ: " + a.ShapeString() + " @ " + b.ShapeString());
  std::vector<int64_t> ba(a.sizes.begin(), a.sizes.end() - std::min<int64_t>(a.dim(), 2));
  std::vector<int64_t> bb(b.sizes.begin(), b.sizes.end() - std::min<int64_t>(b.dim(), 2));
  auto batch = BroadcastShapes(ba, bb);
  if (!batch) return RuleError(c, "batch dimensions do not broadcast");
  std::vector<int64_t> sizes = *batch;
  if (a.dim() >= 2) sizes.push_back(a.sizes[a.dim() - 2]);
  if (b.dim() >= 2) sizes.push_back(b.sizes.back());
  o->Fresh(TensorMeta::Contiguous(a.dtype, sizes));
  return Status::OK();
}

/// For matmul of two ≥3-D operands PyTorch expands and reshapes each to [batch, n, m]; an
/// operand whose batch dims cannot be flattened as a view is copied, and the copy is saved.
bool MatmulOperandCopies(const RuleCtx& c, int i) {
  if (c.op.kind != OpKind::kMatmul) return false;
  const TensorMeta& a = *c.in[0];
  const TensorMeta& b = *c.in[1];
  if (a.dim() < 3 || b.dim() < 3) return false;  // folded to mm (or mv/dot)
  const TensorMeta& x = *c.in[i];
  int64_t rows = x.sizes[x.dim() - 2], cols = x.sizes.back();
  return !ViewStrides(x.sizes, x.strides, {x.numel() / (rows * cols), rows, cols});
}

void FwdMatmul(const RuleCtx& c, FwdPlan* p) {
  int copy[2] = {-1, -1};
  for (int i = 0; i < 2; ++i)
    if (MatmulOperandCopies(c, i)) copy[i] = p->AddExtra(Bytes(*c.in[i]), "matmul operand copy");
  p->AllocOutput(0);
  GemmTransients(p, MatmulGemm(c, 0, 1, -1));
  for (int i = 0; i < 2; ++i) {
    if (!c.rg_in(1 - i)) continue;  // operand i is needed only for the other's grad
    if (copy[i] >= 0) p->Save(SavedRef::kExtra, copy[i]);
    else p->Save(SavedRef::kInput, i);
  }
}

void BwdMatmul(const RuleCtx& c, BwdPlan* p) {
  int first = c.profile.mm_grad_mat2_first ? 1 : 0;
  for (int i : {first, 1 - first}) {
    if (!c.rg_in(i)) continue;
    p->GradNew(i);
    GemmTransients(p, MatmulGemm(c, 0, 1, i));
  }
}

Status InferBaddbmm(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 3, 3));
  const TensorMeta& b1 = *c.in[1];
  const TensorMeta& b2 = *c.in[2];
  if (b1.dim() != 3 || b2.dim() != 3 || b1.sizes[0] != b2.sizes[0] || b1.sizes[2] != b2.sizes[1])
    return RuleError(c, "batch1 " + b1.ShapeString() + " and batch2 " + b2.ShapeString() + " do not match");
  std::vector<int64_t> sizes = {b1.sizes[0], b1.sizes[1], b2.sizes[2]};
  if (!BroadcastShapes(c.in[0]->sizes, sizes)) return RuleError(c, "self does not broadcast to the result");
  o->Fresh(TensorMeta::Contiguous(b1.dtype, sizes));
  return Status::OK();
}

void FwdBaddbmm(const RuleCtx& c, FwdPlan* p) {
  if (const OneDnnGemm g = MatmulGemm(c, 1, 2, -1); HasTransients(g)) {
    p->AllocOutput(0);
    GemmTransients(p, g);
  }
  if (c.rg_in(2)) p->Save(SavedRef::kInput, 1);
  if (c.rg_in(1)) p->Save(SavedRef::kInput, 2);
}

void BwdBaddbmm(const RuleCtx& c, BwdPlan* p) {
  if (c.rg_in(0)) {
    if (c.op.attrs.GetFloat("beta", 1.0) == 1.0) p->GradAlias(0);
    else p->GradNew(0);
  }
  for (int i : {1, 2}) {
    if (!c.rg_in(i)) continue;
    p->GradNew(i);
    GemmTransients(p, MatmulGemm(c, 1, 2, i));
  }
}

// embedding(indices, weight): keeps the indices; the dense backward builds a zero [V, D] grad.
void FwdEmbedding(const RuleCtx& c, FwdPlan* p) { p->Save(SavedRef::kInput, 0); }

// embedding_dense_backward_cpu (aten/src/ATen/native/Embedding.cpp, 1.13 and 2.x): the zeros
// grad_weight, then `grad_.contiguous()`: a copy of a non-contiguous incoming grad (an embedding
// feeding a batch_first recurrent layer gets its grad through the layer's transpose), freed when
// the kernel returns (Note [Recurrent layers]).
/// `grad.contiguous()` of a strided incoming grad: a grad-sized temporary (its index), else -1.
int ContiguousGrad(const RuleCtx& c, BwdPlan* p, std::string_view label = "grad contiguous") {
  return c.grad_out && !c.grad_out->is_contiguous() ? p->Temp(Bytes(*c.grad_out), label) : -1;
}

void FreeIfTemp(BwdPlan* p, int k) {
  if (k >= 0) p->FreeTemp(k);
}

void BwdEmbedding(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(1)) return;
  EmbeddingDenseBackward(c, p, c.in[1]->sizes[0], 0);
}

}  // namespace

// Note [CUDA embedding backward]: embedding_dense_backward_cuda (aten/src/ATen/native/cuda/
// Embedding.cu) with more than 3072 ids (or scale_grad_by_freq) sorts them (sorted_indices,
// orig_indices, the arange it sorts as values; cub's own temp storage, ~150 KB at 8192 ids, is not
// modelled), then embedding_backward_cuda_kernel (EmbeddingBackwardKernel.cu): the zeros
// grad_weight, segment_offsets [n] and its count, unique_by_key's keys_out [n] (freed at once),
// partials_per_segment and its offsets [min(n, V)], their count, partial_segment_offset and the
// fp32 (acc_type) partial sums [n / NROWS_PER_THREAD(10) + min(n, V), D], all freed when it
// returns. With at most 3072 ids, embedding_backward_feature_kernel writes the zeros grad alone.
void EmbeddingDenseBackward(const RuleCtx& c, BwdPlan* p, int64_t num_weights, int64_t grad_storage_bytes) {
  auto grad = [&] { grad_storage_bytes > 0 ? p->GradNewInStorage(1, grad_storage_bytes) : p->GradNew(1); };
  if (!c.profile.embedding_backward_segments) {  // the CPU: the zeros grad, then the contiguous grad
    grad();
    FreeIfTemp(p, ContiguousGrad(c, p));
    return;
  }
  const int contiguous = ContiguousGrad(c, p);
  const int64_t n = c.in[0]->numel();
  const bool scale = c.op.attrs.GetBool("scale_grad_by_freq", false);
  if (n <= 3072 && !scale) {
    grad();
    FreeIfTemp(p, contiguous);
    return;
  }
  const int64_t idx = ElementSize(c.in[0]->dtype), d = c.in[1]->sizes.back();
  const int64_t acc = std::max<int64_t>(ElementSize(c.in[1]->dtype), 4);
  const int64_t segments = std::min(n, num_weights), partials = n / 10 + segments;
  std::vector<int> held = {p->Temp(n * idx, "sorted_indices"), p->Temp(n * idx, "orig_indices")};
  p->FreeTemp(p->Temp(n * idx, "arange (sorted values)"));
  if (scale) held.push_back(p->Temp(n * idx, "count"));
  grad();
  held.push_back(p->Temp(n * idx, "segment_offsets"));
  held.push_back(p->Temp(8, "num_of_segments"));
  p->FreeTemp(p->Temp(n * idx, "unique_by_key keys_out"));
  held.push_back(p->Temp(segments * idx, "partials_per_segment"));
  held.push_back(p->Temp(segments * idx, "partials_per_segment_offset"));
  held.push_back(p->Temp(8, "num_of_partial_segments"));
  held.push_back(p->Temp(partials * idx, "partial_segment_offset"));
  held.push_back(p->Temp(partials * d * acc, "grad_weight_per_segment"));
  for (auto it = held.rbegin(); it != held.rend(); ++it) p->FreeTemp(*it);
  FreeIfTemp(p, contiguous);
}

namespace {
// embedding_bag(weight [V, D], indices [N], offsets [B]), modes sum, mean, max (Note [EmbeddingBag]):
// the CPU kernel of aten/src/ATen/native/EmbeddingBag.cpp _embedding_bag_cpu_impl_out (1.13 and 2.x).
Status InferEmbeddingBag(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 3, 3));
  const TensorMeta& w = *c.in[0];
  if (w.dim() != 2) return RuleError(c, "weight must be [num_embeddings, dim]");
  if (c.in[1]->dim() != 1 || c.in[2]->dim() != 1 || IsFloating(c.in[1]->dtype) || IsFloating(c.in[2]->dtype))
    return RuleError(c, "indices and offsets must be 1-D integer tensors");
  const std::string mode = c.op.attrs.GetString("mode", "mean");
  if (mode != "mean" && mode != "sum" && mode != "max") return RuleError(c, "mode must be sum, mean or max");
  if (mode == "sum" && w.dtype != Dtype::kFloat32) return RuleError(c, "mode \"sum\" has a rule for float32 weights only");
  o->Fresh(TensorMeta::Contiguous(w.dtype, {c.in[2]->sizes[0], w.sizes[1]}));
  return Status::OK();
}

// make_offset2bag: offset2bag = zeros(N + 1), index_add_ of ones_like(offsets), `offset2bag[0] -= 1`
// (a wrapped number), then `offset2bag = offset2bag.cumsum(0)` (a new N + 1, the first freed; resize_
// to N keeps the storage). |alloc| / |release| make and free one buffer (forward extras or backward
// temporaries); returns the kept offset2bag.
template <typename Alloc, typename Release>
int MakeOffset2bag(const RuleCtx& c, Alloc alloc, Release release) {
  const int64_t o2b = (c.in[1]->numel() + 1) * ElementSize(c.in[1]->dtype);
  int first = alloc(o2b, "offset2bag zeros");
  release(alloc(Bytes(*c.in[2]), "ones_like(offsets)"));
  if (c.profile.scalar_operand_bytes > 0) release(alloc(c.profile.scalar_operand_bytes, "offset2bag[0] -= 1"));
  int kept = alloc(o2b, "offset2bag");
  release(first);
  return kept;
}

// The output; offset2bag (make_offset2bag_out skips it on sum's fast path: float32 weights, no
// per-sample weights or padding_idx); make_bag_size_out: bag_size [B], its first B - 1 as
// `offsets[1:] - offsets[:-1]` and the last as `N - offsets[-1]` (temporaries);
// make_max_indices_out: max_indices = empty(B), resize_d to [B, D] for max (a new buffer, the first
// freed); mean: apply_bag_size, `max(bag_size, ones_like(bag_size)).to(output)` (temporaries).
// derivatives.yaml `_embedding_bag`: the node keeps indices, offsets, offset2bag, bag_size, max_indices.
void FwdEmbeddingBag(const RuleCtx& c, FwdPlan* p) {
  const std::string mode = c.op.attrs.GetString("mode", "mean");
  const int64_t bags = c.in[2]->numel(), ie = ElementSize(c.in[2]->dtype);
  p->AllocOutput(0);
  int o2b = -1;
  if (mode != "sum")
    o2b = MakeOffset2bag(c, [&](int64_t b, std::string_view l) { return p->AddExtra(b, l); },
                         [&](int k) { p->FreeExtra(k); });
  int bag = p->AddExtra(bags * ie, "bag_size");
  if (bags > 1) p->FreeExtra(p->AddExtra((bags - 1) * ie, "offsets[1:] - offsets[:-1]"));
  if (bags > 0) p->FreeExtra(p->AddExtra(ie, "N - offsets[-1]"));
  int maxi = p->AddExtra(bags * ie, "max_indices");
  if (mode == "max") {
    int full = p->AddExtra(bags * c.in[0]->sizes[1] * ie, "max_indices resized to [B, D]");
    p->FreeExtra(maxi);
    maxi = full;
  }
  if (mode == "mean") {
    int ones = p->AddExtra(bags * ie, "ones_like(bag_size)");
    int mx = p->AddExtra(bags * ie, "max(bag_size, 1)");
    int cast = p->AddExtra(bags * ElementSize(c.in[0]->dtype), "bag_size in the output's dtype");
    p->FreeExtra(mx);
    p->FreeExtra(ones);
    p->FreeExtra(cast);
  }
  p->Save(SavedRef::kInput, 1);
  p->Save(SavedRef::kInput, 2);
  for (int k : {o2b, bag, maxi})
    if (k >= 0) p->Save(SavedRef::kExtra, k);
}

// _embedding_bag_dense_backward_cpu_max: the zeros [V, D] grad; `max_indices.index_select(0,
// bag_size.nonzero().view(-1))` and `grad.index_select(...)` (each nonzero [B, 1] int64 freed after
// it; every bag assumed non-empty); per column d, index_add_ of the strided index column (made
// contiguous, [B], freed in turn).
void BwdEmbeddingBagMax(const RuleCtx& c, BwdPlan* p, int copy) {
  const int64_t bags = c.in[2]->numel(), d = c.in[0]->sizes[1], ie = ElementSize(c.in[2]->dtype);
  p->GradNew(0);
  int nz = p->Temp(bags * 8, "bag_size.nonzero()");
  int idx = p->Temp(bags * d * ie, "nonempty_max_indices");
  p->FreeTemp(nz);
  nz = p->Temp(bags * 8, "bag_size.nonzero()");
  int g = p->Temp(bags * d * ElementSize(c.grad_out->dtype), "nonempty_grad");
  p->FreeTemp(nz);
  for (int64_t k = 0; k < d; ++k) p->FreeTemp(p->Temp(bags * ie, "index column, contiguous"));
  p->FreeTemp(g);
  p->FreeTemp(idx);
  FreeIfTemp(p, copy);
}

// Sum's fast path left offset2bag empty: _embedding_bag_backward remakes it first (make_offset2bag,
// freed at the end). _embedding_bag_dense_backward_cpu: `grad_.contiguous()`, then max's path, or
// for sum and mean the zeros [V, D] weight grad, the indices sorted (values and permutation) and two
// more index-sized buffers of the counting, each freed in turn (the 1.13 and 2.13 traces of
// embbag_net and embbag_sum_max_net).
void BwdEmbeddingBag(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const std::string mode = c.op.attrs.GetString("mode", "mean");
  int o2b = -1;
  if (mode == "sum")
    o2b = MakeOffset2bag(c, [&](int64_t b, std::string_view l) { return p->Temp(b, l); },
                         [&](int k) { p->FreeTemp(k); });
  const int copy = ContiguousGrad(c, p);
  if (mode == "max") return BwdEmbeddingBagMax(c, p, copy);
  p->GradNew(0);
  const int64_t ib = Bytes(*c.in[1]);
  int sorted = p->Temp(ib, "sorted indices");
  int perm = p->Temp(ib, "sort permutation");
  p->FreeTemp(p->Temp(ib, "counts"));
  p->FreeTemp(p->Temp(ib, "next unique index"));
  p->FreeTemp(sorted);
  p->FreeTemp(perm);
  FreeIfTemp(p, copy);
  FreeIfTemp(p, o2b);
}

// Normalisation. Inputs: batch_norm (X, weight, bias, running_mean, running_var);
// layer_norm / group_norm (X, [weight], [bias]); rms_norm (X, [weight]).
Status InferNorm(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 1, c.op.kind == OpKind::kBatchNorm ? 5 : 3));
  const TensorMeta& x = *c.in[0];
  if (c.op.kind == OpKind::kBatchNorm && x.dim() < 2) return RuleError(c, "input needs a channel dimension");
  if (c.op.kind == OpKind::kGroupNorm) {
    auto g = c.op.attrs.GetInt("num_groups", c.bindings);
    if (!g || *g <= 0 || x.dim() < 2 || x.sizes[1] % *g != 0)
      return RuleError(c, "num_groups must divide the channel count of " + x.ShapeString());
  }
  if (c.op.kind == OpKind::kLayerNorm || c.op.kind == OpKind::kRmsNorm) {
    auto ns = c.op.attrs.GetInts("normalized_shape", c.bindings);
    if (!ns) {
      if (c.in.size() < 2) return RuleError(c, "needs \"normalized_shape\"");
      ns = c.in[1]->sizes;
    }
    if (static_cast<int64_t>(ns->size()) > x.dim() ||
        !std::equal(ns->begin(), ns->end(), x.sizes.end() - ns->size()))
      return RuleError(c, "normalized_shape does not match the trailing dims of " + x.ShapeString());
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  return Status::OK();
}

/// Number of statistics rows (one mean and one rstd each).
int64_t NormStatRows(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  switch (c.op.kind) {
    case OpKind::kBatchNorm: return x.sizes[1];
    case OpKind::kGroupNorm: return x.sizes[0] * c.op.attrs.GetInt("num_groups", c.bindings).value_or(1);
    default: {
      auto ns = c.op.attrs.GetInts("normalized_shape", c.bindings);
      int64_t inner = 1;
      for (int64_t s : ns ? *ns : c.in[1]->sizes) inner *= s;
      return inner ? x.numel() / inner : 0;
    }
  }
}

void FwdNorm(const RuleCtx& c, FwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  // Statistics are fp32 for low-precision inputs (the accumulate type), else the input dtype.
  int64_t stat_elem = std::max<int64_t>(ElementSize(x.dtype), 4);
  int64_t rows = NormStatRows(c);
  bool training = c.op.attrs.GetBool("training", true);
  if (c.op.kind == OpKind::kBatchNorm && !training) rows = 0;
  p->Save(SavedRef::kInput, 0);
  // The weight and running stats are kept; the bias only by layer_norm, whose backward reads it
  // (derivatives.yaml: native_batch_norm_backward / batch_norm_backward and native_group_norm_backward
  // take no bias). For nn.BatchNorm they are parameters and buffers anyway; instance_norm passes
  // fresh repeats of them (Note [Instance norm]), and its repeated bias dies with the call.
  for (int i = 1; i < c.num_in(); ++i)
    if (!(c.op.kind != OpKind::kLayerNorm && i == 2)) p->Save(SavedRef::kInput, i);
  bool bn_cpu = c.op.kind == OpKind::kBatchNorm && c.profile.batch_norm_cpu_kernels && training;
  if (c.op.kind == OpKind::kBatchNorm && !training) return;
  p->Save(SavedRef::kExtra, p->AddExtra(rows * stat_elem, "mean"));
  p->Save(SavedRef::kExtra, p->AddExtra(rows * stat_elem, "rstd"));
  if (bn_cpu) {
    // CPU batch_norm_cpu_update_stats_template: per-channel mean and var-sum scratch; then the
    // transform's per-channel alpha/beta after the output.
    int m = p->AddExtra(rows * stat_elem, "batch mean scratch");
    int v = p->AddExtra(rows * stat_elem, "var sum scratch");
    p->FreeExtra(v);
    p->FreeExtra(m);
    p->AllocOutput(0);
    int a = p->AddExtra(rows * stat_elem, "alpha scratch");
    int b = p->AddExtra(rows * stat_elem, "beta scratch");
    p->FreeExtra(b);
    p->FreeExtra(a);
  }
}

// rms_norm (X, [weight]), Note [rms_norm]. Fused (CUDA 2.x, _fused_rms_norm): X, weight and an
// fp32 rstd per row saved. Composite (aten/src/ATen/native/layer_norm.cpp rms_norm_symint on the
// CPU): x² → mean → add_(eps) → rsqrt → x·rstd → ·weight, each with its own autograd node.
void FwdRmsNorm(const RuleCtx& c, FwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  const int64_t rows = NormStatRows(c), es = std::max<int64_t>(ElementSize(x.dtype), 4);
  const bool weight = c.num_in() > 1;
  p->Save(SavedRef::kInput, 0);
  if (weight) p->Save(SavedRef::kInput, 1);
  if (c.profile.rms_norm_fused) {
    p->AllocOutput(0);
    p->Save(SavedRef::kExtra, p->AddExtra(rows * 4, "rstd"));
    return;
  }
  int sq = p->AddExtra(x.numel() * es, "x squared");
  int mean = p->AddExtra(rows * es, "mean of squares");
  int rstd = p->AddExtra(rows * es, "rstd");  // a temporary of the expression: x² and the mean die after it
  p->FreeExtra(mean);
  p->FreeExtra(sq);
  p->Save(SavedRef::kExtra, rstd);
  if (!weight) return p->AllocOutput(0);
  int normed = p->AddExtra(x.bytes(), "normalized input");
  p->AllocOutput(0);
  if (c.rg_in(1)) p->Save(SavedRef::kExtra, normed);
  p->ReleaseUnsaved(normed);  // `result = result.mul(weight)` rebinds the name
}

// The composite's nodes in engine order (saved: x, [weight], rstd, [normed]): MulBackward (·weight:
// grad·weight, grad·normed summed into grad_weight), MulBackward (x·rstd: grad·rstd, grad·x summed
// per row), RsqrtBackward (rstd³·-½·grad), MeanBackward (grad / N, expanded), PowBackward (2·x·grad);
// the two grads of x are summed into a new one. Fused: grad_input and grad_weight.
void BwdRmsNorm(const RuleCtx& c, BwdPlan* p) {
  if (c.profile.rms_norm_fused) {
    for (int i = 0; i < c.num_in(); ++i)
      if (c.rg_in(i)) p->GradNew(i);
    return;
  }
  const TensorMeta& x = *c.in[0];
  const int64_t rows = NormStatRows(c), es = std::max<int64_t>(ElementSize(x.dtype), 4), xs = x.numel() * es;
  const bool weight = c.num_in() > 1;
  const int rstd_saved = weight ? 2 : 1;
  int g = -1;  // the grad of x·rstd
  if (weight) {
    g = p->Temp(x.bytes(), "grad of the normalized input");
    if (c.rg_in(1)) {
      int t = p->Temp(x.bytes(), "grad times normalized input");
      p->GradNew(1);
      p->FreeTemp(t);
    }
    p->ReleaseGradOut();
    if (c.rg_in(1)) p->ReleaseSaved(3);
  }
  if (!c.rg_in(0)) return;
  int gx1 = p->Temp(xs, "grad times rstd");
  int tx = p->Temp(xs, "grad times x");
  int gr = p->Temp(rows * es, "grad of rstd");  // grad·x summed per row
  p->FreeTemp(tx);
  if (g >= 0) p->FreeTemp(g);
  else p->ReleaseGradOut();
  int cube = p->Temp(rows * es, "rstd cubed");
  int half = p->Temp(rows * es, "-rstd³/2");
  int gv = p->Temp(rows * es, "grad of the mean of squares");
  p->FreeTemp(cube);
  p->FreeTemp(half);
  p->FreeTemp(gr);
  p->ReleaseSaved(rstd_saved);
  int gsq = p->Temp(xs, "grad of x squared");
  p->FreeTemp(gv);
  int pw = p->Temp(xs, "x to the 1");
  int twice = p->Temp(xs, "2·x");
  int gx2 = p->Temp(xs, "grad of x through x squared");
  p->FreeTemp(pw);
  p->FreeTemp(twice);
  p->FreeTemp(gsq);
  p->ReleaseSaved(0);
  if (c.rg_in(0)) p->GradNew(0);  // the two paths summed out of place
  p->FreeTemp(gx1);
  p->FreeTemp(gx2);
}

void BwdNorm(const RuleCtx& c, BwdPlan* p) {
  int n = c.op.kind == OpKind::kBatchNorm ? std::min<int>(3, c.num_in()) : c.num_in();
  if (c.op.kind == OpKind::kBatchNorm && c.profile.batch_norm_cpu_kernels) {
    // 1.13 CPU: grad_input is allocated twice; the first is discarded after the second.
    int first = c.rg_in(0) ? p->Temp(Bytes(*c.in[0]), "discarded grad_input") : -1;
    for (int i = 1; i < n; ++i)
      if (c.rg_in(i)) p->GradNew(i);
    if (c.rg_in(0)) p->GradNew(0);
    if (first >= 0) p->FreeTemp(first);
    return;
  }
  for (int i = 0; i < n; ++i)
    if (c.rg_in(i)) p->GradNew(i);
  // aten/src/ATen/native/cpu/layer_norm_kernel.cpp LayerNormBackwardKernelImplInternal: the
  // [2, threads, N] dgamma/dbeta buffer exists only when one of them is wanted (a frozen weight
  // and bias, as under LoRA, have none: 1.13 and 2.13 traces of a frozen nn.LayerNorm).
  const bool affine_grad = (c.num_in() > 1 && c.rg_in(1)) || (c.num_in() > 2 && c.rg_in(2));
  if (c.op.kind == OpKind::kLayerNorm && c.profile.layer_norm_backward_scratch && affine_grad) {
    int64_t inner = c.in[0]->numel() / std::max<int64_t>(NormStatRows(c), 1);
    p->FreeTemp(p->Temp(2 * inner * 4, "layer_norm backward scratch"));
  }
}

// Pooling, 2-D and 3-D (Note [3-D convolution and pooling]).
bool Is3dPool(OpKind k) {
  return k == OpKind::kMaxPool3d || k == OpKind::kAvgPool3d || k == OpKind::kAdaptiveAvgPool3d ||
         k == OpKind::kAdaptiveMaxPool3d;
}
bool IsAdaptiveAvg(OpKind k) { return k == OpKind::kAdaptiveAvgPool2d || k == OpKind::kAdaptiveAvgPool3d; }
bool IsAdaptiveMax(OpKind k) { return k == OpKind::kAdaptiveMaxPool2d || k == OpKind::kAdaptiveMaxPool3d; }

/// max_pool{2,3}d with `return_indices` (nn.MaxPool2d(return_indices=True), for nn.MaxUnpool): the
/// indices are output 1 instead of a hidden buffer.
bool ReturnsIndices(const RuleCtx& c) {
  return (c.op.kind == OpKind::kMaxPool2d || c.op.kind == OpKind::kMaxPool3d) && c.op.attrs.GetBool("return_indices", false);
}

Status InferPool(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 1, 1));
  const TensorMeta& x = *c.in[0];
  const int nd = Is3dPool(c.op.kind) ? 3 : 2;
  if (x.dim() != nd + 1 && x.dim() != nd + 2)
    return RuleError(c, "input " + x.ShapeString() + " must be " + std::to_string(nd + 1) + "-D or " +
                            std::to_string(nd + 2) + "-D");
  auto sizes = x.sizes;
  int64_t h = x.dim() - nd;
  if (IsAdaptiveAvg(c.op.kind) || IsAdaptiveMax(c.op.kind)) {
    auto os = SpatialAttr(c, "output_size", nd, std::nullopt);
    if (!os) return RuleError(c, "needs \"output_size\"");
    for (int i = 0; i < nd; ++i) sizes[h + i] = (*os)[i] < 0 ? x.sizes[h + i] : (*os)[i];
  } else {
    auto k = SpatialAttr(c, "kernel_size", nd, std::nullopt);
    if (!k) return RuleError(c, "needs \"kernel_size\"");
    auto s = SpatialAttr(c, "stride", nd, k);
    if (s && s->empty()) s = k;
    auto pad = SpatialAttr(c, "padding", nd, std::vector<int64_t>{0});
    auto dil = SpatialAttr(c, "dilation", nd, std::vector<int64_t>{1});
    if (!s || !pad || !dil) return RuleError(c, "bad stride/padding/dilation");
    bool ceil = c.op.attrs.GetBool("ceil_mode", false);
    for (int i = 0; i < nd; ++i) {
      if ((*s)[i] <= 0 || (*k)[i] <= 0) return RuleError(c, "kernel and stride must be positive");
      sizes[h + i] = WindowOut(x.sizes[h + i], (*k)[i], (*s)[i], (*pad)[i], (*dil)[i], ceil);
      if (sizes[h + i] <= 0) return RuleError(c, "output would be empty for " + x.ShapeString());
    }
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  if (ReturnsIndices(c)) o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, sizes));
  return Status::OK();
}

/// adaptive_avg_pool{2,3}d to an all-ones output size: ATen computes a mean over the spatial dims.
bool IsGlobalAvg(const RuleCtx& c) {
  if (!IsAdaptiveAvg(c.op.kind) || c.out.size() != 1) return false;
  const TensorMeta& y = *c.out[0];
  const int nd = c.op.kind == OpKind::kAdaptiveAvgPool3d ? 3 : 2;
  for (int i = 1; i <= nd; ++i)
    if (y.sizes[y.dim() - i] != 1) return false;
  return true;
}

void FwdPool(const RuleCtx& c, FwdPlan* p) {
  if (ReturnsIndices(c)) {
    p->AllocOutput(0);
    p->AllocOutput(1);
    p->Save(SavedRef::kInput, 0);
    p->Save(SavedRef::kOutput, 1);
    return;
  }
  if (c.op.kind == OpKind::kMaxPool2d || c.op.kind == OpKind::kMaxPool3d) {
    p->AllocOutput(0);
    int idx = p->AddExtra(c.out[0]->numel() * c.profile.maxpool_index_bytes, "max_pool indices");
    p->Save(SavedRef::kInput, 0);
    p->Save(SavedRef::kExtra, idx);
    return;
  }
  // adaptive_max_pool{2,3}d (derivatives.yaml: adaptive_max_pool2d_backward(grad, self, result1)):
  // the output, then the int64 indices (the structured CPU and CUDA kernels alike), both kept
  // with the input (Note [Adaptive max pooling]).
  if (IsAdaptiveMax(c.op.kind)) {
    p->AllocOutput(0);
    int idx = p->AddExtra(c.out[0]->numel() * 8, "adaptive_max_pool indices");
    p->Save(SavedRef::kInput, 0);
    p->Save(SavedRef::kExtra, idx);
    return;
  }
  // adaptive_avg_pool to 1×1(×1) is a mean over the spatial dims (MeanBackward: sizes only in 2.x).
  if (IsGlobalAvg(c) && !c.profile.mean_keeps_input) return;
  p->Save(SavedRef::kInput, 0);
}

// The pooling backward kernels (aten/src/ATen/native/cpu/AvgPoolKernel.cpp cpu_avg_pool_backward,
// AdaptiveAvgPoolKernel.cpp, MaxPoolKernel.cpp cpu_max_pool_backward, AdaptiveMaxPoolKernel.cpp;
// 1.13 and 2.x) take `grad_output_.contiguous()` after the structured grad_input is allocated: a
// copy of a non-contiguous incoming grad (a slice of a cat's grad), freed when the kernel returns
// (1.13 and 2.13 pool1d_net traces). A global average pool is a mean (MeanBackward: no copy).
void BwdPool(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  p->GradNew(0);
  if (!IsGlobalAvg(c)) FreeIfTemp(p, ContiguousGrad(c, p, "grad_output contiguous"));
}

/// The sizes of a pooling op's output given by its "output_size" attribute: the input's batch and
/// channel dims (the input [N, C, *] or [C, *] with |nd| spatial dims), then output_size.
Result<std::vector<int64_t>> SizedByOutputSize(const RuleCtx& c, size_t nd) {
  const TensorMeta& x = *c.in[0];
  if (x.dim() != static_cast<int64_t>(nd) + 1 && x.dim() != static_cast<int64_t>(nd) + 2)
    return RuleError(c, "input " + x.ShapeString() + " has the wrong rank");
  auto os = c.op.attrs.GetInts("output_size", c.bindings);
  if (!os || os->size() != nd) return RuleError(c, "needs \"output_size\" with " + std::to_string(nd) + " values");
  auto sizes = x.sizes;
  std::copy(os->begin(), os->end(), sizes.end() - nd);
  return sizes;
}

// max_unpool{2,3}d(X, indices) (Note [MaxUnpool]): the output zeroed then scattered into
// (max_unpooling2d_forward_out_cpu / max_unpooling3d_forward_out_cpu); derivatives.yaml keeps the
// indices (non-differentiable) and returns max_pool_double_backward(grad, indices, nd)
// (FunctionsManual.cpp): `grad.contiguous().view(...).gather(-1, indices)`, an X-sized grad (a
// non-contiguous grad copied first, the copy dying with the expression).
Status InferMaxUnpool(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 2));
  const TensorMeta& x = *c.in[0];
  if (c.in[1]->sizes != x.sizes || IsFloating(c.in[1]->dtype))
    return RuleError(c, "indices " + c.in[1]->ShapeString() + " must be integers of the input's shape " + x.ShapeString());
  MEMSIM_ASSIGN_OR_RETURN(auto sizes, SizedByOutputSize(c, c.op.kind == OpKind::kMaxUnpool3d ? 3 : 2));
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

void FwdMaxUnpool(const RuleCtx& c, FwdPlan* p) { p->Save(SavedRef::kInput, 1); }

void BwdMaxUnpool(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  const int copy = ContiguousGrad(c, p);
  p->GradNew(0);
  FreeIfTemp(p, copy);
}

// fractional_max_pool{2,3}d(X, random_samples) (Note [Fractional max pooling]): structured kernels
// (aten/src/ATen/native/FractionalMaxPool2d.cpp / 3d.cpp, 1.13 and 2.x) allocating the output and
// its int64 indices; derivatives.yaml keeps the input and the indices (`random_samples:
// non_differentiable`). The indices are output 1 with `return_indices`, else a hidden buffer.
Status InferFractionalPool(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 2));
  const TensorMeta& x = *c.in[0];
  MEMSIM_ASSIGN_OR_RETURN(auto sizes, SizedByOutputSize(c, c.op.kind == OpKind::kFractionalMaxPool3d ? 3 : 2));
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  if (c.op.attrs.GetBool("return_indices", false)) o->Fresh(TensorMeta::Contiguous(Dtype::kInt64, sizes));
  return Status::OK();
}

void FwdFractionalPool(const RuleCtx& c, FwdPlan* p) {
  p->AllocOutput(0);
  p->Save(SavedRef::kInput, 0);
  if (c.op.attrs.GetBool("return_indices", false)) {
    p->AllocOutput(1);
    p->Save(SavedRef::kOutput, 1);
    return;
  }
  p->Save(SavedRef::kExtra, p->AddExtra(c.out[0]->numel() * 8, "fractional_max_pool indices"));
}

constexpr uint32_t kNormDiff = 7u;      // X, weight, bias (running stats are not)

}  // namespace

const std::vector<OpRule> kNnRules = {
    {OpKind::kLinear, 2, 3, 7u, InferLinear, FwdLinear, BwdLinear, AliasGradSame, false, true, 2},
    {OpKind::kMatmul, 2, 2, 3u, InferMatmul, FwdMatmul, BwdMatmul, nullptr, false, true},
    {OpKind::kMm, 2, 2, 3u, InferMatmul, FwdMatmul, BwdMatmul, nullptr, false, true},
    {OpKind::kBmm, 2, 2, 3u, InferMatmul, FwdMatmul, BwdMatmul, nullptr, false, true},
    {OpKind::kBaddbmm, 3, 3, 7u, InferBaddbmm, FwdBaddbmm, BwdBaddbmm, AliasGradSame, false, true},
    {OpKind::kEmbedding, 2, 2, 2u, InferEmbedding, FwdEmbedding, BwdEmbedding},
    {OpKind::kEmbeddingBag, 3, 3, 1u, InferEmbeddingBag, FwdEmbeddingBag, BwdEmbeddingBag},
    {OpKind::kBatchNorm, 1, 5, kNormDiff, InferNorm, FwdNorm, BwdNorm},
    {OpKind::kLayerNorm, 1, 3, kNormDiff, InferNorm, FwdNorm, BwdNorm},
    {OpKind::kGroupNorm, 1, 3, kNormDiff, InferNorm, FwdNorm, BwdNorm},
    {OpKind::kRmsNorm, 1, 2, 3u, InferNorm, FwdRmsNorm, BwdRmsNorm},
    {OpKind::kMaxPool2d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kAvgPool2d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kAdaptiveAvgPool2d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kMaxPool3d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kAvgPool3d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kAdaptiveAvgPool3d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kAdaptiveMaxPool2d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kAdaptiveMaxPool3d, 1, 1, 1u, InferPool, FwdPool, BwdPool},
    {OpKind::kMaxUnpool2d, 2, 2, 1u, InferMaxUnpool, FwdMaxUnpool, BwdMaxUnpool},
    {OpKind::kMaxUnpool3d, 2, 2, 1u, InferMaxUnpool, FwdMaxUnpool, BwdMaxUnpool},
    {OpKind::kFractionalMaxPool2d, 2, 2, 1u, InferFractionalPool, FwdFractionalPool, BwdPool},
    {OpKind::kFractionalMaxPool3d, 2, 2, 1u, InferFractionalPool, FwdFractionalPool, BwdPool},
};

Status InferEmbedding(const RuleCtx& c, InferOut* o) {
  if (c.in.size() != 2) return RuleError(c, "expected 2 inputs, got " + std::to_string(c.in.size()));
  const TensorMeta& idx = *c.in[0];
  const TensorMeta& w = *c.in[1];
  if (IsFloating(idx.dtype)) return RuleError(c, "indices must be an integer tensor");
  if (w.dim() != 2) return RuleError(c, "weight must be [num_embeddings, dim]");
  auto sizes = idx.sizes;
  sizes.push_back(w.sizes[1]);
  o->Fresh(TensorMeta::Contiguous(w.dtype, sizes));
  return Status::OK();
}

}  // namespace memsim
