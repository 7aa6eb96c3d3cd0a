#include "lib/ir/dtype.h"

#include <array>
#include <utility>

namespace memsim {
namespace {

struct DtypeRow {
  Dtype type;
  std::string_view name;
  int64_t size;  // bytes
};
constexpr std::array<DtypeRow, 8> kDtypes = {{
    {Dtype::kFloat32, "float32", 4}, {Dtype::kFloat16, "float16", 2},
    {Dtype::kBFloat16, "bfloat16", 2}, {Dtype::kFloat64, "float64", 8},
    {Dtype::kInt64, "int64", 8}, {Dtype::kInt32, "int32", 4},
    {Dtype::kUInt8, "uint8", 1}, {Dtype::kBool, "bool", 1},
}};
constexpr std::array<std::pair<std::string_view, Dtype>, 6> kAliases = {{
    {"float", Dtype::kFloat32}, {"half", Dtype::kFloat16}, {"double", Dtype::kFloat64},
    {"long", Dtype::kInt64}, {"int", Dtype::kInt32}, {"byte", Dtype::kUInt8},
}};

}  // namespace

int64_t ElementSize(Dtype t) { return kDtypes[static_cast<int>(t)].size; }
std::string_view DtypeName(Dtype t) { return kDtypes[static_cast<int>(t)].name; }
bool IsFloating(Dtype t) { return static_cast<int>(t) <= static_cast<int>(Dtype::kFloat64); }

std::optional<Dtype> ParseDtype(std::string_view s) {
  if (s.starts_with("torch.")) s.remove_prefix(6);
  for (const DtypeRow& r : kDtypes)
    if (r.name == s) return r.type;
  for (const auto& [alias, t] : kAliases)
    if (alias == s) return t;
  return std::nullopt;
}

}  // namespace memsim
