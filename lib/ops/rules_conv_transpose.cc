// Transposed convolution (conv_transpose1d/2d/3d, nn.ConvTranspose*d): the same aten::convolution
// node as conv (derivatives.yaml `convolution`: input and weight kept whenever the node exists), run
// on the CPU by ATen's slow_conv_transpose2d/3d (1.13) or oneDNN's deconvolution (2.x), Note
// [Transposed convolution] in docs/op-rules.md.
#include <algorithm>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RndUp(int64_t a, int64_t b) { return DivUp(a, b) * b; }

/// The call's geometry: channels, per-sample spatial sizes and the attributes, expanded.
struct Deconv {
  size_t nsp = 0;
  int64_t batch = 1, in_ch = 0, out_ch = 0, groups = 1, es = 4;
  std::vector<int64_t> in, out, k, stride, pad, out_pad, dil;
  bool bias = false;
  int64_t InSpatial() const { return Prod(in); }
  int64_t OutSpatial() const { return Prod(out); }
  int64_t Kernel() const { return Prod(k); }
  static int64_t Prod(const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (int64_t x : v) p *= x;
    return p;
  }
};

std::optional<std::vector<int64_t>> Ints(const RuleCtx& c, const char* name, size_t n, int64_t dflt) {
  auto v = c.op.attrs.GetInts(name, c.bindings).value_or(std::vector<int64_t>{dflt});
  if (v.size() == 1) v.resize(n, v[0]);
  if (v.size() != n) return std::nullopt;
  return v;
}

size_t SpatialDims(OpKind kind) {
  return kind == OpKind::kConvTranspose1d ? 1 : kind == OpKind::kConvTranspose2d ? 2 : 3;
}

/// The geometry of |c| from its input and weight; nullopt with |err| set on a bad attribute.
std::optional<Deconv> GeometryOf(const RuleCtx& c, std::string* err) {
  const TensorMeta& x = *c.in[0];
  const TensorMeta& w = *c.in[1];
  Deconv d;
  d.nsp = SpatialDims(c.op.kind);
  const int64_t nsp = static_cast<int64_t>(d.nsp);
  const bool batched = x.dim() == nsp + 2;
  if (!batched && x.dim() != nsp + 1) return *err = "input " + x.ShapeString() + " has the wrong rank", std::nullopt;
  if (w.dim() != nsp + 2) return *err = "weight " + w.ShapeString() + " has the wrong rank", std::nullopt;
  auto stride = Ints(c, "stride", d.nsp, 1), pad = Ints(c, "padding", d.nsp, 0);
  auto out_pad = Ints(c, "output_padding", d.nsp, 0), dil = Ints(c, "dilation", d.nsp, 1);
  if (!stride || !pad || !out_pad || !dil)
    return *err = "stride/padding/output_padding/dilation must be an int or a list of " + std::to_string(nsp),
           std::nullopt;
  d.groups = c.op.attrs.GetInt("groups", c.bindings).value_or(1);
  const int64_t off = batched ? 1 : 0;
  d.batch = batched ? x.sizes[0] : 1;
  d.in_ch = x.sizes[off];
  if (d.groups <= 0 || d.in_ch != w.sizes[0] || d.in_ch % d.groups != 0)
    return *err = "input channels " + std::to_string(d.in_ch) + " do not match weight " + w.ShapeString() +
                  " with groups=" + std::to_string(d.groups),
           std::nullopt;
  d.out_ch = w.sizes[1] * d.groups;
  d.es = ElementSize(x.dtype);
  d.bias = c.num_in() > 2;
  if (d.bias && c.in[2]->numel() != d.out_ch) return *err = "bias size does not match", std::nullopt;
  d.stride = *stride, d.pad = *pad, d.out_pad = *out_pad, d.dil = *dil;
  for (size_t i = 0; i < d.nsp; ++i) {
    const int64_t in = x.sizes[off + 1 + i], k = w.sizes[2 + i];
    const int64_t s = d.stride[i], p = d.pad[i], op = d.out_pad[i], dl = d.dil[i];
    if (s <= 0 || dl <= 0 || p < 0 || op < 0) return *err = "bad stride/dilation/padding/output_padding", std::nullopt;
    if (op >= s && op >= dl) return *err = "output_padding must be smaller than stride or dilation", std::nullopt;
    const int64_t out = (in - 1) * s - 2 * p + dl * (k - 1) + op + 1;
    if (out <= 0) return *err = "the output of input " + x.ShapeString() + " would be empty", std::nullopt;
    d.in.push_back(in), d.out.push_back(out), d.k.push_back(k);
  }
  return d;
}

