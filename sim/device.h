// What the whole device holds besides the caching allocator's reserved memory: the CUDA context
// (driver state and the kernels loaded into it — PyTorch's, cuBLAS's, and cuDNN's convolution
// kernels when the model has convolutions) and the libraries' handles. nvidia-smi shows
//   device used = max_memory_reserved + context + cuDNN convolution modules.
// The sizes are data (sim/data/cuda_context.json: one row per architecture, PyTorch/CUDA
// release and module-loading mode, each with its public source); a row marked default is the
// point estimate for its architecture and the other rows of that architecture give the range.
// See docs/device-memory.md.
#ifndef MEMSIM_SIM_DEVICE_H_
#define MEMSIM_SIM_DEVICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ops/conv_workspace.h"
#include "lib/util/status.h"
#include "sim/nccl.h"

namespace memsim {

/// One row of sim/data/cuda_context.json.
struct ContextRow {
  std::string arch, torch, cuda, module_loading;
  int64_t context_bytes = 0;     ///< right after the first training step's kernels are loaded
  int64_t cudnn_conv_bytes = 0;  ///< cuDNN convolution modules and handle, when convolutions run
  bool is_default = false;       ///< the point estimate for |arch|
  std::string source;
};

/// The table, parsed once from the compiled-in JSON.
const std::vector<ContextRow>& ContextTable();

/// How the device is known: its architecture (empty: unknown GPU) and an exact context size
/// (--context-bytes, replaces the table: no context uncertainty).
struct ContextOptions {
  std::string arch;
  std::optional<int64_t> context_bytes;
  std::string gpu;  ///< --gpu's name ("" : none), for the verdict line
};

/// Memory outside the caching allocator, as a point estimate and a range: the CUDA context and
/// libraries, and with several ranks NCCL's communicator buffers (|nccl|, included in the sums).
struct DeviceOverhead {
  int64_t bytes = 0, low = 0, high = 0;
  bool uses_cudnn_conv = false;
  std::string source;  ///< the table row of the point estimate, or "--context-bytes"
  NcclBuffers nccl;    ///< the communicators of the rank (Note [NCCL buffers]); none for one rank
};

/// The overhead of training |g| on the device |d|, one rank of |parallel|. Error: a negative
/// --context-bytes.
Result<DeviceOverhead> EstimateOverhead(const Graph& g, const ContextOptions& d, const ParallelOptions& parallel = {});

/// --cudnn-workspace none|typical|max|BYTES → policy and bytes. Error: anything else, or
/// negative bytes.
struct CudnnWorkspaceChoice {
  ConvWorkspacePolicy policy = ConvWorkspacePolicy::kTypical;
  int64_t bytes = 0;  ///< for kFixed
};
Result<CudnnWorkspaceChoice> ParseCudnnWorkspace(const std::string& s);

}  // namespace memsim

#endif  // MEMSIM_SIM_DEVICE_H_
