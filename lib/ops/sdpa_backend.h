// Which kernel F.scaled_dot_product_attention runs, as data: per device and PyTorch release, the
// backends in priority order, each with the gates of PyTorch's selector (Note [SDPA backends] in
// docs/op-rules.md: aten/src/ATen/native/transformers/sdp_utils_cpp.cpp on the CPU,
// aten/src/ATen/native/transformers/cuda/sdp_utils.cpp on CUDA). What each backend saves for
// backward is the rule's (rules_nn.cc); this header only chooses.
#ifndef MEMSIM_LIB_OPS_SDPA_BACKEND_H_
#define MEMSIM_LIB_OPS_SDPA_BACKEND_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lib/ir/dtype.h"
#include "lib/ops/op_rules.h"
#include "lib/ops/profile.h"

namespace memsim {

enum class SdpaBackend : uint8_t { kFlash, kEfficient, kCudnn, kMath };

std::string_view SdpaBackendName(SdpaBackend b);
/// "flash", "efficient", "cudnn", "math"; nullopt for another name.
std::optional<SdpaBackend> ParseSdpaBackend(std::string_view name);

/// What the selector looks at (sdp_params).
struct SdpaCall {
  Dtype dtype = Dtype::kFloat32;
  bool has_mask = false;
  double dropout_p = 0;
  int64_t head_dim_qk = 64;
  int64_t head_dim_v = 64;
};

/// One backend's gates: the call runs on it when every gate holds.
struct SdpaGate {
  SdpaBackend backend;
  std::vector<Dtype> dtypes;       ///< check_tensor_dtype
  bool mask_ok;                    ///< an explicit attn_mask is accepted
  bool dropout_ok;                 ///< dropout_p > 0 is accepted (check_for_dropout on the CPU)
  int64_t max_head_dim;            ///< check_head_dim_size (0: no bound)
  int64_t head_dim_multiple;       ///< the head dim must be a multiple of this (1: any)
  bool equal_head_dims;            ///< q, k and v must share the last dimension
  std::vector<std::string_view> archs;  ///< GPU generations it runs on (empty: any; CPU rows)
};

/// The backends of |profile| (device and release) in priority order; the last is math, which
/// takes any call.
const std::vector<SdpaGate>& SdpaPriority(const Profile& profile);

/// The backend PyTorch picks for |call| under |profile| (the first whose gates hold).
SdpaBackend ChooseSdpaBackend(const Profile& profile, const SdpaCall& call);

/// The backend of one scaled_dot_product_attention op: its `backend` attribute when it names
/// one, else PyTorch's choice for its inputs and attributes.
SdpaBackend SdpaBackendOfOp(const RuleCtx& c);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_SDPA_BACKEND_H_
