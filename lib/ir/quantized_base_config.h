// A quantized frozen base (bitsandbytes' Linear4bit / Linear8bitLt, what transformers'
// BitsAndBytesConfig gives): which Linear modules hold quantized weights, in which format, and the
// dtype their matmuls compute in. ApplyQuantizedBase (lib/ir/quantized_base.h) rewrites a graph
// with it; the graph keeps it (Graph::quantized_base) for reports.
#ifndef MEMSIM_LIB_IR_QUANTIZED_BASE_CONFIG_H_
#define MEMSIM_LIB_IR_QUANTIZED_BASE_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/dtype.h"

namespace memsim {

enum class QuantFormat : uint8_t { kNf4, kFp4, kInt8 };

struct QuantizedBaseConfig {
  QuantFormat format = QuantFormat::kNf4;
  /// bnb_4bit_use_double_quant (Linear4bit's compress_statistics): the per-block absmax stored as
  /// uint8, with a nested fp32 absmax per 256 blocks and an offset. transformers' default: off.
  bool double_quant = false;
  int64_t blocksize = 64;  ///< Params4bit's blocksize (64 on every device since bitsandbytes 0.43)
  /// bnb_4bit_compute_dtype: the dtype the input is cast to and the weight dequantized to;
  /// nullopt: the input's own dtype (Linear4bit.set_compute_type). 4-bit only.
  std::optional<Dtype> compute;
  /// Which Linear modules are quantized: LoraConfig's matching rule (a name matches a path equal
  /// to it or ending in "." + it; * ? [ make a glob of the path). Empty: every Linear but |skip|.
  std::vector<std::string> targets;
  /// llm_int8_skip_modules: Linear modules left in full precision (matched like targets);
  /// transformers keeps the output head (get_keys_to_not_convert), so the default is lm_head.
  std::vector<std::string> skip = {"lm_head"};
  bool four_bit() const { return format != QuantFormat::kInt8; }
  /// The canonical spec (ParseQuantizedBaseSpec reads it back): nf4,double_quant=on,compute=bf16.
  std::string ToString() const;
};

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_QUANTIZED_BASE_CONFIG_H_
