// Device profiles: the named, version-specific rules that make memsim follow PyTorch on a given
// device and release. `cuda` follows current PyTorch 2.x on CUDA; `cpu` follows PyTorch 1.13 on
// CPU (the oracle traces). Every difference between them is a field here, never a special case
// buried in an op rule.
#ifndef MEMSIM_LIB_OPS_PROFILE_H_
#define MEMSIM_LIB_OPS_PROFILE_H_

#include <optional>
#include <string>
#include <string_view>

namespace memsim {

struct Profile {
  std::string name;
  bool cuda = true;
  /// Dropout in training keeps an input-dtype noise tensor (CPU `_dropout`: bernoulli / (1-p),
  /// then mul) instead of a 1-byte bool mask (CUDA `native_dropout`).
  bool dropout_keeps_noise = false;
  /// 1.13: the backward of mean (and of adaptive_avg_pool2d to 1×1, which is a mean) keeps its
  /// input alive; 2.x saves only sizes.
  bool mean_keeps_input = false;
  /// 2.x: linear on a ≥3-D contiguous input with bias is flattened to addmm; 1.13 uses matmul
  /// (mm on the folded input) and an in-place bias add. Same saved tensors either way.
  bool linear_nd_addmm = true;
  /// Optimizers use the multi-tensor (`foreach`) implementation: parameter-sized temporary lists.
  bool optimizer_foreach = true;
  /// CPU (1.13): optimizer.step() and zero_grad() run inside record_function, which allocates a
  /// 4-byte zeros tensor and a 288-byte profiler handle, both freed at once.
  bool record_function_scratch = false;
  /// Max-pool indices are int64 on both devices; kept as a rule for future backends.
  int64_t maxpool_index_bytes = 8;
};

/// The built-in profiles: "cuda" (default) and "cpu".
std::optional<Profile> FindProfile(std::string_view name);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_PROFILE_H_
