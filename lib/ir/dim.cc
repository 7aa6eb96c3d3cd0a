#include "lib/ir/dim.h"

#include "lib/util/checked.h"

namespace memsim {

std::optional<int64_t> DimExpr::Eval(const Bindings& b) const {
  int64_t v = coeff;
  for (uint32_t s : symbols) {
    if (s >= b.size() || !b[s]) return std::nullopt;
    auto m = CheckedMul(v, *b[s]);
    if (!m) return std::nullopt;
    v = *m;
  }
  return v;
}

std::string DimExpr::ToString(const std::vector<std::string>& names) const {
  std::string out;
  if (coeff != 1 || symbols.empty()) out = std::to_string(coeff);
  for (uint32_t s : symbols) {
    if (!out.empty()) out += "*";
    out += s < names.size() ? names[s] : "?";
  }
  return out;
}

}  // namespace memsim
