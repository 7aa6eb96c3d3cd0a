// Op attributes: a small name → value map read by the op rules. Integers are DimExprs so that
// size attributes may hold symbols; lists are lists of DimExprs.
#ifndef MEMSIM_LIB_IR_ATTRS_H_
#define MEMSIM_LIB_IR_ATTRS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "lib/ir/dim.h"

namespace memsim {

struct AttrNull {};
using AttrValue = std::variant<AttrNull, bool, double, std::string, DimExpr, std::vector<DimExpr>>;

class Attrs {
 public:
  void Set(std::string name, AttrValue v) { values_[std::move(name)] = std::move(v); }
  bool Has(std::string_view name) const;
  const AttrValue* Find(std::string_view name) const;

  bool GetBool(std::string_view name, bool dflt) const;
  double GetFloat(std::string_view name, double dflt) const;
  std::string GetString(std::string_view name, const std::string& dflt) const;
  /// An integer attribute evaluated under |b|; nullopt when absent, null or not an integer.
  std::optional<int64_t> GetInt(std::string_view name, const Bindings& b) const;
  /// A list attribute (a single integer is a list of one); nullopt when absent or null.
  std::optional<std::vector<int64_t>> GetInts(std::string_view name, const Bindings& b) const;

  const std::map<std::string, AttrValue, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, AttrValue, std::less<>> values_;  // transparent: looked up by string_view
};

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_ATTRS_H_
