// Layers: convolution, linear and the matmul family, embedding, normalisation and pooling
// (attention: rules_attention.cc). Ops whose derivatives.yaml entry has one line per input (mm, addmm, bmm,
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

Status Need(const RuleCtx& c, size_t lo, size_t hi) {
  if (c.in.size() < lo || c.in.size() > hi)
    return RuleError(c, "expected " + std::to_string(lo) + (lo == hi ? "" : "-" + std::to_string(hi)) +
                            " inputs, got " + std::to_string(c.in.size()));
  return Status::OK();
}

/// Reads an int-or-list attribute expanded to |n| spatial values.
std::optional<std::vector<int64_t>> Spatial(const RuleCtx& c, const char* name, size_t n,
                                            std::optional<std::vector<int64_t>> dflt) {
  auto v = c.op.attrs.GetInts(name, c.bindings);
  if (!v) v = dflt;
  if (!v) return std::nullopt;
  if (v->size() == 1) v->resize(n, (*v)[0]);
  if (v->size() != n) return std::nullopt;
  return v;
}

int64_t PoolOut(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t dil, bool ceil) {
  int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  // PyTorch: the last window must start inside the input or the left padding.
  if (ceil && (out - 1) * s >= in + pad) --out;
  return out;
}

Status InferConv(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Need(c, 2, 3));
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  size_t nsp = c.op.kind == OpKind::kConv1d ? 1 : c.op.kind == OpKind::kConv2d ? 2 : 3;
  bool batched = x.dim() == static_cast<int64_t>(nsp) + 2;
  if (!batched && x.dim() != static_cast<int64_t>(nsp) + 1)
    return RuleError(c, "input " + x.ShapeString() + " has the wrong rank");
  if (w.dim() != static_cast<int64_t>(nsp) + 2) return RuleError(c, "weight " + w.ShapeString() + " has the wrong rank");
  auto stride = Spatial(c, "stride", nsp, std::vector<int64_t>{1});
  auto pad = Spatial(c, "padding", nsp, std::vector<int64_t>{0});
  auto dil = Spatial(c, "dilation", nsp, std::vector<int64_t>{1});
  int64_t groups = c.op.attrs.GetInt("groups", c.bindings).value_or(1);
  if (!stride || !pad || !dil) return RuleError(c, "stride/padding/dilation must be an int or a list of " + std::to_string(nsp));
  int64_t off = batched ? 1 : 0;
  if (groups <= 0 || x.sizes[off] != w.sizes[1] * groups || w.sizes[0] % groups != 0)
    return RuleError(c, "input channels " + std::to_string(x.sizes[off]) + " do not match weight " +
                            w.ShapeString() + " with groups=" + std::to_string(groups));
  if (c.in.size() == 3 && c.in[2]->numel() != w.sizes[0]) return RuleError(c, "bias size does not match");
  std::vector<int64_t> sizes;
  if (batched) sizes.push_back(x.sizes[0]);
  sizes.push_back(w.sizes[0]);
  for (size_t i = 0; i < nsp; ++i) {
    if ((*stride)[i] <= 0 || (*dil)[i] <= 0 || (*pad)[i] < 0) return RuleError(c, "bad stride/dilation/padding");
    int64_t out = PoolOut(x.sizes[off + 1 + i], w.sizes[2 + i], (*stride)[i], (*pad)[i], (*dil)[i], false);
    if (out <= 0) return RuleError(c, "kernel is larger than the padded input " + x.ShapeString());
    sizes.push_back(out);
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

int64_t CeilTo(int64_t c, int64_t block) { return (c + block - 1) / block * block; }

/// A bf16 convolution on oneDNN's avx512_core_bf16 kernels has 16-channel blocked layouts and the
/// scratchpads of lib/ops/onednn_scratchpad.h; otherwise the fp32 AVX2 kernels the cpu profile was
/// measured on: 8-channel blocks.
bool Bf16OneDnn(const RuleCtx& c) { return OneDnnBf16Path(c, *c.in[0]); }

/// The convolution as oneDNN's descriptors see it (a 1-D conv as a 2-D one with height 1).
std::optional<OneDnnConv> OneDnnConvOf(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  const TensorMeta& y = *c.out[0];
  const size_t nsp = static_cast<size_t>(w.dim()) - 2;
  if (nsp < 1 || nsp > 2) return std::nullopt;  // 3-D convolutions: not derived
  const int64_t off = x.dim() == w.dim() ? 1 : 0;
  auto stride = Spatial(c, "stride", nsp, std::vector<int64_t>{1});
  auto pad = Spatial(c, "padding", nsp, std::vector<int64_t>{0});
  auto dil = Spatial(c, "dilation", nsp, std::vector<int64_t>{1});
  if (!stride || !pad || !dil) return std::nullopt;  // "same"/"valid" padding strings: not derived
  OneDnnConv k;
  k.batch = off ? x.sizes[0] : 1;
  k.in_ch = x.sizes[off];
  k.out_ch = w.sizes[0];
  k.groups = c.op.attrs.GetInt("groups", c.bindings).value_or(1);
  k.bias = c.num_in() > 2;
  const size_t wi = nsp - 1;  // W is the last spatial dim; a 2-D conv's H the first
  k.iw = x.sizes[off + 1 + wi], k.ow = y.sizes[off + 1 + wi], k.kw = w.sizes[2 + wi];
  k.stride_w = (*stride)[wi], k.pad_w = (*pad)[wi], k.dil_w = (*dil)[wi];
  if (nsp == 2) {
    k.ih = x.sizes[off + 1], k.oh = y.sizes[off + 1], k.kh = w.sizes[2];
    k.stride_h = (*stride)[0], k.pad_h = (*pad)[0], k.dil_h = (*dil)[0];
  }
  return k;
}

/// Bytes of oneDNN's scratchpad for one pass of this convolution (0: none).
int64_t OneDnnScratch(const RuleCtx& c, OneDnnPass pass, bool one_by_one_s2, int64_t avx2_bytes) {
  if (!Bf16OneDnn(c)) return one_by_one_s2 ? avx2_bytes : 0;
  auto k = OneDnnConvOf(c);
  return k ? OneDnnBf16ConvScratchpad(*k, pass, c.profile.onednn_l2_bytes) : 0;
}

struct ConvGeometry {
  int64_t in_ch, bi, bo, bw, ob;  ///< input channels; bytes of input, output, weight, bias
  bool one_by_one_s2;             ///< 1×1 stride-2 (downsample) convs use scratchpads (AVX2)
  int64_t out_hw;                 ///< output spatial elements
  bool first;                     ///< bf16 on avx512: a first conv (< 16 input channels, 1 group)
};

ConvGeometry Geometry(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  const TensorMeta& y = *c.out[0];
  ConvGeometry g;
  int64_t off = x.dim() == w.dim() ? 1 : 0;
  g.in_ch = x.sizes[off];
  const bool bf16 = Bf16OneDnn(c);
  const int64_t block = bf16 ? 16 : 8, groups = c.op.attrs.GetInt("groups", c.bindings).value_or(1);
  int64_t es = ElementSize(x.dtype);
  g.bi = x.numel() / g.in_ch * CeilTo(g.in_ch, block) * es;
  g.bo = y.numel() / w.sizes[0] * CeilTo(w.sizes[0], block) * es;
  g.bw = w.bytes();
  g.first = bf16 && g.in_ch < 16 && groups == 1;
  // avx512 bf16 first conv: its weight is blocked as AcdB16a2b (input channels to pairs).
  if (g.first) g.bw = w.bytes() / g.in_ch * CeilTo(g.in_ch, 2) / w.sizes[0] * CeilTo(w.sizes[0], 16);
  g.ob = w.sizes[0] * es;
  g.out_hw = 1;
  for (int64_t i = off + 1; i < y.dim(); ++i) g.out_hw *= y.sizes[i];
  bool one = true;
  for (int64_t i = 2; i < w.dim(); ++i) one &= w.sizes[i] == 1;
  auto stride = c.op.attrs.GetInts("stride", c.bindings).value_or(std::vector<int64_t>{1});
  g.one_by_one_s2 = one && !stride.empty() && stride[0] == 2;
  return g;
}

// oneDNN keeps the first conv's input plain when it has 1 or 3 channels.
bool PlainSource(const ConvGeometry& g) { return g.in_ch == 1 || g.in_ch == 3; }

/// The cuDNN call of this conv (lib/ops/conv_workspace.h).
ConvCall CudnnCall(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  const TensorMeta& y = *c.out[0];
  const size_t nsp = static_cast<size_t>(w.dim()) - 2;
  const int64_t off = x.dim() == w.dim() ? 1 : 0;
  ConvCall k;
  k.batch = off ? x.sizes[0] : 1;
  k.in_channels = x.sizes[off];
  k.out_channels = w.sizes[0];
  k.groups = c.op.attrs.GetInt("groups", c.bindings).value_or(1);
  k.element_size = ElementSize(x.dtype);
  k.kernel.assign(w.sizes.begin() + 2, w.sizes.end());
  k.stride = Spatial(c, "stride", nsp, std::vector<int64_t>{1}).value_or(std::vector<int64_t>(nsp, 1));
  k.dilation = Spatial(c, "dilation", nsp, std::vector<int64_t>{1}).value_or(std::vector<int64_t>(nsp, 1));
  k.in_spatial.assign(x.sizes.begin() + off + 1, x.sizes.end());
  k.out_spatial.assign(y.sizes.begin() + off + 1, y.sizes.end());
  return k;
}

int64_t CudnnWorkspace(const RuleCtx& c, ConvPass pass) {
  const Profile& pr = c.profile;
  if (pr.conv_workspace_policy == ConvWorkspacePolicy::kNone) return 0;
  return ConvWorkspaceBytes(pr.conv_workspace_policy, pr.conv_workspace_bytes, pr.gpu_arch, CudnnCall(c), pass);
}

/// cudnn.benchmark's trial workspace before the call (0: no benchmarking).
int64_t CudnnTrial(const RuleCtx& c, ConvPass pass) {
  if (!c.profile.cudnn_benchmark_trials) return 0;
  return ConvWorkspaceBytes(ConvWorkspacePolicy::kMax, 0, c.profile.gpu_arch, CudnnCall(c), pass);
}

/// Note [THNN convolutions]: ATen's ConvParams::use_mkldnn (Convolution.cpp, the same in 1.13
/// and 2.x) declines an fp32 CPU convolution unless (strided ∨ dilated ∨ N ≥ 16 ∨ the kernel's
/// last two sizes are not both 1 ∨ more than one thread) ∧ (groups > 1 ∨ both last kernel sizes
/// > 3 ∨ N > 1 ∨ N·C·H·W > 20480) — "for 1x1 filters ... THNN is faster when single-threaded";
/// the call then runs ATen's slow_conv2d (slow_conv3d for a 3-D one, whose N·C·H·W reads the
/// first four sizes, N·C·D·H, and whose kernel sizes are its last two). 1-D calls are viewed as 2-D.
bool Fp32ConvDeclinesOneDnn(const RuleCtx& c, const std::vector<int64_t>& stride, const std::vector<int64_t>& dil,
                            int64_t groups) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  if (x.dtype != Dtype::kFloat32 || w.dim() > 5 || x.dim() != w.dim()) return false;
  auto any_not_one = [](const std::vector<int64_t>& v) {
    return std::any_of(v.begin(), v.end(), [](int64_t s) { return s != 1; });
  };
  const int64_t kw = w.sizes.back(), kh = w.dim() >= 4 ? w.sizes[w.dim() - 2] : 1;
  int64_t nchw = 1;
  for (size_t i = 0; i < x.sizes.size() && i < 4; ++i) nchw *= x.sizes[i];
  const int64_t n = x.sizes[0];
  const bool first = any_not_one(stride) || any_not_one(dil) || n >= 16 || kw != 1 || kh != 1 || c.profile.cpu_threads > 1;
  const bool second = groups > 1 || (kw > 3 && kh > 3) || n > 1 || nchw > 20480;
  return !(first && second);
}

