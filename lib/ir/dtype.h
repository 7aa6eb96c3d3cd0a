// Element types of tensors, their sizes in bytes and their names in graph files.
#ifndef MEMSIM_LIB_IR_DTYPE_H_
#define MEMSIM_LIB_IR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace memsim {

enum class Dtype : uint8_t { kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kUInt8, kBool };

/// Bytes per element.
int64_t ElementSize(Dtype t);
/// "float32", "int64", ... as written in graph files.
std::string_view DtypeName(Dtype t);
/// Parses a graph-file name (also accepts PyTorch's "float", "half", "long", "int").
std::optional<Dtype> ParseDtype(std::string_view s);
bool IsFloating(Dtype t);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_DTYPE_H_
