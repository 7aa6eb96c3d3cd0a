// F.scaled_dot_product_attention (q, k, v, [mask]): the backend PyTorch picks (sdpa_backend.h)
// decides what the forward allocates and saves and what the backward allocates (Note [SDPA
// backends] in docs/op-rules.md).
//   fused (flash, cuDNN, efficient): q, k, v, the output and an fp32 logsumexp are saved;
//   CPU flash: the output follows q's memory order, a per-thread fp32 buffer lives around the
//     kernel, and the grads are laid out [B, L, H, D] (returned as [B, H, L, D] views);
//   math (`_scaled_dot_product_attention_math`): the composite's own autograd nodes, emulated
//     node by node (the scaled q and kᵀ, the S² scores, probabilities and dropout tensors).
#include <algorithm>
#include <vector>

#include "lib/ops/op_rules.h"
#include "lib/ops/ring_attention.h"
#include "lib/ops/sdpa_backend.h"
#include "lib/ops/tensor_meta.h"

namespace memsim {
namespace {

struct Dims {
  int64_t bh = 0, s_q = 0, s_k = 0, e = 0, e_v = 0;
};

Dims DimsOf(const RuleCtx& c) {
  const TensorMeta& q = *c.in[0];
  Dims d;
  d.s_q = q.sizes[q.dim() - 2];
  d.e = q.sizes.back();
  d.s_k = c.in[1]->sizes[c.in[1]->dim() - 2];
  d.e_v = c.in[2]->sizes.back();
  d.bh = q.numel() / (d.s_q * d.e);
  return d;
}

bool Reduced(Dtype t) { return t == Dtype::kFloat16 || t == Dtype::kBFloat16; }
/// The math path computes fp16/bf16 inputs in fp32 (2.x, unless allowFP16BF16ReductionMathSDP).
Dtype MathDtype(Dtype t) { return Reduced(t) ? Dtype::kFloat32 : t; }

/// [B, H, L, D] laid out [B, L, H, D]: what the CPU flash kernels allocate.
/// A dense tensor of |sizes| whose dimensions lie in memory in the order of |like|'s strides (the
/// CPU flash kernel's output takes the query's layout: nn.MultiheadAttention's [L, N·H, E] view
/// makes its permute(2, 0, 1, 3) contiguous, a Hugging Face [B, L, H, D] one its transpose(1, 2)).
TensorMeta DenseLike(Dtype t, const std::vector<int64_t>& sizes, const TensorMeta& like) {
  TensorMeta m = *TensorMeta::Contiguous(t, sizes);
  std::vector<size_t> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return like.strides[a] > like.strides[b]; });
  int64_t stride = 1;
  for (size_t k = order.size(); k-- > 0;) {
    m.strides[order[k]] = stride;
    stride *= sizes[order[k]];
  }
  return m;
}

TensorMeta HeadsInnerLayout(Dtype t, const std::vector<int64_t>& sizes) {
  TensorMeta m = *TensorMeta::Contiguous(t, sizes);
  const size_t n = sizes.size();
  if (n == 4) m.strides = {sizes[1] * sizes[2] * sizes[3], sizes[3], sizes[1] * sizes[3], 1};
  return m;
}

/// [B, H, S, E] as the transpose of a contiguous [B, H, E, S]: the grad of kᵀ·√scale, transposed back.
TensorMeta LastTwoTransposed(Dtype t, const std::vector<int64_t>& sizes) {
  TensorMeta m = *TensorMeta::Contiguous(t, sizes);
  const size_t n = sizes.size();
  if (n >= 2) {
    m.strides[n - 1] = sizes[n - 2];
    m.strides[n - 2] = 1;
  }
  return m;
}

