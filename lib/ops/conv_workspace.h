// cuDNN convolution workspaces: the scratch buffer each cuDNN convolution call (forward,
// backward-data, backward-filter) allocates through the caching allocator right before the
// kernel and frees right after (ATen's cudnn/Conv_v7.cpp and Conv_v8.cpp). Its size depends on
// the algorithm cuDNN picks, so it is a policy (Profile::conv_workspace_policy):
//   none     no workspace;
//   fixed    Profile::conv_workspace_bytes per call (--cudnn-workspace BYTES, --conv-workspace);
//   typical  the algorithms cuDNN's heuristics pick in the public recordings, per GPU
//            generation (the table in conv_workspace.cc; docs/device-memory.md);
//   max      a safe upper bound: the larger of typical and the FFT algorithm's workspace (input,
//            grad and filter transformed to the padded frequency domain), the largest of the
//            algorithms PyTorch lets cuDNN choose from.
#ifndef MEMSIM_LIB_OPS_CONV_WORKSPACE_H_
#define MEMSIM_LIB_OPS_CONV_WORKSPACE_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace memsim {

enum class ConvWorkspacePolicy : uint8_t { kNone, kFixed, kTypical, kMax };

/// "none", "typical", "max" → the policy; anything else → nullopt (the caller parses BYTES).
std::optional<ConvWorkspacePolicy> ParseConvWorkspacePolicy(std::string_view s);
std::string_view ConvWorkspacePolicyName(ConvWorkspacePolicy p);

enum class ConvPass : uint8_t { kForward, kBackwardData, kBackwardFilter };

/// What the workspace size depends on: one convolution call, batched, any number of spatial dims.
struct ConvCall {
  int64_t batch = 1, in_channels = 0, out_channels = 0, groups = 1, element_size = 4;
  std::vector<int64_t> kernel, stride, dilation, in_spatial, out_spatial;
};

/// The algorithm choice of one GPU generation (one row of the table in conv_workspace.cc).
struct ConvAlgoRow {
  std::string_view arch;
  /// 3×3 stride-1 forward and backward-data: Winograd with the filter transformed into
  /// |winograd_fwd_tile|² tiles per (out, in) channel pair (0: implicit GEMM instead).
  int64_t winograd_fwd_tile;
  /// 3×3 stride-1 backward-filter: non-fused Winograd F(m×m, 3×3) with (m+2)² tiles: input,
  /// grad_output and filter transforms (0: implicit GEMM instead).
  int64_t winograd_bwd_filter_out_tile;
  std::string_view source;
};

/// The row of |arch| ("volta", "ampere", ...); the default row ("ampere") for an empty or
/// unknown name.
const ConvAlgoRow& ConvAlgoFor(std::string_view arch);
/// The known architectures, comma-separated.
std::string_view ConvAlgoArchs();

/// Workspace bytes of one call under |policy| (|fixed_bytes| for kFixed) on |arch|.
int64_t ConvWorkspaceBytes(ConvWorkspacePolicy policy, int64_t fixed_bytes, std::string_view arch,
                           const ConvCall& call, ConvPass pass);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_CONV_WORKSPACE_H_