Status InferConvTranspose(const RuleCtx& c, InferOut* o) {
  if (c.in.size() < 2 || c.in.size() > 3)
    return RuleError(c, "expected 2-3 inputs, got " + std::to_string(c.in.size()));
  std::string err;
  auto d = GeometryOf(c, &err);
  if (!d) return RuleError(c, err);
  std::vector<int64_t> sizes;
  if (c.in[0]->dim() == static_cast<int64_t>(d->nsp) + 2) sizes.push_back(d->batch);
  sizes.push_back(d->out_ch);
  sizes.insert(sizes.end(), d->out.begin(), d->out.end());
  o->Fresh(TensorMeta::Contiguous(c.in[0]->dtype, sizes));
  return Status::OK();
}

Deconv Geometry(const RuleCtx& c) {
  std::string err;
  return *GeometryOf(c, &err);  // InferConvTranspose checked it
}

// --- ATen's slow_conv_transpose2d/3d (PyTorch 1.13 on the CPU) --------------------------------

/// The im2col-style column buffer of one call: [C_out/g · ∏kernel, ∏input] per sample.
int64_t SlowColumns(const Deconv& d) { return d.out_ch / d.groups * d.Kernel() * d.InSpatial() * d.es; }

/// slow_conv_transpose{2,3}d_backward needs columns unless the kernel is 1, stride 1, pad 0, dilation 1.
bool SlowNeedsColumns(const Deconv& d) {
  for (size_t i = 0; i < d.nsp; ++i)
    if (d.k[i] != 1 || d.stride[i] != 1 || d.pad[i] != 0 || d.dil[i] != 1) return true;
  return false;
}

/// One slow_conv_transpose call's forward (input |in_bytes|, result |out_bytes|): |whole|, the op's
/// output itself (returns -1); else one group's call, whose result is an extra it returns.
int SlowForwardCall(const Deconv& d, FwdPlan* p, int64_t in_bytes, int64_t out_bytes, bool whole) {
  int out = -1;
  if (d.nsp == 3) {
    // NaiveConvolutionTranspose3d.cpp: output = empty_like(input), then output.resize_ to the
    // result: a larger result moves to a new storage, a smaller one keeps the input-sized one.
    if (out_bytes > in_bytes) {
      const int e = p->AddExtra(in_bytes, "slow_conv_transpose3d empty_like(input)");
      if (whole) p->AllocOutput(0); else out = p->AddExtra(out_bytes, "slow_conv_transpose group output");
      p->FreeExtra(e);
    } else if (whole) {
      p->AllocOutput(0, in_bytes);
    } else {
      out = p->AddExtra(in_bytes, "slow_conv_transpose group output");
    }
  } else if (whole) {
    p->AllocOutput(0);  // slow_conv_transpose2d is structured: the output comes first
  } else {
    out = p->AddExtra(out_bytes, "slow_conv_transpose group output");
  }
  const int cols = p->AddExtra(SlowColumns(d), "slow_conv_transpose columns");
  const int ones = d.bias ? p->AddExtra(d.OutSpatial() * d.es, "slow_conv_transpose bias ones") : -1;
  if (ones >= 0) p->FreeExtra(ones);
  p->FreeExtra(cols);
  return out;
}

