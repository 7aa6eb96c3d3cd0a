#include "lib/ir/op_kind.h"

#include <array>

namespace memsim {
namespace {

constexpr std::string_view kNames[] = {
#define MEMSIM_OP_NAME_(e, n) n,
    MEMSIM_OP_KINDS(MEMSIM_OP_NAME_)
#undef MEMSIM_OP_NAME_
};

}  // namespace

std::string_view OpKindName(OpKind k) { return kNames[static_cast<int>(k)]; }

std::optional<OpKind> ParseOpKind(std::string_view name) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (kNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

}  // namespace memsim