/// The im2col / vol2col columns of the whole batch, [N, Cin·∏kernel, ∏out], in the input's dtype.
int64_t ColumnsBytes(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  const TensorMeta& y = *c.out[0];
  const size_t nsp = static_cast<size_t>(w.dim()) - 2;
  const int64_t off = x.dim() == w.dim() ? 1 : 0;
  int64_t cols = (off ? x.sizes[0] : 1) * x.sizes[off] * ElementSize(x.dtype);
  for (size_t i = 0; i < nsp; ++i) cols *= w.sizes[2 + i] * y.sizes[off + 1 + i];
  return cols;
}

/// Note [bf16 convolutions on CPU]: a bf16 convolution on a CPU without oneDNN's bf16 path
/// (Profile::bf16_conv_onednn off), or an fp32 one that use_mkldnn declines (Note [THNN
/// convolutions]), runs ATen's slow_conv2d (conv1d as a 2-d one): the bytes of its im2col column
/// buffer, [N, Cin·∏kernel, ∏out], in the input's dtype — 0 for a 1×1 stride-1 unpadded kernel,
/// whose columns are a view of the input. Unset: not that path (another dtype or profile;
/// grouped, dilated: their kernels are not modelled here).
std::optional<int64_t> SlowConvColumns(const RuleCtx& c) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  if (!c.profile.onednn_conv_reorders) return std::nullopt;
  const size_t nsp = static_cast<size_t>(w.dim()) - 2;
  const std::vector<int64_t> ones(nsp, 1), zeros(nsp, 0);
  auto stride = Spatial(c, "stride", nsp, std::vector<int64_t>{1}).value_or(ones);
  auto pad = Spatial(c, "padding", nsp, std::vector<int64_t>{0}).value_or(zeros);
  auto dil = Spatial(c, "dilation", nsp, std::vector<int64_t>{1}).value_or(ones);
  const int64_t groups = c.op.attrs.GetInt("groups", c.bindings).value_or(1);
  const bool slow = x.dtype == Dtype::kBFloat16 ? !c.profile.bf16_conv_onednn
                                                : Fp32ConvDeclinesOneDnn(c, stride, dil, groups);
  if (!slow || groups != 1 || dil != ones) return std::nullopt;
  bool one_by_one = stride == ones && pad == zeros;
  for (size_t i = 0; i < nsp; ++i) one_by_one &= w.sizes[2 + i] == 1;
  return one_by_one ? 0 : ColumnsBytes(c);
}

