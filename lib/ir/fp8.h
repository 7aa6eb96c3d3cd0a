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
  std::string recipe = "tensorwise";  ///< Float8LinearConfig.from_recipe_name: tensorwise | rowwise
  /// Module-path globs of the Linears to convert; empty: every Linear whose in and out features
  /// are multiples of 16 (what torch._scaled_mm needs).
  std::vector<std::string> targets;
  /// Float8LinearConfig(enable_fsdp_float8_all_gather=True) under FSDP2: the weights reach the
  /// GEMMs as float8 (fsdp_utils.py WeightWithDynamicFloat8CastTensor); tensorwise only.
  bool fsdp_float8_all_gather = false;
  std::string ToString() const;
};

/// --fp8 SPEC: `tensorwise|rowwise[,fsdp_float8_all_gather][,targets=GLOB[,GLOB...]]`. Errors
/// name the option.
Result<Fp8Config> ParseFp8Spec(const std::string& spec);

/// |g| with every targeted linear op (a parameter weight) replaced by fp8_linear(x, W) and, with a
/// bias, an add of the bias (cast to the GEMM output's dtype first); with fsdp_float8_all_gather
/// each fp8_linear's "weight" attribute is "float8". Errors: no Linear selected; a target that selects a Linear whose
/// features are not multiples of 16.
Result<Graph> ApplyFp8(const Graph& g, const Fp8Config& config);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_FP8_H_
