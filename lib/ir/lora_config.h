// A LoRA configuration (PEFT's LoraConfig, the fields memory depends on): which Linear modules
// get adapters, their rank, scaling and dropout. ApplyLora (lib/ir/lora.h) rewrites a graph
// with it; the graph keeps the configuration it was rewritten with (Graph::lora) for reports.
#ifndef MEMSIM_LIB_IR_LORA_CONFIG_H_
#define MEMSIM_LIB_IR_LORA_CONFIG_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace memsim {

struct LoraConfig {
  int64_t r = 8;                     ///< rank (LoraConfig.r)
  double alpha = 8;                  ///< lora_alpha
  /// target_modules: a name without wildcards matches a module path equal to it or ending in
  /// "." + it (PEFT's rule for a list of names); one with * ? [ is an fnmatch glob of the path.
  std::vector<std::string> targets;
  double dropout = 0;                ///< lora_dropout (0: nn.Identity, no op)
  bool dora = false;                 ///< use_dora
  bool rslora = false;               ///< use_rslora: scaling alpha / sqrt(r)
  /// get_peft_model(..., autocast_adapter_dtype=True), peft's default: on a bf16/fp16 base the
  /// adapters are float32, the input cast to it and the sum cast back (Note [LoRA]).
  bool autocast_adapter_dtype = true;
  double scaling() const { return rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r); }
  /// The canonical spec (ParseLoraSpec reads it back): r=8,alpha=16,targets=a,b,dropout=0.05
  /// (autocast_adapter_dtype=off only when off).
  std::string ToString() const;
};

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_LORA_CONFIG_H_