/// The layout a fused kernel gives its output (|output|) or the grad of input |t| (Note [SDPA
/// backends]): [B, L, H, D] order when |t| is in that order (nanoGPT's and HF's transposed head
/// views: the CPU flash output, CUDA flash's empty_like(q.transpose(1, 2)) and cuDNN's
/// alloc_with_matching_layout), else contiguous; CUDA's efficient kernel allocates its output
/// [B, L, H, D] always (at::empty({B, M, num_heads, Kv})), and the CPU flash backward its grads.
/// The math path: contiguous.
TensorMeta FusedLayout(const RuleCtx& c, const TensorMeta& t, const std::vector<int64_t>& sizes, bool output) {
  const SdpaBackend b = SdpaBackendOfOp(c);
  if (sizes.size() != 4 || b == SdpaBackend::kMath || (!c.profile.cuda && b != SdpaBackend::kFlash))
    return *TensorMeta::Contiguous(t.dtype, sizes);
  if (!c.profile.cuda && !output) return HeadsInnerLayout(t.dtype, sizes);  // the CPU flash grads
  if (!c.profile.cuda) return DenseLike(t.dtype, sizes, t);  // the CPU flash output
  const bool heads_inner = t.strides[1] < t.strides[2] || (output && c.profile.cuda && b == SdpaBackend::kEfficient);
  return heads_inner ? HeadsInnerLayout(t.dtype, sizes) : *TensorMeta::Contiguous(t.dtype, sizes);
}

/// CPU flash: qSplit·(kvSplit + 2 + Dv) accumulate-dtype elements per thread in forward, and
/// qSplit·kvSplit·2 + qSplit in backward (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp:
/// qSplit 256/64/32 by S_q >= 768/192, kvSplit min(512, S_k)).

/// Context parallel: the ring's output is a torch.cat when its last merge was a `partial` one
/// (Note [Context parallel]); else the merged out keeps the kernel's layout.
bool RingOutputContiguous(const RuleCtx& c) {
  const ContextParallelRank& cp = c.profile.cp;
  if (cp.world <= 1 || SdpaBackendOfOp(c) == SdpaBackend::kMath) return false;
  const std::vector<RingStep> steps = RingSteps(cp.world, cp.rank, c.op.attrs.GetBool("is_causal", false), cp.load_balance);
  for (size_t i = steps.size(); i-- > 1;)
    if (!steps[i].skip) return steps[i].partial;
  return false;
}

Status InferSdpa(const RuleCtx& c, InferOut* o) {
  const TensorMeta& q = *c.in[0];
  const TensorMeta& k = *c.in[1];
  const TensorMeta& v = *c.in[2];
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim() || q.sizes.back() != k.sizes.back() ||
      k.sizes[k.dim() - 2] != v.sizes[v.dim() - 2])
    return RuleError(c, "q " + q.ShapeString() + ", k " + k.ShapeString() + ", v " + v.ShapeString() + " do not match");
  auto sizes = q.sizes;
  sizes.back() = v.sizes.back();
  auto out = TensorMeta::Contiguous(q.dtype, sizes);
  if (out && q.dim() == 4 && !RingOutputContiguous(c)) *out = FusedLayout(c, q, sizes, /*output=*/true);
  o->Fresh(std::move(out));
  return Status::OK();
}

void FwdFused(const RuleCtx& c, const Dims& d, SdpaBackend backend, FwdPlan* p) {
  for (int i = 0; i < c.num_in(); ++i) p->Save(SavedRef::kInput, i);
  int64_t rows = backend == SdpaBackend::kEfficient ? (d.s_q + 31) / 32 * 32 : d.s_q;
  // CUDA cuDNN: the philox seed and offset (int64 scalars, allocated with or without dropout)
  // come before the output (_scaled_dot_product_cudnn_attention_cuda).
  const bool cudnn = c.profile.cuda && backend == SdpaBackend::kCudnn;
  const int seed = cudnn ? p->AddExtra(8, "philox seed") : -1, offset = cudnn ? p->AddExtra(8, "philox offset") : -1;
  p->AllocOutput(0);
  // Saved in the order of their names (logsumexp before output, Note [Activation offloading]).
  p->Save(SavedRef::kExtra, p->AddExtra(d.bh * rows * 4, "logsumexp"));
  p->Save(SavedRef::kOutput, 0);
  if (c.profile.cuda) {
    if (cudnn) {
      p->Save(SavedRef::kExtra, seed);
      p->Save(SavedRef::kExtra, offset);
      p->FreeExtra(p->AddExtra(256, "cuDNN forward workspace"));
    } else if (backend == SdpaBackend::kFlash) {
      // flash's rng_state (two uint64) and its `unused` int64 scalar, saved as the node's
      // philox_seed and philox_offset (_scaled_dot_product_flash_attention_cuda).
      p->Save(SavedRef::kExtra, p->AddExtra(16, "flash rng_state"));
      p->Save(SavedRef::kExtra, p->AddExtra(8, "flash philox offset"));
    }
    return;
  }
  const int64_t q_split = FlashCpuQSplit(d.s_q), kv_split = FlashCpuKvSplit(d.s_k);
  const int64_t acc = c.in[0]->dtype == Dtype::kFloat64 ? 8 : 4;
  int buf = p->AddExtra(c.profile.cpu_threads * q_split * (kv_split + 2 + d.e_v) * acc, "flash per-thread buffer");
  int reduced = Reduced(c.in[0]->dtype)
                    ? p->AddExtra(c.profile.cpu_threads * q_split * kv_split * ElementSize(c.in[0]->dtype),
                                  "flash per-thread reduced buffer")
                    : -1;
  if (reduced >= 0) p->FreeExtra(reduced);
  p->FreeExtra(buf);
}

