// Ring attention under context parallelism (lib/ops/ring_attention.h; Note [Context parallel] in
// docs/parallel.md), from torch/distributed/tensor/experimental/_context_parallel/_attention.py
// (torch 2.13): _templated_ring_attention with the all-gather rotater (the default
// _cp_options.rotate_method) and _SDPAMerger, and _templated_ring_attention_backward with the
// all-gather K/V rotater and the all-to-all dK/dV rotater. Each step's kernel allocates what the
// fused backend's single call does (rules_attention.cc); on the CPU that is the CPU flash kernel
// the oracle kit's shim runs under the CUDA op's signature.
#include <algorithm>

#include "lib/ops/ring_attention.h"
#include "lib/ops/tensor_meta.h"

namespace memsim {
namespace {

/// The local chunk's sizes: q [B, H, S, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev].
struct Sizes {
  int64_t bh = 0, s = 0, s_k = 0, e = 0, e_v = 0;
  int64_t es = 4;          ///< the inputs' element size
  int64_t q = 0, k = 0, v = 0;  ///< numels
  bool f32 = true;         ///< the inputs are fp32: _cp_options.convert_to_f32's casts are no-ops
};

Sizes SizesOf(const RuleCtx& c) {
  const TensorMeta &q = *c.in[0], &k = *c.in[1], &v = *c.in[2];
  Sizes d;
  d.s = q.sizes[q.dim() - 2];
  d.s_k = k.sizes[k.dim() - 2];
  d.e = q.sizes.back();
  d.e_v = v.sizes.back();
  d.bh = q.numel() / (d.s * d.e);
  d.es = ElementSize(q.dtype);
  d.q = q.numel();
  d.k = k.numel();
  d.v = v.numel();
  d.f32 = q.dtype == Dtype::kFloat32;
  return d;
}

/// One kernel call's block output and logsumexp, and what it returns besides (`rest`).
struct Block {
  int out = -1, lse = -1;
  std::vector<int> rest;
};

/// The forward kernel of one step on |s_q| query rows and |s_k| key rows (FwdFused's allocations).
/// |out_as_output|: the block output is the op's output (fp32, and no later step merges into it).
Block KernelFwd(const RuleCtx& c, SdpaBackend b, const Sizes& d, int64_t s_q, int64_t s_k, bool out_as_output,
                FwdPlan* p) {
  Block k;
  const bool cuda = c.profile.cuda;
  if (cuda && b == SdpaBackend::kCudnn) k.rest = {p->AddExtra(8, "ring philox seed"), p->AddExtra(8, "ring philox offset")};
  if (out_as_output) p->AllocOutput(0);
  else k.out = p->AddExtra(d.bh * s_q * d.e_v * d.es, "ring block out");
  const int64_t rows = cuda && b == SdpaBackend::kEfficient ? (s_q + 31) / 32 * 32 : s_q;
  k.lse = p->AddExtra(d.bh * rows * 4, "ring block logsumexp");
  if (cuda) {
    if (b == SdpaBackend::kCudnn) p->FreeExtra(p->AddExtra(256, "cuDNN forward workspace"));
    if (b == SdpaBackend::kFlash) k.rest = {p->AddExtra(16, "ring flash rng_state"), p->AddExtra(8, "ring flash unused")};
    return k;
  }
  const int64_t q_split = FlashCpuQSplit(s_q), kv_split = FlashCpuKvSplit(s_k), acc = d.es == 8 ? 8 : 4;
  int buf = p->AddExtra(c.profile.cpu_threads * q_split * (kv_split + 2 + d.e_v) * acc, "flash per-thread buffer");
  if (!d.f32 && d.es == 2)
    p->FreeExtra(p->AddExtra(c.profile.cpu_threads * q_split * kv_split * d.es, "flash per-thread reduced buffer"));
  p->FreeExtra(buf);
  return k;
}

/// _SDPAMerger._merge_one after the first step: out − sigmoid(block_lse − lse)·(out − block_out)
/// and lse − logsigmoid(lse − block_lse) on |rows| query rows (fp32), each temporary freed as the
/// expression drops it; log_sigmoid_forward's buffer and scratch on the CPU. Returns the new out
/// and lse; |out_as_output|: the new out is the op's output.
std::pair<int, int> MergeMath(const Sizes& d, int64_t rows, bool out_as_output, FwdPlan* p) {
  const int64_t l = d.bh * rows * 4, o = d.bh * rows * d.e_v * 4;
  int d1 = p->AddExtra(l, "merge block_lse - lse");
  int sg = p->AddExtra(l, "merge sigmoid");
  p->FreeExtra(d1);
  int d2 = p->AddExtra(o, "merge out - block_out");
  int m = p->AddExtra(o, "merge sigmoid * (out - block_out)");
  p->FreeExtra(sg);
  p->FreeExtra(d2);
  int out = -1;
  if (out_as_output) p->AllocOutput(0);
  else out = p->AddExtra(o, "merged out");
  p->FreeExtra(m);
  int d3 = p->AddExtra(l, "merge lse - block_lse");
  int ls = p->AddExtra(l, "merge logsigmoid");
  int buf = p->AddExtra(l, "log_sigmoid_forward buffer");
  p->FreeExtra(p->AddExtra(l, "log_sigmoid_forward scratch"));
  p->FreeExtra(buf);
  p->FreeExtra(d3);
  int lse = p->AddExtra(l, "merged lse");
  p->FreeExtra(ls);
  return {out, lse};
}

}  // namespace

std::vector<RingStep> RingSteps(int world, int rank, bool causal, bool load_balance) {
  std::vector<RingStep> steps(world);
  for (int i = 1; i < world; ++i) {
    RingStep& s = steps[i];
    if (!causal) continue;  // every step on the whole chunks
    if (load_balance) {
      if (i <= rank) s.kv_halves = 1;  // the first half of the K/V chunk
      else s.q_halves = 1, s.partial = true;  // the second half of q, merged into it
    } else {
      s.skip = (rank - i + world) % world >= rank;  // a later rank's chunk: masked out whole
    }
  }
  return steps;
}

void FwdRingAttention(const RuleCtx& c, SdpaBackend b, FwdPlan* p) {
  const Sizes d = SizesOf(c);
  const ContextParallelRank& cp = c.profile.cp;
  const std::vector<RingStep> steps = RingSteps(cp.world, cp.rank, c.op.attrs.GetBool("is_causal", false), cp.load_balance);
  for (int i = 0; i < 3; ++i) p->Save(SavedRef::kInput, i);
  int last_step = 0;
  for (int i = 0; i < cp.world; ++i)
    if (!steps[i].skip) last_step = i;
  const int64_t kv = (d.k + d.v) * d.es;
  // key.contiguous(), value.contiguous(): held by the step-0 locals until step 1 rebinds them
  const int kc = c.in[1]->is_contiguous() ? -1 : p->AddExtra(d.k * d.es, "ring key.contiguous()");
  const int vc = c.in[2]->is_contiguous() ? -1 : p->AddExtra(d.v * d.es, "ring value.contiguous()");
  int kv_cat = -1, gathered = -1, staging = -1;
  int merged_out = -1, merged_lse = -1;
  bool merged_any = false;
  Block last;
  for (int i = 0; i < cp.world; ++i) {
    const RingStep& st = steps[i];
    if (i == 1) {  // next_buffer(): the all-gather waited for; step 0's K/V copies rebound
      if (staging >= 0) p->FreeExtra(staging);
      p->FreeExtra(kv_cat);
      if (kc >= 0) p->FreeExtra(kc);
      if (vc >= 0) p->FreeExtra(vc);
    }
    if (i == 0 && cp.world > 1) {  // _AllGatherRotater: one all-gather of cat(k, v) for every step
      kv_cat = p->AddExtra(kv, "ring cat(k, v)");
      gathered = p->AddExtra(kv * cp.world, "ring all-gathered k, v");
      if (c.profile.host_collectives) {  // gloo: the input's and the flat output's staging copies
        p->FreeExtra(p->AddExtra(kv, "gloo allgather input copy"));
        staging = p->AddExtra(kv * cp.world, "gloo allgather output copy");
      }
    }
    if (st.skip) continue;
    const int64_t s_q = d.s * st.q_halves / 2, s_k = d.s_k * st.kv_halves / 2;
    Block blk = KernelFwd(c, b, d, s_q, s_k, d.f32 && last_step == 0, p);
    // `out, logsumexp, *rest = op(...)`: the previous block dies unless the merger holds it
    if (last.out >= 0 && last.out != merged_out) p->FreeExtra(last.out);
    if (last.lse >= 0 && last.lse != merged_lse) p->FreeExtra(last.lse);
    for (int r : last.rest) p->FreeExtra(r);
    const int out32 = d.f32 ? blk.out : p->AddExtra(d.bh * s_q * d.e_v * 4, "ring block out in fp32");
    if (!merged_any) {  // the first step: the merger keeps the block
      merged_any = true;
      merged_out = out32;
      merged_lse = blk.lse;
    } else {
      const bool final_out = d.f32 && i == last_step;
      auto [out, lse] = MergeMath(d, s_q, final_out && !st.partial, p);
      if (st.partial) {  // _partial_update: torch.cat of the first half and the merged second half
        const int lse_full = p->AddExtra(d.bh * d.s * 4, "merged lse (cat)");
        p->FreeExtra(merged_lse);
        int out_full = -1;
        if (final_out) p->AllocOutput(0);
        else out_full = p->AddExtra(d.bh * d.s * d.e_v * 4, "merged out (cat)");
        p->FreeExtra(merged_out);
        p->FreeExtra(lse);
        p->FreeExtra(out);
        merged_lse = lse_full;
        merged_out = out_full;
      } else {
        p->FreeExtra(merged_lse);
        if (merged_out >= 0) p->FreeExtra(merged_out);
        merged_lse = lse;
        merged_out = out;
      }
      if (!d.f32) p->FreeExtra(out32);
    }
    last = blk;
  }
  // results(): out.to(the inputs' dtype) is the op's output (in fp32 the merged out itself)
  if (!d.f32) {
    p->AllocOutput(0);
    p->FreeExtra(merged_out);
    merged_out = -1;
  }
  p->Save(SavedRef::kExtra, merged_lse);
  p->Save(SavedRef::kOutput, 0);
  // the function returns: the rotater's buffer, then the last block (unless merged) die; its
  // `rest` is returned (CUDA flash: the philox seed and offset the node saves)
  if (gathered >= 0) p->FreeExtra(gathered);
  if (last.out >= 0 && last.out != merged_out) p->FreeExtra(last.out);
  if (last.lse >= 0 && last.lse != merged_lse) p->FreeExtra(last.lse);
  for (int r : last.rest) p->Save(SavedRef::kExtra, r);
}

namespace {

/// The backward kernel of one step: the grads of its q, k, v rows (in the inputs' dtype) and the
/// kernel's scratch. Returns the three grads' temps.
std::vector<int> KernelBwd(const RuleCtx& c, SdpaBackend b, const Sizes& d, const RingStep& st, BwdPlan* p) {
  const int64_t s_q = d.s * st.q_halves / 2, s_k = d.s_k * st.kv_halves / 2;
  std::vector<int> g = {p->Temp(d.q * st.q_halves / 2 * d.es, "ring block grad q"),
                        p->Temp(d.k * st.kv_halves / 2 * d.es, "ring block grad k"),
                        p->Temp(d.v * st.kv_halves / 2 * d.es, "ring block grad v")};
  if (c.profile.cuda) {
    if (b == SdpaBackend::kFlash) {  // flash-attention 2's mha_bwd (BwdCudaFlash)
      const int64_t rows = (s_q + 127) / 128 * 128, e = d.e <= 128 ? (d.e + 31) / 32 * 32 : (d.e + 63) / 64 * 64;
      int softmax_d = p->Temp(d.bh * rows * 4, "flash softmax_d");
      p->FreeTemp(p->Temp(d.bh * rows * e * 4, "flash dq_accum"));
      p->FreeTemp(softmax_d);
    }
    return g;
  }
  // the CPU kernel makes the second half's grad_out (a chunk view) contiguous
  const int dout = st.q_halves == 1 ? p->Temp(d.bh * s_q * d.e_v * d.es, "grad_out chunk, contiguous") : -1;
  const int64_t q_split = FlashCpuQSplit(s_q), kv_split = FlashCpuKvSplit(s_k), acc = d.es == 8 ? 8 : 4;
  int buf = p->Temp(c.profile.cpu_threads * q_split * kv_split * 2 * acc, "flash backward per-thread buffer");
  p->FreeTemp(p->Temp(c.profile.cpu_threads * q_split * acc, "flash backward row sums"));
  p->FreeTemp(buf);
  if (dout >= 0) p->FreeTemp(dout);
  return g;
}

/// The backward's dK/dV accumulators as they travel the ring (_AllToAllRotater): grad_key and
/// grad_value (zeros, torch.cat results, or views of a received buffer), the cat of them sent at
/// each step and the all-to-all's output in flight; the last output is the grads handed on.
class DkvRing {
 public:
  DkvRing(const RuleCtx& c, const Sizes& d, BwdPlan* p) : c_(c), p_(p), ka_(d.k * 4), va_(d.v * 4), f32_(d.f32) {
    gk_ = p->Temp(ka_, "ring grad_key accumulator");
    gv_ = p->Temp(va_, "ring grad_value accumulator");
  }