void FwdConv(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
  const int64_t ws = CudnnWorkspace(c, ConvPass::kForward), trial = CudnnTrial(c, ConvPass::kForward);
  if (ws > 0 || trial > 0) {
    // cuDNN: the output, the benchmark's trial workspace, then the plan's workspace.
    p->AllocOutput(0);
    if (trial > 0) p->FreeExtra(p->AddExtra(trial, "cudnn benchmark trial workspace"));
    if (ws > 0) p->FreeExtra(p->AddExtra(ws, "cudnn workspace"));
  }
  if (!c.profile.onednn_conv_reorders) return;
  if (auto cols = SlowConvColumns(c)) {  // the columns, then the output
    int k = *cols > 0 ? p->AddExtra(*cols, "slow_conv2d im2col columns") : -1;
    p->AllocOutput(0);
    if (k >= 0) p->FreeExtra(k);
    return;
  }
  // See docs/research/cpu-1.13-rules.md §2.3: scratch, src/weight reorders, a blocked dst, then
  // the dense output once the blocked one is reordered.
  ConvGeometry g = Geometry(c);
  const int64_t scratch = OneDnnScratch(c, OneDnnPass::kForward, g.one_by_one_s2, g.in_ch * g.out_hw * 4 + 128);
  int scr = scratch > 0 ? p->AddExtra(scratch, "onednn scratchpad") : -1;
  int src = PlainSource(g) || g.first ? -1 : p->AddExtra(g.bi, "onednn src reorder");
  int wr = p->AddExtra(g.bw, "onednn weight reorder");
  int dst = p->AddExtra(g.bo, "onednn blocked dst");
  p->FreeExtra(wr);
  if (src >= 0) p->FreeExtra(src);
  if (scr >= 0) p->FreeExtra(scr);
  p->AllocOutput(0);
  p->FreeExtra(dst);
}

