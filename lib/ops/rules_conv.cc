// Convolution (conv1d/2d/3d): one aten::convolution node (derivatives.yaml `convolution`: input and
// weight kept whenever the node exists) and the kernel each backend runs: cuDNN's workspaces on
// CUDA; on the CPU oneDNN's reorders and scratchpads, or ATen's slow_conv2d / slow_conv3d where
// use_mkldnn declines (Notes [THNN convolutions], [bf16 convolutions on CPU] in docs/op-rules.md).
// Transposed convolution: rules_conv_transpose.cc.
#include <algorithm>
#include <vector>

#include "lib/ops/conv_workspace.h"
#include "lib/ops/onednn_plan.h"
#include "lib/ops/onednn_scratchpad.h"
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {
Status InferConv(const RuleCtx& c, InferOut* o) {
  MEMSIM_RETURN_IF_ERROR(NeedInputs(c, 2, 3));
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  size_t nsp = c.op.kind == OpKind::kConv1d ? 1 : c.op.kind == OpKind::kConv2d ? 2 : 3;
  bool batched = x.dim() == static_cast<int64_t>(nsp) + 2;
  if (!batched && x.dim() != static_cast<int64_t>(nsp) + 1)
    return RuleError(c, "input " + x.ShapeString() + " has the wrong rank");
  if (w.dim() != static_cast<int64_t>(nsp) + 2) return RuleError(c, "weight " + w.ShapeString() + " has the wrong rank");
  auto stride = SpatialAttr(c, "stride", nsp, std::vector<int64_t>{1});
  auto pad = SpatialAttr(c, "padding", nsp, std::vector<int64_t>{0});
  auto dil = SpatialAttr(c, "dilation", nsp, std::vector<int64_t>{1});
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
    int64_t out = WindowOut(x.sizes[off + 1 + i], w.sizes[2 + i], (*stride)[i], (*pad)[i], (*dil)[i], false);
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
  auto stride = SpatialAttr(c, "stride", nsp, std::vector<int64_t>{1});
  auto pad = SpatialAttr(c, "padding", nsp, std::vector<int64_t>{0});
  auto dil = SpatialAttr(c, "dilation", nsp, std::vector<int64_t>{1});
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
  k.stride = SpatialAttr(c, "stride", nsp, std::vector<int64_t>{1}).value_or(std::vector<int64_t>(nsp, 1));
  k.dilation = SpatialAttr(c, "dilation", nsp, std::vector<int64_t>{1}).value_or(std::vector<int64_t>(nsp, 1));
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
  auto stride = SpatialAttr(c, "stride", nsp, std::vector<int64_t>{1}).value_or(ones);
  auto pad = SpatialAttr(c, "padding", nsp, std::vector<int64_t>{0}).value_or(zeros);
  auto dil = SpatialAttr(c, "dilation", nsp, std::vector<int64_t>{1}).value_or(ones);
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

constexpr uint32_t kConvDiff = 7u;  // X, weight, bias

}  // namespace

const std::vector<OpRule> kConvRules = {
    {OpKind::kConv1d, 2, 3, kConvDiff, InferConv, FwdConv, BwdConv},
    {OpKind::kConv2d, 2, 3, kConvDiff, InferConv, FwdConv, BwdConv},
    {OpKind::kConv3d, 2, 3, kConvDiff, InferConv, FwdConv, BwdConv},
};

}  // namespace memsim
