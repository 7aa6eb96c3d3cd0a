// `mkldnn_rnn_layer`: one layer and direction of nn.LSTM on the CPU under PyTorch 2.x, which
// runs oneDNN's LSTM primitive (aten/src/ATen/native/mkldnn/RNN.cpp; Note [oneDNN LSTM] in
// docs/op-rules.md). The oneDNN buffer sizes come from lib/ops/onednn_rnn.h.
#include "lib/ops/onednn_rnn.h"
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

// Inputs, as RNN.cpp's mkldnn_rnn passes them: (input [T, B, I], weight_ih [4H, I],
// weight_hh [4H, H], bias_ih [4H], bias_hh [4H], hx [B, H], cx [B, H]). Without biases the
// two bias slots hold at::zeros of the weights' sizes.
enum Input { kX, kWih, kWhh, kBih, kBhh, kHx, kCx, kNumInputs };

constexpr int64_t kGates = 4;

OneDnnLstm Layer(const RuleCtx& c) {
  const TensorMeta& x = *c.in[kX];
  return {x.sizes[0], x.sizes[1], x.sizes[2], c.in[kWhh]->sizes[1]};
}

Status InferRnnLayer(const RuleCtx& c, InferOut* o) {
  if (!c.profile.onednn_rnn)
    return RuleError(c, "oneDNN's LSTM runs on the CPU under PyTorch 2.x only (here profile " + c.profile.name +
                            ", torch " + c.profile.torch + "): CUDA runs cuDNN's LSTM, which memsim does not model; " +
                            "1.13 runs ATen's composite, as a graph exported under 1.13 has it");
  if (c.autocast)  // autocast_mode.cpp lists mkldnn_rnn_layer as lower_precision_fp on the CPU
    return RuleError(c, "under autocast the LSTM runs in the lower precision: oneDNN's bf16 LSTM is not modelled");
  const TensorMeta& x = *c.in[kX];
  if (x.dim() != 3) return RuleError(c, "input " + x.ShapeString() + " must be [seq, batch, input]");
  const int64_t T = x.sizes[0], B = x.sizes[1], I = x.sizes[2];
  const int64_t H = c.in[kWhh]->dim() == 2 ? c.in[kWhh]->sizes[1] : -1;
  const std::vector<std::vector<int64_t>> expect = {{T, B, I}, {kGates * H, I}, {kGates * H, H}, {}, {}, {B, H}, {B, H}};
  for (int i = kWih; i < kNumInputs; ++i) {
    if (c.in[i]->dtype != Dtype::kFloat32 || x.dtype != Dtype::kFloat32)
      return RuleError(c, "only float32 is modelled (oneDNN's bf16 LSTM runs another implementation)");
    if (i == kBih || i == kBhh) continue;
    if (c.in[i]->sizes != expect[i])
      return RuleError(c, "input " + std::to_string(i) + " " + c.in[i]->ShapeString() + " does not fit input " +
                              x.ShapeString() + " and hidden size " + std::to_string(H));
  }
  if (c.in[kBih]->numel() != kGates * H * (c.op.attrs.GetBool("has_biases", true) ? 1 : I) ||
      c.in[kBhh]->numel() != kGates * H * (c.op.attrs.GetBool("has_biases", true) ? 1 : H))
    return RuleError(c, "bias inputs must be [4·hidden] (or the zeros of the weights' sizes without biases)");
  o->Fresh(TensorMeta::Contiguous(x.dtype, {T, B, H}));  // output
  o->Fresh(TensorMeta::Contiguous(x.dtype, {B, H}));     // hy
  o->Fresh(TensorMeta::Contiguous(x.dtype, {B, H}));     // cy
  return Status::OK();
}

/// mkldnn_rnn_layer (GradMode on): output, hy, cy; the bias sum b_ih + b_hh (at::zeros without
/// biases); the workspace; ideep's weight reorders and the scratchpad, freed as compute returns,
/// then the bias. MkldnnRnnLayerBackward0 keeps every input, the three outputs and the workspace.
void FwdRnnLayer(const RuleCtx& c, FwdPlan* p) {
  const OneDnnLstm l = Layer(c);
  const OneDnnLstmBuffers b = OneDnnLstmTraining(l);
  for (int j = 0; j < 3; ++j) p->AllocOutput(j);
  const int bias = p->AddExtra(kGates * l.hidden * 4, "bias");
  const int ws = p->AddExtra(b.workspace, "workspace");
  const int wl = b.fwd_weights_layer > 0 ? p->AddExtra(b.fwd_weights_layer, "weights_layer reorder") : -1;
  const int wi = b.fwd_weights_iter > 0 ? p->AddExtra(b.fwd_weights_iter, "weights_iter reorder") : -1;
  p->FreeExtra(p->AddExtra(b.fwd_scratchpad, "scratchpad"));
  if (wi >= 0) p->FreeExtra(wi);
  if (wl >= 0) p->FreeExtra(wl);
  p->FreeExtra(bias);
  for (int i = 0; i < kNumInputs; ++i) p->Save(SavedRef::kInput, i);
  for (int j = 0; j < 3; ++j) p->Save(SavedRef::kOutput, j);
  p->Save(SavedRef::kExtra, ws);
}

