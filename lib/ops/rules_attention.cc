// F.scaled_dot_product_attention (q, k, v, [mask]): the backend PyTorch picks (sdpa_backend.h)
// decides what the forward allocates and saves and what the backward allocates (Note [SDPA
// backends] in docs/op-rules.md).
//   fused (flash, cuDNN, efficient): q, k, v, the output and an fp32 logsumexp are saved;
//   CPU flash: the output follows q's memory order, a per-thread fp32 buffer lives around the
//     kernel, and the grads are laid out [B, L, H, D] (returned as [B, H, L, D] views);
//   math (`_scaled_dot_product_attention_math`): the composite's own autograd nodes, emulated
//     node by node (the scaled q and kᵀ, the S² scores, probabilities and dropout tensors).
#include <algorithm>

#include "lib/ops/op_rules.h"
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

bool CpuFlash(const RuleCtx& c) { return !c.profile.cuda && SdpaBackendOfOp(c) == SdpaBackend::kFlash; }

bool Reduced(Dtype t) { return t == Dtype::kFloat16 || t == Dtype::kBFloat16; }
/// The math path computes fp16/bf16 inputs in fp32 (2.x, unless allowFP16BF16ReductionMathSDP).
Dtype MathDtype(Dtype t) { return Reduced(t) ? Dtype::kFloat32 : t; }

/// [B, H, L, D] laid out [B, L, H, D]: what the CPU flash kernels allocate.
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

/// CPU flash: qSplit·(kvSplit + 2 + Dv) accumulate-dtype elements per thread in forward, and
/// qSplit·kvSplit·2 + qSplit in backward (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp:
/// qSplit 256/64/32 by S_q >= 768/192, kvSplit min(512, S_k)).
int64_t QSplit(int64_t s_q) { return s_q >= 768 ? 256 : s_q >= 192 ? 64 : 32; }
int64_t KvSplit(int64_t s_k) { return s_k < 512 ? s_k : 512; }

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
  // The CPU flash output is allocated like the query: [B, L, H, D] order for nanoGPT's
  // transposed views, so the `y.transpose(1, 2).contiguous()` after it copies nothing.
  if (out && q.dim() == 4 && CpuFlash(c) && q.strides[1] < q.strides[2]) *out = HeadsInnerLayout(q.dtype, sizes);
  o->Fresh(std::move(out));
  return Status::OK();
}

void FwdFused(const RuleCtx& c, const Dims& d, SdpaBackend backend, FwdPlan* p) {
  for (int i = 0; i < c.num_in(); ++i) p->Save(SavedRef::kInput, i);
  int64_t rows = backend == SdpaBackend::kEfficient ? (d.s_q + 31) / 32 * 32 : d.s_q;
  p->AllocOutput(0);
  // Saved in the order of their names (logsumexp before output, Note [Activation offloading]).
  p->Save(SavedRef::kExtra, p->AddExtra(d.bh * rows * 4, "logsumexp"));
  p->Save(SavedRef::kOutput, 0);
  if (c.profile.cuda) return;
  const int64_t q_split = std::min(QSplit(d.s_q), d.s_q), kv_split = KvSplit(d.s_k);
  const int64_t acc = c.in[0]->dtype == Dtype::kFloat64 ? 8 : 4;
  int buf = p->AddExtra(c.profile.cpu_threads * q_split * (kv_split + 2 + d.e_v) * acc, "flash per-thread buffer");
  int reduced = Reduced(c.in[0]->dtype)
                    ? p->AddExtra(c.profile.cpu_threads * q_split * kv_split * ElementSize(c.in[0]->dtype),
                                  "flash per-thread reduced buffer")
                    : -1;
  if (reduced >= 0) p->FreeExtra(reduced);
  p->FreeExtra(buf);
}

/// A tensor laid out densely in |t|'s stride order (outermost first; ties keep the dim order):
/// what `t * scalar` returns (Note [Elementwise output layout]) and `t.to(dtype)` keeps.
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

void BwdSdpa(const RuleCtx& c, BwdPlan* p) {
  const Dims d = DimsOf(c);
  SdpaBackend b = SdpaBackendOfOp(c);
  if (b == SdpaBackend::kMath) return BwdMath(c, d, p);
  if (!c.profile.cuda) {  // CPU flash: grads laid out [B, L, H, D], then per-thread buffers
    for (int i = 0; i < 3; ++i)
      if (c.rg_in(i)) p->GradNewLike(i, HeadsInnerLayout(c.in[i]->dtype, c.in[i]->sizes));
    const int64_t q_split = std::min(QSplit(d.s_q), d.s_q), kv_split = KvSplit(d.s_k);
    const int64_t acc = c.in[0]->dtype == Dtype::kFloat64 ? 8 : 4;
    int buf = p->Temp(c.profile.cpu_threads * q_split * kv_split * 2 * acc, "flash backward per-thread buffer");
    p->FreeTemp(p->Temp(c.profile.cpu_threads * q_split * acc, "flash backward row sums"));
    p->FreeTemp(buf);
    return;
  }
  int t = -1;
  if (b == SdpaBackend::kFlash || b == SdpaBackend::kCudnn)
    t = p->Temp(d.bh * ((d.s_q + 127) / 128 * 128) * 4 +
                    d.bh * ((d.s_q + 127) / 128 * 128) * ((d.e + 31) / 32 * 32) * 4,
                "flash softmax_d + dq_accum");
  for (int i = 0; i < 3; ++i)
    if (c.rg_in(i)) p->GradNew(i);
  if (t >= 0) p->FreeTemp(t);
}

}  // namespace

const std::vector<OpRule> kAttentionRules = {
    {OpKind::kSdpa, 3, 4, 7u, InferSdpa, FwdSdpa, BwdSdpa},
};

}  // namespace memsim