void BwdConv(const RuleCtx& c, BwdPlan* p) {
  if (!c.profile.onednn_conv_reorders) {
    for (int i = 0; i < c.num_in(); ++i) {
      if (!c.rg_in(i)) continue;
      p->GradNew(i);
      if (i >= 2) continue;
      const ConvPass pass = i == 0 ? ConvPass::kBackwardData : ConvPass::kBackwardFilter;
      if (int64_t trial = CudnnTrial(c, pass); trial > 0) p->FreeTemp(p->Temp(trial, "cudnn benchmark trial workspace"));
      int64_t ws = CudnnWorkspace(c, pass);
      if (ws > 0) p->FreeTemp(p->Temp(ws, i == 0 ? "cudnn backward-data workspace" : "cudnn backward-filter workspace"));
    }
    return;
  }
  if (auto cols = SlowConvColumns(c)) {
    // slow_conv2d_backward: grad_input, grad_bias (sum_out), grad_weight, then the columns
    // computed again for the weight's GEMM. The grad_input and grad_weight parts each take
    // `grad_output.contiguous()`: a copy of a non-contiguous grad (an SSD head's output viewed
    // and permuted), freed when the part returns. slow_conv3d_backward's grad_input part
    // (ConvolutionMM3d.cpp) also fills a whole-batch `fgrad_input` of the columns' size, even
    // for a 1×1×1 kernel, which col2vol then adds into grad_input.
    const bool bias = c.num_in() > 2 && c.rg_in(2);
    const bool copy_grad = c.grad_out != nullptr && !c.grad_out->is_contiguous();
    const int64_t gbytes = c.out[0]->bytes();
    if (c.rg_in(0)) {
      const int copy = copy_grad ? p->Temp(gbytes, "grad_output contiguous copy") : -1;
      p->GradNew(0);
      if (c.in[1]->dim() == 5) p->FreeTemp(p->Temp(ColumnsBytes(c), "slow_conv3d fgrad_input columns"));
      if (copy >= 0) p->FreeTemp(copy);
    }
    if (bias) p->GradNew(2);
    if (c.rg_in(1)) {
      p->GradNew(1);
      const int copy = copy_grad ? p->Temp(gbytes, "grad_output contiguous copy") : -1;
      if (*cols > 0) p->FreeTemp(p->Temp(*cols, "slow_conv2d im2col columns"));
      if (copy >= 0) p->FreeTemp(copy);
    }
    return;
  }
  ConvGeometry g = Geometry(c);
  // mkldnn_convolution_backward (aten/src/ATen/native/mkldnn/Conv.cpp) takes
  // `grad_output.contiguous(memory_format)`: a copy of a non-contiguous grad (ViT's patch
  // embedding: the grad of `conv(x).flatten(2).transpose(1, 2)`, sliced out of cat's), kept
  // through both parts. Note [Conv grad_output copy].
  const bool copy_grad = c.grad_out != nullptr && c.in[0]->is_contiguous() && !c.grad_out->is_contiguous();
  const int gcopy = copy_grad ? p->Temp(g.bo, "grad_output contiguous copy") : -1;
  if (c.rg_in(0)) {  // data part
    int gout = p->Temp(g.bo, "onednn grad_out reorder");
    int wr = p->Temp(g.bw, "onednn weight reorder");
    int gib = p->Temp(g.bi, "onednn blocked grad_input");
    const int64_t scratch =
        OneDnnScratch(c, OneDnnPass::kBackwardData, g.one_by_one_s2, 576 * g.out_hw + 128);
    if (scratch > 0) p->FreeTemp(p->Temp(scratch, "onednn scratchpad"));
    p->FreeTemp(wr);
    p->FreeTemp(gout);
    p->GradNew(0);
    p->FreeTemp(gib);
  }
  if (c.rg_in(1) || (c.num_in() > 2 && c.rg_in(2))) {  // weight part
    bool bias = c.num_in() > 2 && c.rg_in(2);
    int gout = p->Temp(g.bo, "onednn grad_out reorder");
    int src = g.in_ch == 3 || g.first ? -1 : p->Temp(g.bi, "onednn src reorder");  // AVX2: IC=1 padded to 8
    // avx512 bf16 first conv: grad_weight blocked as Acdb16a, input channels unpadded.
    const int64_t gw = g.first ? c.in[1]->bytes() / c.in[1]->sizes[0] * CeilTo(c.in[1]->sizes[0], 16)
                               : (g.in_ch == 1 ? g.bw * 8 : g.bw);
    int gwb = p->Temp(gw, "onednn blocked grad_weight");
    int gbb = bias ? p->Temp(g.ob, "onednn blocked grad_bias") : -1;
    const int64_t scratch =
        OneDnnScratch(c, OneDnnPass::kBackwardWeights, g.one_by_one_s2, 256 * g.out_hw + 128);
    if (scratch > 0) p->FreeTemp(p->Temp(scratch, "onednn scratchpad"));
    if (src >= 0) p->FreeTemp(src);
    p->FreeTemp(gout);
    if (bias) p->GradNew(2);
    if (c.rg_in(1)) p->GradNew(1);
    p->FreeTemp(gwb);
    if (gbb >= 0) p->FreeTemp(gbb);
  }
  if (gcopy >= 0) p->FreeTemp(gcopy);
}

