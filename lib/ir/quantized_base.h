// Quantized frozen base weights as a graph rewrite (Note [Quantized base weights] in
// docs/op-rules.md): bitsandbytes' Linear4bit (NF4/FP4, QLoRA) and Linear8bitLt (LLM.int8) in
// place of the targeted Linears. A quantized base is a property of the frozen Linear weights,
// independent of adapters: `--quantize-base` composes with `--lora` (QLoRA = NF4 base + LoRA).
#ifndef MEMSIM_LIB_IR_QUANTIZED_BASE_H_
#define MEMSIM_LIB_IR_QUANTIZED_BASE_H_

#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/quantized_base_config.h"
#include "lib/util/status.h"

namespace memsim {

/// --quantize-base SPEC: the format first (nf4, fp4 or int8, or type=...), then comma-separated
/// key=value: double_quant (on|off), compute (fp32|bf16|fp16), blocksize, targets, skip; a word
/// without '=' continues the previous key's list. Errors name the option and the key.
Result<QuantizedBaseConfig> ParseQuantizedBaseSpec(const std::string& spec);

/// One tensor a quantized weight is stored as: the weight itself, then its quant state (the
/// names after "M.weight." are those of bitsandbytes' state dict, QuantState.as_dict).
struct QuantTensor {
  std::string suffix;  ///< "" for the weight, else "absmax", "quant_map", ...
  Dtype dtype;
  std::vector<int64_t> shape;
  int64_t bytes() const;
};

/// What bitsandbytes 0.50 keeps for a Linear weight [out, in] under |c| (Params4bit._quantize,
/// functional.quantize_4bit; Int8Params._quantize):
/// - 4-bit: the weight as uint8 [(out*in+1)/2, 1]; absmax float32 [ceil(n/blocksize)] and the
///   16-entry float32 code (quant_map); with double quantization absmax is uint8, plus the nested
///   float32 absmax [ceil(blocks/256)], its 256-entry code and a float32 offset (0-dim);
/// - int8: the weight as int8 [out, in] and the float32 row scales SCB [out].
std::vector<QuantTensor> QuantizedWeight(const QuantizedBaseConfig& c, int64_t out, int64_t in);

/// Which Linear modules |c| quantizes: a module a target selects (every Linear without targets)
/// unless skip selects it.
bool QuantizesModule(const QuantizedBaseConfig& c, const std::string& module);

/// |g| with the targeted Linear ops (weight a parameter) running as bitsandbytes' quantized
/// linear (`linear_4bit` / `linear_8bit`, lib/ops/rules_quantized.cc): each weight parameter
/// becomes the quantized tensor (frozen), its quant state buffers `M.weight.SUFFIX`; the op's
/// attributes carry out_features, in_features and the format. A LoRA graph (ApplyLora first, as
/// peft wraps the bnb layers) quantizes the base layers, never the adapters.
/// Errors: a target that matches no Linear module, a graph quantized already.
Result<Graph> ApplyQuantizedBase(const Graph& g, const QuantizedBaseConfig& config);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_QUANTIZED_BASE_H_