void SlowForward(const Deconv& d, const RuleCtx& c, FwdPlan* p) {
  const int64_t in_bytes = c.in[0]->bytes(), out_bytes = c.out[0]->bytes();
  if (d.groups == 1) {
    SlowForwardCall(d, p, in_bytes, out_bytes, true);
    return;
  }
  // Convolution.cpp 1.13 _convolution: a slow backend runs group by group on
  // `input.narrow(1, ...).contiguous()` (a copy, dropped after the call; the weight's and bias's
  // dim-0 slices are contiguous), then at::cat of the group outputs.
  std::vector<int> outs;
  for (int64_t g = 0; g < d.groups; ++g) {
    const int xin = p->AddExtra(in_bytes / d.groups, "slow_conv_transpose group input copy");
    outs.push_back(SlowForwardCall(d, p, in_bytes / d.groups, out_bytes / d.groups, false));
    p->FreeExtra(xin);
  }
  p->AllocOutput(0);
  for (int o : outs) p->FreeExtra(o);
}

/// Whether the kernels copy the incoming grad (`grad_output.contiguous()`, Note [Conv grad_output
/// copy]): a non-contiguous grad, e.g. a slice of cat's grad.
bool CopiesGradOut(const RuleCtx& c) {
  return c.grad_out != nullptr && c.in[0]->is_contiguous() && !c.grad_out->is_contiguous();
}

void SlowBackward(const Deconv& d, const RuleCtx& c, BwdPlan* p) {
  const bool cols = SlowNeedsColumns(d), bias = d.bias && c.rg_in(2);
  const int64_t go_bytes = c.grad_out != nullptr ? c.grad_out->numel() * d.es : c.out[0]->bytes();
  if (d.groups == 1) {
    // Both parts take `grad_output_.contiguous()` on their own: a copy each when it is not.
    const bool copy = CopiesGradOut(c);
    if (c.rg_in(0)) {  // slow_conv_transpose_backward_out_cpu_template: grad_input, grad_columns
      const int go = copy ? p->Temp(go_bytes, "slow_conv_transpose grad_output contiguous copy") : -1;
      p->GradNew(0);
      if (cols) p->FreeTemp(p->Temp(SlowColumns(d), "slow_conv_transpose grad columns"));
      if (go >= 0) p->FreeTemp(go);
    }
    if (c.rg_in(1) || bias) {  // acc_grad_parameters: grad_weight, grad_bias, then the columns
      if (c.rg_in(1)) p->GradNew(1);
      if (bias) p->GradNew(2);
      const int go = copy ? p->Temp(go_bytes, "slow_conv_transpose grad_output contiguous copy") : -1;
      if (c.rg_in(1) && cols) p->FreeTemp(p->Temp(SlowColumns(d), "slow_conv_transpose columns"));
      if (go >= 0) p->FreeTemp(go);
    }
    return;
  }
  // Convolution.cpp 1.13 convolution_backward, a slow backend with groups: per group the
  // grad_output's and the input's channel slices copied (`.contiguous()`), that group's grads,
  // then at::cat of each grad; the per-group vectors go in reverse order (bias, weight, input).
  std::vector<int> gi, gw, gb;
  for (int64_t g = 0; g < d.groups; ++g) {
    const int go = p->Temp(go_bytes / d.groups, "slow_conv_transpose group grad_output copy");
    const int xc = p->Temp(c.in[0]->bytes() / d.groups, "slow_conv_transpose group input copy");
    if (c.rg_in(0)) {
      gi.push_back(p->Temp(c.in[0]->bytes() / d.groups, "slow_conv_transpose group grad_input"));
      if (cols) p->FreeTemp(p->Temp(SlowColumns(d), "slow_conv_transpose grad columns"));
    }
    if (c.rg_in(1)) gw.push_back(p->Temp(c.in[1]->bytes() / d.groups, "slow_conv_transpose group grad_weight"));
    if (bias) gb.push_back(p->Temp(c.in[2]->bytes() / d.groups, "slow_conv_transpose group grad_bias"));
    if (c.rg_in(1) && cols) p->FreeTemp(p->Temp(SlowColumns(d), "slow_conv_transpose columns"));
    p->FreeTemp(xc);
    p->FreeTemp(go);
  }
  if (c.rg_in(0)) p->GradNew(0);
  if (c.rg_in(1)) p->GradNew(1);
  if (bias) p->GradNew(2);
  for (const auto* v : {&gb, &gw, &gi})
    for (int t : *v) p->FreeTemp(t);
}

