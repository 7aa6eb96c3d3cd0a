// torch.autocast's op lists as data: per device profile, which ops run in the lower-precision
// type, which in fp32, which promote their inputs to the widest type, and which run unchanged;
// and the casts an op's inputs get inside an autocast region (Note [Autocast] in docs/op-rules.md).
// The `cuda` profile follows the CUDA lists of PyTorch 2.x (aten/src/ATen/autocast_mode.h:
// AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_PROMOTE);
// the `cpu` profile the AutocastCPU registrations of PyTorch 1.13 (autocast_mode.cpp), which
// differ (no fp32 layer_norm or softmax; cat and stack promote). Pure functions.
#ifndef MEMSIM_LIB_OPS_AUTOCAST_LISTS_H_
#define MEMSIM_LIB_OPS_AUTOCAST_LISTS_H_

#include <vector>

#include "lib/ir/dtype.h"
#include "lib/ir/op_kind.h"
#include "lib/ops/tensor_meta.h"

namespace memsim {

enum class AutocastTable : uint8_t {
  kCuda2x,   ///< CUDA lists of PyTorch 2.x
  kCpu113,   ///< CPU lists of PyTorch 1.13
};

enum class CastPolicy : uint8_t {
  kNone,            ///< runs in whatever dtype it receives
  kLowerPrecision,  ///< floating inputs cast to the autocast dtype (fp16/bf16)
  kFp32,            ///< floating inputs cast to fp32
  kFp32SetOptDtype, ///< lower-precision input: the op itself is called with dtype=fp32 (no copy)
  kPromote,         ///< floating inputs cast to the widest floating input type
  /// cross_entropy on CUDA 2.x: no cast of its own (CompositeImplicit); log_softmax runs in the
  /// input dtype (cross_entropy_loss passes it as dtype, so fp32_set_opt_dtype leaves it), then
  /// nll_loss's fp32 policy casts the log-probabilities to fp32 (the rule sizes both).
  kInnerNllFp32,
};

/// The policy of |kind| in |table|.
CastPolicy AutocastPolicy(AutocastTable table, OpKind kind);

/// One input cast inside an autocast region.
struct InputCast {
  int input = 0;        ///< index in the op's inputs
  TensorMeta meta;      ///< what the op sees (the cast copy's meta)
  bool copy = true;     ///< false: only the op's compute dtype changes (kFp32SetOptDtype)
};

/// The casts autocast makes for an op of |kind| with inputs |in| in a region of |lower|
/// (kFloat16 or kBFloat16), in the order PyTorch makes them: cached_cast is applied to the
/// arguments as a C++ call evaluates them, last argument first (GCC builds).
std::vector<InputCast> AutocastCasts(AutocastTable table, OpKind kind, Dtype lower,
                                     const std::vector<const TensorMeta*>& in);

/// The result dtype of a binary op on two floating dtypes (torch.result_type): the wider one;
/// fp16 with bf16 gives fp32.
Dtype PromoteFloating(Dtype a, Dtype b);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_AUTOCAST_LISTS_H_
