// LoRA adapters as a graph rewrite (Note [LoRA] in docs/op-rules.md): PEFT's LoraLayer forward,
// written out as ops, on every Linear a configuration targets; the base model frozen. One
// source of truth for the adapter's op sequence: `memsim run --lora SPEC` and graph files whose
// "lora" key the exporter wrote from a real peft model both go through ApplyLora.
#ifndef MEMSIM_LIB_IR_LORA_H_
#define MEMSIM_LIB_IR_LORA_H_

#include <string>

#include "lib/ir/graph.h"
#include "lib/ir/lora_config.h"
#include "lib/util/status.h"

namespace memsim {

/// --lora SPEC: comma-separated key=value, keys r, alpha, targets, dropout, dora (on|off),
/// rslora (on|off); a word without '=' continues the previous key's list, so
/// `r=16,alpha=32,targets=*.q_proj,*.v_proj,dropout=0.05` has two targets. Quotes are dropped.
/// Errors name the option and the key.
Result<LoraConfig> ParseLoraSpec(const std::string& spec);

/// Whether target |target| (LoraConfig::targets) selects module path |module|.
bool LoraTargetMatches(const std::string& target, const std::string& module);

/// |g| with LoRA adapters (PEFT 0.21 LoraLayer semantics) on every linear op whose module a
/// target selects:
/// - parameters: the base ones renamed `M.base_layer.weight` / `.bias` and frozen (every
///   parameter of the model is), `M.lora_A.default.weight` [r, in] and `M.lora_B.default.weight`
///   [out, r] in the base weight's dtype after the module's own, trainable;
/// - ops: the base linear (module `M.base_layer`), dropout(x) when dropout > 0, lora_A, lora_B,
///   `* scaling`, and the add that produces the linear's original output;
/// - with dora: `M.lora_magnitude_vector.default.weight` [out] (trainable) and DoRA's forward
///   instead of the plain adapter sum (Note [LoRA]).
/// Errors: a target that matches no Linear module, r < 1, dropout outside [0, 1), a graph that
/// has adapters already.
Result<Graph> ApplyLora(const Graph& g, const LoraConfig& config);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_LORA_H_
