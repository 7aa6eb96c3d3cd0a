// The autocast op lists (Note [Autocast] in docs/op-rules.md), as one table per profile. Only
// the ops of memsim's vocabulary appear; an op that is absent runs in the dtype it receives.
#include "lib/ops/autocast_lists.h"

#include <utility>

namespace memsim {
namespace {

struct Row {
  OpKind kind;
  CastPolicy policy;
};

// PyTorch 2.x, CUDA (autocast_mode.h). cross_entropy is CompositeImplicit: log_softmax with an
// explicit dtype (the input's: LossNLL.cpp cross_entropy_loss), then nll_loss (fp32), which casts
// the log-probabilities (H100 snapshots of 2.11: a bf16 log_softmax, its fp32 copy saved).
constexpr Row kCuda2xRows[] = {
    {OpKind::kConv1d, CastPolicy::kLowerPrecision},   {OpKind::kConv2d, CastPolicy::kLowerPrecision},
    {OpKind::kConv3d, CastPolicy::kLowerPrecision}, {OpKind::kConvTranspose1d, CastPolicy::kLowerPrecision},
    {OpKind::kConvTranspose2d, CastPolicy::kLowerPrecision}, {OpKind::kConvTranspose3d, CastPolicy::kLowerPrecision},
    {OpKind::kLinear, CastPolicy::kLowerPrecision},   {OpKind::kMatmul, CastPolicy::kLowerPrecision},
    {OpKind::kMm, CastPolicy::kLowerPrecision},       {OpKind::kBmm, CastPolicy::kLowerPrecision},
    {OpKind::kBaddbmm, CastPolicy::kLowerPrecision},  {OpKind::kSdpa, CastPolicy::kLowerPrecision},
    {OpKind::kExp, CastPolicy::kFp32},                {OpKind::kLog, CastPolicy::kFp32},
    {OpKind::kPow, CastPolicy::kFp32},                {OpKind::kRsqrt, CastPolicy::kFp32},
    {OpKind::kLayerNorm, CastPolicy::kFp32},          {OpKind::kGroupNorm, CastPolicy::kFp32},
    {OpKind::kNllLoss, CastPolicy::kFp32},            {OpKind::kMseLoss, CastPolicy::kFp32},
    {OpKind::kCrossEntropy, CastPolicy::kInnerNllFp32}, {OpKind::kLogsumexp, CastPolicy::kFp32},
    {OpKind::kSoftmax, CastPolicy::kFp32SetOptDtype}, {OpKind::kLogSoftmax, CastPolicy::kFp32SetOptDtype},
    {OpKind::kSum, CastPolicy::kFp32SetOptDtype},     {OpKind::kCumsum, CastPolicy::kFp32SetOptDtype},
};

// PyTorch 1.13, CPU (the AutocastCPU registrations): lower_precision_fp for convolutions and
// GEMMs; fp32 for the losses; promote for cat and stack. Everything else (layer_norm, softmax,
// exp, ...) runs in the dtype it receives. 2.x's CPU list adds scaled_dot_product_attention to
// lower_precision_fp (aten/src/ATen/autocast_mode.cpp, KERNEL_CPU; 1.13 has no such op, so the
// row serves both releases; checked under 2.13: fp32 q, k, v give a bf16 output).
constexpr Row kCpu113Rows[] = {
    {OpKind::kConv1d, CastPolicy::kLowerPrecision},  {OpKind::kConv2d, CastPolicy::kLowerPrecision},
    {OpKind::kConv3d, CastPolicy::kLowerPrecision}, {OpKind::kConvTranspose1d, CastPolicy::kLowerPrecision},
    {OpKind::kConvTranspose2d, CastPolicy::kLowerPrecision}, {OpKind::kConvTranspose3d, CastPolicy::kLowerPrecision},
    {OpKind::kLinear, CastPolicy::kLowerPrecision},  {OpKind::kMatmul, CastPolicy::kLowerPrecision},
    {OpKind::kMm, CastPolicy::kLowerPrecision},      {OpKind::kBmm, CastPolicy::kLowerPrecision},
    {OpKind::kBaddbmm, CastPolicy::kLowerPrecision}, {OpKind::kSdpa, CastPolicy::kLowerPrecision},
    {OpKind::kCrossEntropy, CastPolicy::kFp32},
    {OpKind::kNllLoss, CastPolicy::kFp32},           {OpKind::kMseLoss, CastPolicy::kFp32},
    {OpKind::kCat, CastPolicy::kPromote},            {OpKind::kStack, CastPolicy::kPromote},
};

/// autocast's is_eligible: a floating tensor other than fp64.
bool Eligible(Dtype t) { return IsFloating(t) && t != Dtype::kFloat64; }

/// `.to(dtype)` (memory_format=preserve): a dense tensor keeps its strides, an expanded one
/// becomes contiguous.
TensorMeta CastMeta(const TensorMeta& m, Dtype to) {
  for (int64_t st : m.strides)
    if (st == 0) return *TensorMeta::Contiguous(to, m.sizes);
  TensorMeta out = m;
  out.dtype = to;
  return out;
}

int Rank(Dtype t) { return t == Dtype::kFloat64 ? 3 : t == Dtype::kFloat32 ? 2 : 1; }

}  // namespace

Dtype PromoteFloating(Dtype a, Dtype b) {
  if (a == b) return a;
  if (Rank(a) == 1 && Rank(b) == 1) return Dtype::kFloat32;  // fp16 with bf16
  return Rank(a) >= Rank(b) ? a : b;
}

CastPolicy AutocastPolicy(AutocastTable table, OpKind kind) {
  auto find = [&](const auto& rows) {
    for (const Row& r : rows)
      if (r.kind == kind) return r.policy;
    return CastPolicy::kNone;
  };
  return table == AutocastTable::kCuda2x ? find(kCuda2xRows) : find(kCpu113Rows);
}

std::vector<InputCast> AutocastCasts(AutocastTable table, OpKind kind, Dtype lower,
                                     const std::vector<const TensorMeta*>& in) {
  std::vector<InputCast> casts;
  CastPolicy policy = AutocastPolicy(table, kind);
  if (policy == CastPolicy::kNone || policy == CastPolicy::kInnerNllFp32 || in.empty()) return casts;
  Dtype to = lower;
  if (policy == CastPolicy::kFp32 || policy == CastPolicy::kFp32SetOptDtype) to = Dtype::kFloat32;
  if (policy == CastPolicy::kPromote) {
    bool any = false;
    for (const TensorMeta* m : in) {
      if (!Eligible(m->dtype)) continue;
      to = any ? PromoteFloating(to, m->dtype) : m->dtype;
      any = true;
    }
  }
  if (policy == CastPolicy::kFp32SetOptDtype) {
    if (Eligible(in[0]->dtype) && in[0]->dtype != Dtype::kFloat32)
      casts.push_back(InputCast{0, CastMeta(*in[0], Dtype::kFloat32), false});
    return casts;
  }
  for (int i = static_cast<int>(in.size()) - 1; i >= 0; --i) {
    const TensorMeta& m = *in[i];
    if (!Eligible(m.dtype) || m.dtype == to) continue;
    casts.push_back(InputCast{i, CastMeta(m, to), true});
  }
  return casts;
}

}  // namespace memsim