// --- oneDNN's deconvolution (PyTorch 2.x on the CPU) -------------------------------------------

/// Bytes of a tensor of |batch| × |channels| × |spatial| with the channels padded to |block| per
/// group (oneDNN's blocked layouts: aBcd16b on avx512, aBcd8b on avx2).
int64_t Padded(int64_t batch, int64_t groups, int64_t channels_per_group, int64_t spatial, int64_t es,
               int64_t block = 16) {
  return batch * groups * RndUp(channels_per_group, block) * spatial * es;
}

/// The brgemm strided deconvolution's scratchpad (brg_deconv over brgconv_strided: a backward-data
/// convolution of the deconvolution's source): jit_brgemm_conv_bwd_utils.cpp init_conf /
/// init_scratchpad with one thread, nested in brg_deconv's registry (memory_tracking.hpp: each
/// piece costs its bytes plus its alignment, at least 128). Note [Transposed convolution].
int64_t BrgStridedScratchpad(const Deconv& d) {
  constexpr int64_t kPage = 4096, kBatchElement = 40;  // sizeof(brgemm_batch_element_t)
  // The brgemm batch: the kernel taps of one call, padded to a page, in whole elements.
  const int64_t batch = DivUp(RndUp(d.Kernel() * kBatchElement, kPage), kBatchElement) * kBatchElement;
  // The padded copy of the source (the convolution's diff_dst): its spatial dims grown by the
  // overflow of the kernel past each pad, over 16-channel blocks.
  int64_t padded = 1;
  for (size_t i = 0; i < d.nsp; ++i) {
    const int64_t ext = (d.k[i] - 1) * d.dil[i] + 1, r_pad = d.pad[i] - d.out_pad[i];
    const int64_t l_ovf = std::max<int64_t>(0, ext - 1 - d.pad[i]) / d.stride[i];
    const int64_t r_ovf = std::max<int64_t>(0, ext - 1 - r_pad) / d.stride[i];
    padded *= d.in[i] + l_ovf + r_ovf;
  }
  const int64_t inp = RndUp(padded * d.groups * RndUp(d.in_ch / d.groups, 16), kPage) * d.es;
  // Its mask: one byte per (depth, height) row and channel block, one block along the width.
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < d.nsp; ++i) rows *= d.in[i];
  const int64_t mask = RndUp(rows * d.groups * DivUp(d.in_ch / d.groups, 16), kPage);
  const int64_t nested = (batch + kPage) + (inp + kPage) + (mask + kPage);
  return nested + 128;
}

bool Strided(const Deconv& d) {
  for (int64_t s : d.stride)
    if (s != 1) return true;
  return false;
}

/// mkldnn_to_dense of a channels-last (nwc/nhwc/ndhwc) result: to_public keeps its strides, and
/// the `.contiguous()` that follows copies unless those strides are contiguous anyway.
bool ChannelsLastCopies(const Deconv& d) { return d.out_ch > 1 && d.OutSpatial() > 1; }

