#include "lib/ir/attrs.h"

namespace memsim {

bool Attrs::Has(std::string_view name) const { return Find(name) != nullptr; }

const AttrValue* Attrs::Find(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end() || std::holds_alternative<AttrNull>(it->second)) return nullptr;
  return &it->second;
}

bool Attrs::GetBool(std::string_view name, bool dflt) const {
  const AttrValue* v = Find(name);
  if (!v) return dflt;
  if (auto* b = std::get_if<bool>(v)) return *b;
  if (auto* d = std::get_if<DimExpr>(v); d && d->is_const()) return d->coeff != 0;
  return dflt;
}

double Attrs::GetFloat(std::string_view name, double dflt) const {
  const AttrValue* v = Find(name);
  if (!v) return dflt;
  if (auto* f = std::get_if<double>(v)) return *f;
  if (auto* d = std::get_if<DimExpr>(v); d && d->is_const()) return static_cast<double>(d->coeff);
  return dflt;
}

std::string Attrs::GetString(std::string_view name, const std::string& dflt) const {
  const AttrValue* v = Find(name);
  if (!v) return dflt;
  if (auto* s = std::get_if<std::string>(v)) return *s;
  return dflt;
}

std::optional<int64_t> Attrs::GetInt(std::string_view name, const Bindings& b) const {
  const AttrValue* v = Find(name);
  if (!v) return std::nullopt;
  if (auto* d = std::get_if<DimExpr>(v)) return d->Eval(b);
  if (auto* l = std::get_if<std::vector<DimExpr>>(v); l && l->size() == 1) return (*l)[0].Eval(b);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> Attrs::GetInts(std::string_view name,
                                                   const Bindings& b) const {
  const AttrValue* v = Find(name);
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  auto push = [&](const DimExpr& d) {
    auto e = d.Eval(b);
    if (!e) return false;
    out.push_back(*e);
    return true;
  };
  if (auto* d = std::get_if<DimExpr>(v)) {
    if (!push(*d)) return std::nullopt;
    return out;
  }
  if (auto* l = std::get_if<std::vector<DimExpr>>(v)) {
    for (const DimExpr& d : *l)
      if (!push(d)) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

}  // namespace memsim