/// at::matmul of two ≥3-d operands reshapes each to [batch, n, m] before bmm
/// (aten/src/ATen/native/LinearAlgebra.cpp `_matmul_impl`): a copy (clone, then _unsafe_view)
/// unless the batch dims merge as a view.
bool MatmulCopies(const TensorMeta& t) {
  const size_t n = t.sizes.size();
  if (n <= 3) return false;
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < n; ++i) batch *= t.sizes[i];
  return !ViewStrides(t.sizes, t.strides, {batch, t.sizes[n - 2], t.sizes[n - 1]}).has_value();
}

/// `t * scalar` from C++ (mul.Scalar): the wrapped double and its cast live around the output
/// (rules_pointwise.cc TransientScalar, Profile::scalar_operand_bytes).
int ScalarMul(const RuleCtx& c, FwdPlan* p, Dtype dt, int64_t out_bytes, const char* what) {
  if (c.profile.scalar_operand_bytes == 0) return out_bytes > 0 ? p->AddExtra(out_bytes, what) : -1;
  int k = p->AddExtra(c.profile.scalar_operand_bytes, "wrapped scalar");
  int cast = p->AddExtra(ElementSize(dt), "wrapped scalar, cast");
  int out = out_bytes > 0 ? p->AddExtra(out_bytes, what) : -1;
  p->FreeExtra(cast);
  p->FreeExtra(k);
  return out;
}

