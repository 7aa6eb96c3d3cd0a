// torchao float8 training as a graph rewrite (Note [FP8 training] in docs/op-rules.md):
// convert_to_float8_training swaps the targeted nn.Linear modules for Float8Linear, whose
// forward is one autograd.Function (the fp8_linear op) and, with a bias, `output + bias`.
#ifndef MEMSIM_LIB_IR_FP8_H_
#define MEMSIM_LIB_IR_FP8_H_

#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

struct Fp8Config {
  /// Float8LinearConfig.from_recipe_name: tensorwise | rowwise; or te: Transformer Engine 1.x's
  /// te.Linear under fp8_autocast(DelayedScaling) (Note [Transformer Engine], from its source).
  std::string recipe = "tensorwise";
  int64_t amax_history = 1024;  ///< te: DelayedScaling(amax_history_len)
  /// Module-path globs of the Linears to convert; empty: every Linear whose in and out features
  /// are multiples of 16 (what torch._scaled_mm needs).
  std::vector<std::string> targets;
  /// Float8LinearConfig(enable_fsdp_float8_all_gather=True) under FSDP2: the weights reach the
  /// GEMMs as float8 (fsdp_utils.py WeightWithDynamicFloat8CastTensor); tensorwise only.
  bool fsdp_float8_all_gather = false;
  std::string ToString() const;
};

/// Whether a graph's fp8 spec (Graph::fp8, Fp8Config::ToString) is Transformer Engine's.
inline bool IsTransformerEngine(const std::string& spec) { return spec == "te" || spec.rfind("te,", 0) == 0; }

/// --fp8 SPEC: `tensorwise|rowwise[,fsdp_float8_all_gather][,targets=GLOB[,GLOB...]]` or
/// `te[,amax_history=N][,targets=...]`. Errors name the option.
Result<Fp8Config> ParseFp8Spec(const std::string& spec);

/// |g| with every targeted linear op (a parameter weight) replaced by fp8_linear(x, W) and, with a
/// bias, an add of the bias (cast to the GEMM output's dtype first); with fsdp_float8_all_gather
/// each fp8_linear's "weight" attribute is "float8"; with te, each converted module's persistent
/// state becomes buffers (its float8 weight and transpose, the amax histories and scales) and one
/// TE cuBLAS workspace. Errors: no Linear selected; a target that selects a Linear whose
/// features are not multiples of 16.
Result<Graph> ApplyFp8(const Graph& g, const Fp8Config& config);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_FP8_H_
