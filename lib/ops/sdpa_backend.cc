#include "lib/ops/sdpa_backend.h"

#include <algorithm>

namespace memsim {

namespace {

const std::vector<Dtype> kCpuFlashDtypes = {Dtype::kFloat32, Dtype::kFloat64, Dtype::kBFloat16, Dtype::kFloat16};
const std::vector<Dtype> kHalf = {Dtype::kFloat16, Dtype::kBFloat16};
const std::vector<Dtype> kHalfAndFloat = {Dtype::kFloat16, Dtype::kBFloat16, Dtype::kFloat32};
const SdpaGate kMath = {SdpaBackend::kMath, {}, true, true, 0, 1, false, {}};

// Note [SDPA backends]. CPU, 2.x (sdp_utils_cpp.cpp priority_order_cpp, use_flash_attention_cpp):
// flash (_scaled_dot_product_flash_attention_for_cpu) unless dropout_p > 0 (check_for_dropout),
// q/k/v head dims differ (check_head_dim_size_cpp) or the dtype is not float/double/bf16/half;
// an attn_mask is accepted. Otherwise math.
const std::vector<SdpaGate> kCpu2x = {
    {SdpaBackend::kFlash, kCpuFlashDtypes, true, false, 0, 1, true, {}},
    kMath,
};
// CUDA, 2.x (cuda/sdp_utils.cpp priority_order: cuDNN first on SM 9.0 / 10.0 since 2.9, PR
// #162073; then flash, efficient, math). Flash: fp16/bf16, no explicit mask, head dim <= 256
// and a multiple of 8, SM 8.0+. Efficient: fp32 too, masks accepted, head dim a multiple of 8
// (fp16/bf16; 4 for fp32 is not modelled: 8 is required here). cuDNN: fp16/bf16, head dim <= 128,
// a multiple of 8, no explicit mask (the masks it accepts are not modelled).
const std::vector<SdpaGate> kCuda2x = {
    {SdpaBackend::kCudnn, kHalf, false, true, 128, 8, true, {"hopper", "blackwell"}},
    {SdpaBackend::kFlash, kHalf, false, true, 256, 8, true, {"ampere", "ada", "hopper", "blackwell"}},
    {SdpaBackend::kEfficient, kHalfAndFloat, true, true, 0, 8, false, {}},
    kMath,
};
// 1.13 has no fused attention: a graph's sdpa op runs its math decomposition.
const std::vector<SdpaGate> kMathOnly = {kMath};

bool Holds(const SdpaGate& g, const SdpaCall& c, const Profile& p) {
  if (g.backend == SdpaBackend::kMath) return true;
  if (std::find(g.dtypes.begin(), g.dtypes.end(), c.dtype) == g.dtypes.end()) return false;
  if (c.has_mask && !g.mask_ok) return false;
  if (c.dropout_p > 0 && !g.dropout_ok) return false;
  if (g.equal_head_dims && c.head_dim_qk != c.head_dim_v) return false;
  for (int64_t d : {c.head_dim_qk, c.head_dim_v}) {
    if (g.max_head_dim > 0 && d > g.max_head_dim) return false;
    if (d % g.head_dim_multiple != 0) return false;
  }
  return g.archs.empty() || std::find(g.archs.begin(), g.archs.end(), p.gpu_arch) != g.archs.end();
}

}  // namespace

std::string_view SdpaBackendName(SdpaBackend b) {
  switch (b) {
    case SdpaBackend::kFlash: return "flash";
    case SdpaBackend::kEfficient: return "efficient";
    case SdpaBackend::kCudnn: return "cudnn";
    case SdpaBackend::kMath: return "math";
  }
  return "math";
}

std::optional<SdpaBackend> ParseSdpaBackend(std::string_view name) {
  for (SdpaBackend b : {SdpaBackend::kFlash, SdpaBackend::kEfficient, SdpaBackend::kCudnn, SdpaBackend::kMath})
    if (SdpaBackendName(b) == name) return b;
  return std::nullopt;
}

const std::vector<SdpaGate>& SdpaPriority(const Profile& profile) {
  if (!profile.fused_sdpa) return kMathOnly;
  return profile.cuda ? kCuda2x : kCpu2x;
}

SdpaBackend SdpaBackendOfOp(const RuleCtx& c) {
  if (auto forced = ParseSdpaBackend(c.profile.sdpa_backend)) return *forced;
  if (auto named = ParseSdpaBackend(c.op.attrs.GetString("backend", "auto"))) return *named;
  SdpaCall call;
  call.dtype = c.in[0]->dtype;
  call.has_mask = c.num_in() > 3;
  call.dropout_p = c.op.attrs.GetFloat("dropout_p", 0.0);
  call.head_dim_qk = c.in[0]->sizes.back();
  call.head_dim_v = c.in[2]->sizes.back();
  return ChooseSdpaBackend(c.profile, call);
}

SdpaBackend ChooseSdpaBackend(const Profile& profile, const SdpaCall& call) {
  for (const SdpaGate& g : SdpaPriority(profile))
    if (Holds(g, call, profile)) return g.backend;
  return SdpaBackend::kMath;
}

}  // namespace memsim