// linear: X[..., in] × W[out, in]ᵀ (+ b).
Status InferLinear(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Need(c, 2, 3));
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
  MEMSIM_RETURN_IF_ERROR(Need(c, 2, 2));
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
  MEMSIM_RETURN_IF_ERROR(Need(c, 3, 3));
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
void BwdEmbedding(const RuleCtx& c, BwdPlan* p) {
  p->GradNew(1);
  if (c.rg_in(1) && c.grad_out && !c.grad_out->is_contiguous()) p->FreeTemp(p->Temp(Bytes(*c.grad_out), "grad contiguous"));
}

// Normalisation. Inputs: batch_norm (X, weight, bias, running_mean, running_var);
// layer_norm / group_norm (X, [weight], [bias]); rms_norm (X, [weight]).
Status InferNorm(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Need(c, 1, c.op.kind == OpKind::kBatchNorm ? 5 : 3));
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
  // Affine parameters and running stats are kept too; they are existing tensors.
  for (int i = 1; i < c.num_in(); ++i)
    if (!(c.op.kind == OpKind::kGroupNorm && i == 2)) p->Save(SavedRef::kInput, i);
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

Status InferPool(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(Need(c, 1, 1));
  const TensorMeta& x = *c.in[0];
  const int nd = Is3dPool(c.op.kind) ? 3 : 2;
  if (x.dim() != nd + 1 && x.dim() != nd + 2)
    return RuleError(c, "input " + x.ShapeString() + " must be " + std::to_string(nd + 1) + "-D or " +
                            std::to_string(nd + 2) + "-D");
  auto sizes = x.sizes;
  int64_t h = x.dim() - nd;
  if (IsAdaptiveAvg(c.op.kind) || IsAdaptiveMax(c.op.kind)) {
    auto os = Spatial(c, "output_size", nd, std::nullopt);
    if (!os) return RuleError(c, "needs \"output_size\"");
    for (int i = 0; i < nd; ++i) sizes[h + i] = (*os)[i] < 0 ? x.sizes[h + i] : (*os)[i];
  } else {
    auto k = Spatial(c, "kernel_size", nd, std::nullopt);
    if (!k) return RuleError(c, "needs \"kernel_size\"");
    auto s = Spatial(c, "stride", nd, k);
    if (s && s->empty()) s = k;
    auto pad = Spatial(c, "padding", nd, std::vector<int64_t>{0});
    auto dil = Spatial(c, "dilation", nd, std::vector<int64_t>{1});
    if (!s || !pad || !dil) return RuleError(c, "bad stride/padding/dilation");
    bool ceil = c.op.attrs.GetBool("ceil_mode", false);
    for (int i = 0; i < nd; ++i) {
      if ((*s)[i] <= 0 || (*k)[i] <= 0) return RuleError(c, "kernel and stride must be positive");
      sizes[h + i] = PoolOut(x.sizes[h + i], (*k)[i], (*s)[i], (*pad)[i], (*dil)[i], ceil);
      if (sizes[h + i] <= 0) return RuleError(c, "output would be empty for " + x.ShapeString());
    }
  }
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
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

constexpr uint32_t kConvDiff = 7u;      // X, weight, bias
constexpr uint32_t kNormDiff = 7u;      // X, weight, bias (running stats are not)

}  // namespace