void OneDnnForward(const Deconv& d, const RuleCtx& c, FwdPlan* p) {
  const int64_t icg = d.in_ch / d.groups, ocg = d.out_ch / d.groups;
  const int64_t wbytes = d.groups * icg * RndUp(ocg, 16) * d.Kernel() * d.es;  // O padded to 16
  if (!Strided(d)) {
    // Stride 1: oneDNN's jit avx512 convolution on blocked (aBcd16b) layouts.
    const int src = p->AddExtra(Padded(d.batch, d.groups, icg, d.InSpatial(), d.es), "onednn src reorder");
    const int wr = p->AddExtra(d.groups * RndUp(icg, 16) * RndUp(ocg, 16) * d.Kernel() * d.es, "onednn weight reorder");
    const int dst = p->AddExtra(Padded(d.batch, d.groups, ocg, d.OutSpatial(), d.es), "onednn blocked dst");
    p->FreeExtra(wr);
    p->FreeExtra(src);
    p->AllocOutput(0);
    p->FreeExtra(dst);
    return;
  }
  // Strided: brg_deconv on channels-last (acdb) source and destination.
  const int scr = p->AddExtra(BrgStridedScratchpad(d), "onednn scratchpad");
  const int src = p->AddExtra(c.in[0]->bytes(), "onednn src reorder (channels last)");
  const int wr = p->AddExtra(wbytes, "onednn weight reorder");
  const int dst = p->AddExtra(c.out[0]->bytes(), "onednn dst (channels last)");
  p->FreeExtra(wr);
  p->FreeExtra(src);
  p->FreeExtra(scr);
  if (ChannelsLastCopies(d)) {
    const int pub = p->AddExtra(c.out[0]->bytes(), "mkldnn_to_dense channels-last result");
    p->AllocOutput(0);
    p->FreeExtra(pub);
  } else {
    p->AllocOutput(0);
  }
  p->FreeExtra(dst);
}

void OneDnnBackward(const Deconv& d, const RuleCtx& c, BwdPlan* p) {
  // The jit avx512 backward-data / backward-weights convolutions on blocked layouts
  // (mkldnn_convolution_transpose_backward, aten/src/ATen/native/mkldnn/Conv.cpp). A result with
  // fewer than 16 channels per group is read plain: no grad_output reorder, its weight dim unpadded.
  const int64_t icg = d.in_ch / d.groups, ocg = d.out_ch / d.groups;
  const bool plain_out = ocg < 16;
  const int64_t gout = Padded(d.batch, d.groups, ocg, d.OutSpatial(), d.es);
  const int64_t wblocked = d.groups * RndUp(icg, 16) * (plain_out ? ocg : RndUp(ocg, 16)) * d.Kernel() * d.es;
  const int64_t xblocked = Padded(d.batch, d.groups, icg, d.InSpatial(), d.es);
  const bool bias = d.bias && c.rg_in(2);
  // `grad_output_t.contiguous(memory_format)`: kept through both parts (Note [Conv grad_output copy]).
  const int gcopy = CopiesGradOut(c) ? p->Temp(c.grad_out->numel() * d.es, "grad_output contiguous copy") : -1;
  if (c.rg_in(0)) {
    const int go = plain_out ? -1 : p->Temp(gout, "onednn grad_out reorder");
    const int wr = p->Temp(wblocked, "onednn weight reorder");
    const int gib = p->Temp(xblocked, "onednn blocked grad_input");
    p->FreeTemp(wr);
    if (go >= 0) p->FreeTemp(go);
    p->GradNew(0);
    p->FreeTemp(gib);
  }
  if (c.rg_in(1) || bias) {
    // A 3-D one with a plain grad_output: the avx512 backward-weights kernel declines it and the
    // avx2 one runs on 8-channel blocks (ONEDNN_VERBOSE: jit:avx2, aBcde8b / BAcde8a8b).
    const int64_t blk = plain_out && d.nsp == 3 ? 8 : 16;
    const bool reorder_go = !plain_out || blk == 8;
    const int64_t go_bytes = Padded(d.batch, d.groups, ocg, d.OutSpatial(), d.es, blk);
    const int go = reorder_go ? p->Temp(go_bytes, "onednn grad_out reorder") : -1;
    const int src = p->Temp(Padded(d.batch, d.groups, icg, d.InSpatial(), d.es, blk), "onednn src reorder");
    const int64_t gwb = blk == 8 ? d.groups * RndUp(icg, 8) * RndUp(ocg, 8) * d.Kernel() * d.es : wblocked;
    const int gw = p->Temp(gwb, "onednn blocked grad_weight");
    const int gb = bias ? p->Temp(d.out_ch * d.es, "onednn blocked grad_bias") : -1;
    p->FreeTemp(src);
    if (go >= 0) p->FreeTemp(go);
    if (bias) p->GradNew(2);
    if (c.rg_in(1)) p->GradNew(1);
    p->FreeTemp(gw);
    if (gb >= 0) p->FreeTemp(gb);
  }
  if (gcopy >= 0) p->FreeTemp(gcopy);
}