/// `g.contiguous()` of an incoming grad, or `at::zeros_like` of |like| for an undefined one:
/// a temp when either allocates, else -1.
int GradInput(const TensorMeta* grad, const TensorMeta& like, std::string_view label, BwdPlan* p) {
  if (grad != nullptr && grad->is_contiguous()) return -1;
  return p->Temp(like.bytes(), label);
}

/// The grad of input |i|: the engine takes it when the input requires grad; otherwise the
/// kernel's buffer is dropped as the node returns.
void Diff(const RuleCtx& c, int i, int64_t bytes, std::string_view label, BwdPlan* p) {
  if (c.rg_in(i)) {
    p->GradNew(i);
  } else {
    p->Temp(bytes, label);
  }
}

const TensorMeta* GradOf(const RuleCtx& c, size_t j) { return j < c.grad_outs.size() ? c.grad_outs[j] : nullptr; }

/// mkldnn_rnn_layer_backward: the incoming grads made contiguous (zeros where undefined), the
/// bias sum, the fp32 diff buffers in RNN.cpp's order (diff_x, diff_hx, diff_cx, diff_w1,
/// diff_w2, diff_b), then ideep's weight reorders, zeroed diff weights and bias, and the
/// scratchpad (freed in reverse as compute returns), and diff_b2 = diff_b.clone().
void BwdRnnLayer(const RuleCtx& c, BwdPlan* p) {
  const OneDnnLstm l = Layer(c);
  const OneDnnLstmBuffers b = OneDnnLstmTraining(l);
  const int64_t bias_bytes = kGates * l.hidden * 4;
  const int gy = GradInput(GradOf(c, 0), *c.out[0], "grad_output", p);
  const int ghy = GradInput(GradOf(c, 1), *c.in[kHx], "grad_hy", p);
  const int gcy = GradInput(GradOf(c, 2), *c.in[kCx], "grad_cy", p);
  const int bias = p->Temp(bias_bytes, "bias");
  Diff(c, kX, c.in[kX]->numel() * 4, "diff_x", p);
  Diff(c, kHx, c.in[kHx]->numel() * 4, "diff_hx", p);
  Diff(c, kCx, c.in[kCx]->numel() * 4, "diff_cx", p);
  Diff(c, kWih, c.in[kWih]->numel() * 4, "diff_w1", p);
  Diff(c, kWhh, c.in[kWhh]->numel() * 4, "diff_w2", p);
  Diff(c, kBih, bias_bytes, "diff_b_", p);
  std::vector<int> ideep;  // in allocation order
  for (auto [bytes, label] : {std::pair{b.bwd_weights_layer, "weights_layer reorder"},
                              {b.bwd_weights_iter, "weights_iter reorder"},
                              {b.diff_weights_layer, "diff_weights_layer"},
                              {b.diff_weights_iter, "diff_weights_iter"},
                              {b.diff_bias, "diff_bias"},
                              {b.bwd_scratchpad, "scratchpad"}})
    if (bytes > 0) ideep.push_back(p->Temp(bytes, label));
  for (auto k = ideep.rbegin(); k != ideep.rend(); ++k) p->FreeTemp(*k);
  Diff(c, kBhh, bias_bytes, "diff_b2_", p);
  for (int t : {bias, gcy, ghy, gy})
    if (t >= 0) p->FreeTemp(t);
}

constexpr uint32_t kAllDifferentiable = (1u << kNumInputs) - 1;

}  // namespace

const std::vector<OpRule> kRnnOneDnnRules = {
    {OpKind::kMkldnnRnnLayer, kNumInputs, kNumInputs, kAllDifferentiable, InferRnnLayer, FwdRnnLayer, BwdRnnLayer},
};

}  // namespace memsim