  /// Step 0: += in place, then the cat of the flattened accumulators (flatten copies them when
  /// zeros_like kept the saved k, v's strides).
  void First(bool strided) {
    int fk = strided ? p_->Temp(ka_, "grad_key.flatten()") : -1;
    int fv = strided ? p_->Temp(va_, "grad_value.flatten()") : -1;
    cat_ = p_->Temp(ka_ + va_, "ring cat(dk, dv)");
    if (fk >= 0) p_->FreeTemp(fk);
    if (fv >= 0) p_->FreeTemp(fv);
  }

  /// A later step: next_buffer() rebinds next_grad_kv and grad_key / grad_value to the received
  /// buffer; with |partial| (_partial_update(add=True)) they become torch.cat results, else they
  /// are added into in place; then the new cat.
  void Next(bool partial) {
    p_->FreeTemp(cat_);
    const int received = pending_;
    Release();
    if (partial) {
      gk_ = p_->Temp(ka_, "ring grad_key (cat)");
      gv_ = p_->Temp(va_, "ring grad_value (cat)");
    } else {
      held_ = received;
    }
    cat_ = p_->Temp(ka_ + va_, "ring cat(dk, dv)");
    if (partial) p_->FreeTemp(received);  // only next_grad_kv held it
  }

  /// exchange_buffers: the all-to-all's output; after the last step, the grads of k and v (one
  /// buffer each: PyTorch's one storage holds both).
  void Send(bool final) {
    // gloo (alltoall_base) stages the output in a copy of its own; its thread allocates and frees
    // it at a moment of its own (in the traces often during a later node): memsim puts it here
    if (c_.profile.host_collectives) p_->FreeTemp(p_->Temp(ka_ + va_, "gloo all-to-all staging copy"));
    if (final && f32_ && c_.rg_in(1) && c_.rg_in(2)) {
      p_->GradNewLike(1, *TensorMeta::Contiguous(c_.in[1]->dtype, c_.in[1]->sizes));
      p_->GradNewLike(2, *TensorMeta::Contiguous(c_.in[2]->dtype, c_.in[2]->sizes));
      pending_ = -1;
    } else {
      pending_ = p_->Temp(ka_ + va_, "ring received dk, dv");
    }
  }