const std::vector<OpRule> kNnRules = {
    {OpKind::kConv1d, 2, 3, kConvDiff, InferConv, FwdConv, BwdConv},
    {OpKind::kConv2d, 2, 3, kConvDiff, InferConv, FwdConv, BwdConv},
    {OpKind::kConv3d, 2, 3, kConvDiff, InferConv, FwdConv, BwdConv},
    {OpKind::kLinear, 2, 3, 7u, InferLinear, FwdLinear, BwdLinear, AliasGradSame, false, true, 2},
    {OpKind::kMatmul, 2, 2, 3u, InferMatmul, FwdMatmul, BwdMatmul, nullptr, false, true},
    {OpKind::kMm, 2, 2, 3u, InferMatmul, FwdMatmul, BwdMatmul, nullptr, false, true},
    {OpKind::kBmm, 2, 2, 3u, InferMatmul, FwdMatmul, BwdMatmul, nullptr, false, true},
    {OpKind::kBaddbmm, 3, 3, 7u, InferBaddbmm, FwdBaddbmm, BwdBaddbmm, AliasGradSame, false, true},
    {OpKind::kEmbedding, 2, 2, 2u, InferEmbedding, FwdEmbedding, BwdEmbedding},
    {OpKind::kBatchNorm, 1, 5, kNormDiff, InferNorm, FwdNorm, BwdNorm},
    {OpKind::kLayerNorm, 1, 3, kNormDiff, InferNorm, FwdNorm, BwdNorm},
    {OpKind::kGroupNorm, 1, 3, kNormDiff, InferNorm, FwdNorm, BwdNorm},
    {OpKind::kRmsNorm, 1, 2, 3u, InferNorm, FwdRmsNorm, BwdRmsNorm},
    {OpKind::kMaxPool2d, 1, 1, 1u, InferPool, FwdPool, nullptr},
    {OpKind::kAvgPool2d, 1, 1, 1u, InferPool, FwdPool, nullptr},
    {OpKind::kAdaptiveAvgPool2d, 1, 1, 1u, InferPool, FwdPool, nullptr},
    {OpKind::kMaxPool3d, 1, 1, 1u, InferPool, FwdPool, nullptr},
    {OpKind::kAvgPool3d, 1, 1, 1u, InferPool, FwdPool, nullptr},
    {OpKind::kAdaptiveAvgPool3d, 1, 1, 1u, InferPool, FwdPool, nullptr},
    {OpKind::kAdaptiveMaxPool2d, 1, 1, 1u, InferPool, FwdPool, nullptr},
    {OpKind::kAdaptiveMaxPool3d, 1, 1, 1u, InferPool, FwdPool, nullptr},
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