// --- cuDNN (CUDA) -------------------------------------------------------------------------------

/// cuDNN runs a transposed convolution as the convolution it is the adjoint of (ATen's
/// cudnn_convolution_transpose, cudnn/ConvShared.cpp): its forward is that convolution's
/// backward-data, its backward-data that forward, its backward-weights that backward-filter.
int64_t CudnnWorkspace(const RuleCtx& c, const Deconv& d, ConvPass pass) {
  const Profile& pr = c.profile;
  if (pr.conv_workspace_policy == ConvWorkspacePolicy::kNone) return 0;
  ConvCall k;
  k.batch = d.batch, k.in_channels = d.out_ch, k.out_channels = d.in_ch, k.groups = d.groups, k.element_size = d.es;
  k.kernel = d.k, k.stride = d.stride, k.dilation = d.dil, k.in_spatial = d.out, k.out_spatial = d.in;
  return ConvWorkspaceBytes(pr.conv_workspace_policy, pr.conv_workspace_bytes, pr.gpu_arch, k, pass);
}

void FwdConvTranspose(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
  const Deconv d = Geometry(c);
  if (!c.profile.onednn_conv_reorders) {  // cuDNN: the output, then the call's workspace
    if (const int64_t ws = CudnnWorkspace(c, d, ConvPass::kBackwardData); ws > 0) {
      p->AllocOutput(0);
      p->FreeExtra(p->AddExtra(ws, "cudnn workspace"));
    }
    return;
  }
  if (c.profile.conv_transpose_slow) SlowForward(d, c, p);
  else OneDnnForward(d, c, p);
}

void BwdConvTranspose(const RuleCtx& c, BwdPlan* p) {
  const Deconv d = Geometry(c);
  if (!c.profile.onednn_conv_reorders) {
    for (int i = 0; i < c.num_in(); ++i) {
      if (!c.rg_in(i)) continue;
      p->GradNew(i);
      if (i >= 2) continue;
      const ConvPass pass = i == 0 ? ConvPass::kForward : ConvPass::kBackwardFilter;
      if (const int64_t ws = CudnnWorkspace(c, d, pass); ws > 0)
        p->FreeTemp(p->Temp(ws, i == 0 ? "cudnn backward-data workspace" : "cudnn backward-filter workspace"));
    }
    return;
  }
  if (c.profile.conv_transpose_slow) SlowBackward(d, c, p);
  else OneDnnBackward(d, c, p);
}

constexpr uint32_t kDeconvDiff = 7u;  // X, weight, bias

}  // namespace

const std::vector<OpRule> kConvTransposeRules = {
    {OpKind::kConvTranspose1d, 2, 3, kDeconvDiff, InferConvTranspose, FwdConvTranspose, BwdConvTranspose},
    {OpKind::kConvTranspose2d, 2, 3, kDeconvDiff, InferConvTranspose, FwdConvTranspose, BwdConvTranspose},
    {OpKind::kConvTranspose3d, 2, 3, kDeconvDiff, InferConvTranspose, FwdConvTranspose, BwdConvTranspose},
};

}  // namespace memsim