// _scaled_dot_product_attention_math (aten/src/ATen/native/transformers/attention.cpp), 2.x:
// query = q·√scale (fp32 copies first for fp16/bf16, a local until the function returns);
// is_causal: ones(L, S).tril() and convert_boolean_attn_mask's where(mask, 0, -inf) (kept until
// the return); matmul(query, kᵀ·√scale) — each operand copied when its batch dims do not merge
// (MatmulCopies: nanoGPT's and HF's transposed heads), the bmm saving the copies; the mask
// added in place; _safe_softmax (a bool S², a bool row mask and a scalar around it); dropout
// (noise, div_ by a wrapped scalar, input·noise); matmul with v (copied likewise); fp16/bf16:
// the probabilities and the output cast back. Saved, one entry per SavedVariable as each inner
// node saves it (Note [Activation offloading]): kᵀ and q (the first bmm's mat2 and self), the
// probabilities (_safe_softmax's result), [the noise (dropout's mul)], v and the (dropped)
// probabilities (the last bmm's mat2 and self).
void FwdMath(const RuleCtx& c, const Dims& d, FwdPlan* p) {
  const Dtype in = c.in[0]->dtype, acc = MathDtype(in);
  const int64_t es = ElementSize(acc), s2 = d.bh * d.s_q * d.s_k;
  const bool up = acc != in, dropout = c.op.attrs.GetFloat("dropout_p", 0.0) > 0;
  const TensorMeta &q = *c.in[0], &k = *c.in[1], &v = *c.in[2];
  // fp32 copies of q, k, v (locals of the math function: they die as it returns)
  if (up) p->AddExtra(Bytes(q) / ElementSize(in) * es, "q in fp32");
  if (up) p->AddExtra(Bytes(k) / ElementSize(in) * es, "k in fp32");
  const int v_acc = up ? p->AddExtra(Bytes(v) / ElementSize(in) * es, "v in fp32") : -1;
  int qs = ScalarMul(c, p, acc, d.bh * d.s_q * d.e * es, "q scaled");
  int mask = -1;
  if (c.op.attrs.GetBool("is_causal", false)) {  // the [L, S] bool tril, then its additive form
    int ones = p->AddExtra(d.s_q * d.s_k, "causal ones");
    int tril = p->AddExtra(d.s_q * d.s_k, "causal mask");
    p->FreeExtra(ones);
    int zero = p->AddExtra(es, "scalar_tensor 0");
    int ninf = p->AddExtra(es, "scalar_tensor -inf");
    mask = p->AddExtra(d.s_q * d.s_k * es, "causal additive mask");
    p->FreeExtra(ninf);
    p->FreeExtra(zero);
    p->FreeExtra(tril);
  }
  int ks = ScalarMul(c, p, acc, d.bh * d.s_k * d.e * es, "k transposed scaled");
  TensorMeta kt = k;
  std::swap(kt.sizes[kt.dim() - 1], kt.sizes[kt.dim() - 2]);
  std::swap(kt.strides[kt.dim() - 1], kt.strides[kt.dim() - 2]);
  const int qc = MatmulCopies(DenseInOrderOf(acc, q)) ? p->AddExtra(d.bh * d.s_q * d.e * es, "q scaled, bmm copy") : qs;
  const int kc = MatmulCopies(DenseInOrderOf(acc, kt)) ? p->AddExtra(d.bh * d.s_k * d.e * es, "k scaled, bmm copy") : ks;
  p->SaveNow(SavedRef::kExtra, kc);
  p->SaveNow(SavedRef::kExtra, qc);
  int scores = p->AddExtra(s2 * es, "attention scores");
  p->ReleaseUnsaved(ks);  // an rvalue of the matmul
  int probs = p->AddExtra(s2 * es, "attention probs");
  int neginf = p->AddExtra(s2, "safe_softmax -inf mask");
  int row = p->AddExtra(d.bh * d.s_q, "safe_softmax row mask");
  p->FreeExtra(p->AddExtra(es, "safe_softmax zero"));
  p->FreeExtra(row);
  p->FreeExtra(neginf);
  p->SaveNow(SavedRef::kExtra, probs);
  p->FreeExtra(scores);
  int weights = probs;
  if (dropout) {
    int noise = p->AddExtra(s2 * es, "dropout noise");
    ScalarMul(c, p, acc, 0, "");  // noise.div_(1 - p)
    p->SaveNow(SavedRef::kExtra, noise);
    weights = p->AddExtra(s2 * es, "dropped probs");
    p->ReleaseUnsaved(noise);  // dropout's local, then `attn = dropout(attn)` rebinds the name
    p->ReleaseUnsaved(probs);
  }
  // fp16/bf16: the attention weights the math function returns, cast back before the last bmm
  // (then dropped by F.scaled_dot_product_attention); the bmm with v (v's fp32 copy when upcast)
  // saves v and the weights; then the fp32 output before its cast
  if (up) p->AddExtra(s2 * ElementSize(in), "attention weights cast back");
  const bool v_copies = MatmulCopies(up ? DenseInOrderOf(acc, v) : v);
  if (v_copies) p->SaveNow(SavedRef::kExtra, p->AddExtra(d.bh * d.s_k * d.e_v * es, "v, bmm copy"));
  else p->SaveNow(up ? SavedRef::kExtra : SavedRef::kInput, up ? v_acc : 2);
  p->SaveNow(SavedRef::kExtra, weights);
  if (up) p->AddExtra(d.bh * d.s_q * d.e_v * es, "output in fp32");
  p->AllocOutput(0);
  p->ReleaseUnsaved(qs);  // the local `query`, then the mask, as the function returns
  if (mask >= 0) p->FreeExtra(mask);
}

void FwdSdpa(const RuleCtx& c, FwdPlan* p) {
  const Dims d = DimsOf(c);
  SdpaBackend b = SdpaBackendOfOp(c);
  if (b == SdpaBackend::kMath) return FwdMath(c, d, p);
  if (c.profile.cp.world > 1) return FwdRingAttention(c, b, p);
  FwdFused(c, d, b, p);
}

