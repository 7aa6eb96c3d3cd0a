// Known GPUs and their memory, for `--gpu NAME`. Capacity is the total device memory as
// nvidia-smi reports it; the CUDA context and library memory outside the caching allocator are
// modelled per architecture (sim/device.h), so the verdict compares the whole device.
#ifndef MEMSIM_SIM_GPUS_H_
#define MEMSIM_SIM_GPUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memsim {

struct GpuSpec {
  std::string_view name;
  int64_t memory_bytes;
  int64_t cublas_workspace_bytes;  ///< PyTorch's default for the GPU's compute capability
  std::string_view arch;           ///< architecture: volta, turing, ampere, ada, hopper
  int compute_capability;          ///< major·10 + minor (80 = sm_80)
  int sm_count;                    ///< multiProcessorCount (CUDA reductions size their grid by it)
  int max_threads_per_sm;          ///< maxThreadsPerMultiProcessor
};

/// Looks a GPU up by name, case-insensitively ("V100-16GB", "a100-80gb", "H100"), or by the name
/// torch.cuda.get_device_name() prints ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB").
std::optional<GpuSpec> FindGpu(std::string_view name);
/// The catalog name nearest to |name| (at most 3 edits, case-insensitive), or "" if none is.
std::string NearestGpuName(std::string_view name);
/// All names, comma-separated.
std::string GpuNames();

}  // namespace memsim

#endif  // MEMSIM_SIM_GPUS_H_
