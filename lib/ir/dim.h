// Symbolic dimensions: a dimension or size attribute is an integer times a product of symbols
// ("batch", "batch*12", "seq"). Symbols are bound per run (--batch, --set), so one parsed graph
// serves every configuration of a sweep.
#ifndef MEMSIM_LIB_IR_DIM_H_
#define MEMSIM_LIB_IR_DIM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memsim {

/// Value of every symbol of a graph, indexed by symbol id; nullopt = unbound.
using Bindings = std::vector<std::optional<int64_t>>;

/// coeff × Π symbols. A plain integer has no symbols; -1 ("infer") is coeff -1.
struct DimExpr {
  int64_t coeff = 1;
  std::vector<uint32_t> symbols;

  static DimExpr Const(int64_t v) { return DimExpr{v, {}}; }
  bool is_const() const { return symbols.empty(); }
  /// Evaluates under |b|; nullopt if a symbol is unbound or the product overflows.
  std::optional<int64_t> Eval(const Bindings& b) const;
  /// "batch*12", "7".
  std::string ToString(const std::vector<std::string>& symbol_names) const;
};

using SymShape = std::vector<DimExpr>;

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_DIM_H_