// The math path's nodes in engine order (saved indices as FwdMath saves them: k scaled, q
// scaled, probs, [noise], v, the (dropped) probs): BmmBackward (grad v, then grad of the
// weights), [MulBackward: · noise], SafeSoftmaxBackward, BmmBackward (grad kᵀ, grad q),
// MulBackward (k), MulBackward (q). Each node drops its incoming grad and its saved tensors.
void BwdMath(const RuleCtx& c, const Dims& d, BwdPlan* p) {
  const Dtype acc = MathDtype(c.in[0]->dtype);
  const int64_t es = ElementSize(acc), s2 = d.bh * d.s_q * d.s_k;
  const bool dropout = c.op.attrs.GetFloat("dropout_p", 0.0) > 0;
  const int ks_saved = 0, qs_saved = 1, probs_saved = 2, noise_saved = 3;
  const int v_saved = dropout ? 4 : 3, weights_saved = v_saved + 1;
  if (c.rg_in(2)) p->GradNew(2);
  int g = p->Temp(s2 * es, "grad of the attention weights");
  p->ReleaseGradOut();
  p->ReleaseSaved(v_saved);
  p->ReleaseSaved(weights_saved);
  if (dropout) {
    int g2 = p->Temp(s2 * es, "grad of the probabilities");
    p->FreeTemp(g);
    p->ReleaseSaved(noise_saved);
    g = g2;
  }
  int gs = p->Temp(s2 * es, "grad of the scores");
  p->FreeTemp(g);
  p->ReleaseSaved(probs_saved);
  int gk = p->Temp(d.bh * d.s_k * d.e * es, "grad of k scaled");
  int gq = p->Temp(d.bh * d.s_q * d.e * es, "grad of q scaled");
  p->FreeTemp(gs);
  p->ReleaseSaved(qs_saved);
  p->ReleaseSaved(ks_saved);
  if (c.rg_in(1)) p->GradNewLike(1, LastTwoTransposed(c.in[1]->dtype, c.in[1]->sizes));
  p->FreeTemp(gk);
  if (c.rg_in(0)) p->GradNew(0);
  p->FreeTemp(gq);
}

// CUDA backward scratch after the grads (Note [SDPA backends], measured on an H100 with 2.11):
// flash (flash-attention 2's mha_bwd): softmax_d [B, H, S_q rounded to 128] fp32, then dq_accum
// [B, S_q rounded to 128, H, D rounded to 32 (64 above 128)] fp32, freed in reverse.
void BwdCudaFlash(const Dims& d, BwdPlan* p) {
  const int64_t rows = (d.s_q + 127) / 128 * 128, e = d.e <= 128 ? (d.e + 31) / 32 * 32 : (d.e + 63) / 64 * 64;
  int softmax_d = p->Temp(d.bh * rows * 4, "flash softmax_d");
  p->FreeTemp(p->Temp(d.bh * rows * e * 4, "flash dq_accum"));
  p->FreeTemp(softmax_d);
}

// cuDNN: one workspace from the cuDNN graph: the fp32 dQ accumulator, the fp32 softmax row
// sums [B, H, S_q] and 256 bytes; with grouped-query attention (fewer k/v heads) also dK and dV
// expanded to the query heads, in the input dtype (measured at 16 query and 4 k/v heads).
void BwdCudaCudnn(const RuleCtx& c, const Dims& d, BwdPlan* p) {
  const TensorMeta& k = *c.in[1];
  const bool gqa = k.dim() == 4 && c.in[0]->dim() == 4 && k.sizes[1] < c.in[0]->sizes[1];
  const int64_t expanded = gqa ? 2 * d.bh * d.s_k * d.e * ElementSize(k.dtype) : 0;
  p->FreeTemp(p->Temp(d.bh * d.s_q * d.e * 4 + d.bh * d.s_q * 4 + 256 + expanded, "cuDNN backward workspace"));
}

// efficient (_efficient_attention_backward, attention_backward.cu + kernel_backward.h): delta
// [B, H, M] fp32 — for fp32 inputs computed outside the kernel (kKernelComputesDelta needs
// half): (grad_out.float() * out.float()).sum(-1).transpose(-2, -1).contiguous(), the product
// and the sum temporaries first — then the kernel's workspace, B·H·workspace_strideBH() floats:
// gQ accumulation (ceil(M / kBlockSizeI) · ceil(K / 64) GradQTempStorage tiles of kBlockSizeI
// × 64 floats + a 16-byte lock) and, when the output does not fit the registers (K >
// kBlockSizeJ = 64), gK and gV accumulators (align(N, 64) · align(K, kBlockSizeI) floats each).
// kBlockSizeI is 64 for K <= 64, else 128. Measured at K = 64.
void BwdCudaEfficient(const RuleCtx& c, const Dims& d, BwdPlan* p) {
  const int64_t b_t_h = d.bh * d.s_q;
  int delta;
  if (!Reduced(c.in[0]->dtype)) {
    int prod = p->Temp(b_t_h * d.e_v * 4, "efficient grad_out * out");
    int sum = p->Temp(b_t_h * 4, "efficient delta sum");
    delta = p->Temp(b_t_h * 4, "efficient delta");
    p->FreeTemp(sum);
    p->FreeTemp(prod);
  } else {
    delta = p->Temp(b_t_h * 4, "efficient delta");
  }
  const int64_t block_i = d.e <= 64 ? 64 : 128;
  auto up = [](int64_t x, int64_t m) { return (x + m - 1) / m * m; };
  int64_t per_bh = (d.s_q + block_i - 1) / block_i * ((d.e + 63) / 64) * (block_i * 64 + 4);
  if (d.e > 64) per_bh += up(d.s_k, 64) * up(d.e, block_i) + up(d.s_k, 64) * up(d.e_v, block_i);
  int ws = p->Temp(d.bh * up(per_bh, 4) * 4, "efficient workspace");
  p->FreeTemp(delta);
  p->FreeTemp(ws);
}