  /// The last all-to-all waited for: the cat and the accumulators rebound.
  void Finish() {
    p_->FreeTemp(cat_);
    Release();
  }

  /// The function returns: a last received buffer that was not the grads dies.
  void Return() {
    if (pending_ >= 0) p_->FreeTemp(pending_);
  }

 private:
  void Release() {  // grad_key / grad_value rebound: what they held dies
    if (held_ >= 0) {
      p_->FreeTemp(held_);
    } else {
      p_->FreeTemp(gk_);
      p_->FreeTemp(gv_);
    }
    held_ = gk_ = gv_ = -1;
  }

  const RuleCtx& c_;
  BwdPlan* p_;
  int64_t ka_, va_;
  bool f32_;
  int gk_ = -1, gv_ = -1, held_ = -1, cat_ = -1, pending_ = -1;
};

}  // namespace

void BwdRingAttention(const RuleCtx& c, SdpaBackend b, BwdPlan* p) {
  const Sizes d = SizesOf(c);
  const ContextParallelRank& cp = c.profile.cp;
  const int n = cp.world;
  const std::vector<RingStep> steps = RingSteps(n, cp.rank, c.op.attrs.GetBool("is_causal", false), cp.load_balance);
  const int64_t ka = d.k * 4, va = d.v * 4, kv = (d.k + d.v) * d.es;  // fp32 accumulators
  // The last step whose grad_query is a torch.cat (_partial_update): the grad handed on.
  int last_q_cat = -1;
  for (int i = 1; i < n; ++i)
    if (steps[i].partial) last_q_cat = i;
  const bool q_grad_is_zeros = d.f32 && last_q_cat < 0 && c.rg_in(0);
  // accumulators: zeros_like(q, k, v) in fp32, in their layouts
  int gq = -1;
  if (q_grad_is_zeros) p->GradNewLike(0, DenseInOrderOf(c.in[0]->dtype, *c.in[0]));
  else gq = p->Temp(d.q * 4, "ring grad_query accumulator");
  DkvRing dkv(c, d, p);
  int kc = c.in[1]->is_contiguous() ? -1 : p->Temp(d.k * d.es, "ring key.contiguous()");
  int vc = c.in[2]->is_contiguous() ? -1 : p->Temp(d.v * d.es, "ring value.contiguous()");
  int kv_cat = -1, gathered = -1, staging = -1;
  if (n > 1) {
    kv_cat = p->Temp(kv, "ring cat(k, v)");
    gathered = p->Temp(kv * n, "ring all-gathered k, v");
    if (c.profile.host_collectives) {  // as in forward: the flat output copy lives until the wait
      p->FreeTemp(p->Temp(kv, "gloo allgather input copy"));
      staging = p->Temp(kv * n, "gloo allgather output copy");
    }
  }
  std::vector<int> blk;
  int lse_copy = -1;
  for (int i = 0; i < n; ++i) {
    const RingStep& st = steps[i];
    if (i > 0 && !st.skip) {
      if (st.partial) {  // logsumexp.chunk(2, dim=2)[1].contiguous(), a local until rebound
        int copy = p->Temp(d.bh * d.s / 2 * 4, "ring logsumexp chunk, contiguous");
        if (lse_copy >= 0) p->FreeTemp(lse_copy);
        lse_copy = copy;
      }
      if (i == 1) {  // the all-gather waited for; the step-0 locals k, v rebound
        if (staging >= 0) p->FreeTemp(staging);
        if (kc >= 0) p->FreeTemp(kc);
        if (vc >= 0) p->FreeTemp(vc);
      }
    }
    std::vector<int> g;
    if (!st.skip) g = KernelBwd(c, b, d, st, p);
    else g = {p->Temp(d.q * 4, "ring zeros grad q"), p->Temp(ka, "ring zeros grad k"), p->Temp(va, "ring zeros grad v")};
    for (int t : blk) p->FreeTemp(t);  // the previous step's block grads rebound
    blk = g;
    if (i == 0) dkv.First(!c.in[1]->is_contiguous() || !c.in[2]->is_contiguous());
    else dkv.Next(cp.load_balance && st.kv_halves == 1);
    dkv.Send(i == n - 1);
    if (i > 0 && st.partial) {  // grad_query: _partial_update's cat into the second half
      int cat = -1;
      if (i == last_q_cat && d.f32 && c.rg_in(0)) p->GradNewLike(0, *TensorMeta::Contiguous(c.in[0]->dtype, c.in[0]->sizes));
      else cat = p->Temp(d.q * 4, "ring grad_query (cat)");
      if (gq >= 0) p->FreeTemp(gq);
      gq = cat;
    }
  }
  dkv.Finish();
  if (!d.f32) {  // .to(the inputs' dtype): the grads handed on
    for (int i = 0; i < 3; ++i)
      if (c.rg_in(i)) p->GradNewLike(i, i == 0 && last_q_cat < 0 ? DenseInOrderOf(c.in[0]->dtype, *c.in[0])
                                                              : *TensorMeta::Contiguous(c.in[i]->dtype, c.in[i]->sizes));
  }
  // the function returns: next_kv (step 0's cat), the last block grads, the gathered K/V, the lse copy
  if (kv_cat >= 0) p->FreeTemp(kv_cat);
  for (int t : blk) p->FreeTemp(t);
  if (gathered >= 0) p->FreeTemp(gathered);
  if (lse_copy >= 0) p->FreeTemp(lse_copy);
  if (gq >= 0) p->FreeTemp(gq);
  dkv.Return();
}

}  // namespace memsim