/// The CPU flash backward reads the incoming grad as grad_out.transpose(1, 2).contiguous()
/// ([B, L, H, D]): a grad in another layout (nn.MultiheadAttention's, from its output's permute)
/// is copied after the grads are allocated and freed when the op returns (a 2.13 CPU probe of
/// _scaled_dot_product_flash_attention_for_cpu_backward with three grad layouts: only a
/// [B, L, H, D]-ordered grad is not copied). -1: no copy.
int GradOutCopy(const RuleCtx& c, BwdPlan* p) {
  if (c.grad_out == nullptr || c.grad_out->sizes.size() != 4) return -1;
  TensorMeta t = *c.grad_out;
  std::swap(t.sizes[1], t.sizes[2]);
  std::swap(t.strides[1], t.strides[2]);
  if (t.is_contiguous()) return -1;
  return p->Temp(c.grad_out->bytes(), "flash backward grad_out copy ([B, L, H, D])");
}

void BwdSdpa(const RuleCtx& c, BwdPlan* p) {
  const Dims d = DimsOf(c);
  SdpaBackend b = SdpaBackendOfOp(c);
  if (b == SdpaBackend::kMath) return BwdMath(c, d, p);
  if (c.profile.cp.world > 1) return BwdRingAttention(c, b, p);
  for (int i = 0; i < 3; ++i)  // the grads, laid out as the kernels allocate them
    if (c.rg_in(i)) p->GradNewLike(i, FusedLayout(c, *c.in[i], c.in[i]->sizes, /*output=*/false));
  if (!c.profile.cuda) {  // CPU flash: the incoming grad in [B, L, H, D] order, per-thread buffers
    const int copy = GradOutCopy(c, p);
    const int64_t q_split = FlashCpuQSplit(d.s_q), kv_split = FlashCpuKvSplit(d.s_k);
    const int64_t acc = c.in[0]->dtype == Dtype::kFloat64 ? 8 : 4;
    int buf = p->Temp(c.profile.cpu_threads * q_split * kv_split * 2 * acc, "flash backward per-thread buffer");
    p->FreeTemp(p->Temp(c.profile.cpu_threads * q_split * acc, "flash backward row sums"));
    p->FreeTemp(buf);
    if (copy >= 0) p->FreeTemp(copy);
    return;
  }
  if (b == SdpaBackend::kFlash) return BwdCudaFlash(d, p);
  if (b == SdpaBackend::kCudnn) return BwdCudaCudnn(c, d, p);
  BwdCudaEfficient(c, d, p);
}

}  // namespace

int64_t FlashCpuQSplit(int64_t s_q) { return std::min<int64_t>(s_q >= 768 ? 256 : s_q >= 192 ? 64 : 32, s_q); }
int64_t FlashCpuKvSplit(int64_t s_k) { return std::min<int64_t>(s_k, 512); }

TensorMeta DenseInOrderOf(Dtype dt, const TensorMeta& t) {
  TensorMeta m = *TensorMeta::Contiguous(dt, t.sizes);
  std::vector<size_t> order(t.sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.strides[a] > t.strides[b]; });
  int64_t stride = 1;
  for (size_t i = order.size(); i-- > 0;) {
    m.strides[order[i]] = stride;
    stride *= t.sizes[order[i]];
  }
  return m;
}

const std::vector<OpRule> kAttentionRules = {
    {OpKind::kSdpa, 3, 4, 7u, InferSdpa, FwdSdpa, BwdSdpa},
};

}  // namespace memsim
