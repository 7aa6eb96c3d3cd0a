#include "lib/ir/compiled_budget.h"

#include <cstdlib>
#include <sstream>

namespace memsim {
namespace {

/// The attributes one partitioner program consists of (tools/memsim_export/compiled.py).
constexpr const char* kProgramKeys[] = {"fwd_bytes", "fwd_names", "fwd_program", "fwd_outputs", "saved",
                                        "bwd_bytes", "bwd_names", "bwd_program", "bwd_grads",
                                        "bwd_recomputed"};

std::optional<double> ParseBudget(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v >= 0 && v <= 1)) return std::nullopt;
  return v;
}

std::string Joined(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

std::vector<std::string> RecordedMemoryBudgets(const Op& op) {
  std::vector<std::string> out;
  std::istringstream in(op.attrs.GetString("memory_budgets", ""));
  for (std::string w; in >> w;) out.push_back(w);
  if (out.empty()) {  // an export of one budget
    std::ostringstream s;
    s << op.attrs.GetFloat("memory_budget", 1.0);
    out.push_back(s.str());
  }
  return out;
}

Result<Graph> SelectMemoryBudget(Graph g, const std::string& budget) {
  const std::optional<double> want = ParseBudget(budget);
  if (!want) return Status::InvalidArgument("--memory-budget " + budget + ": expected a number from 0 to 1");
  bool any = false;
  for (Op& op : g.ops) {
    if (op.kind != OpKind::kCompiled) continue;
    any = true;
    const std::vector<std::string> recorded = RecordedMemoryBudgets(op);
    size_t k = 0;
    while (k < recorded.size() && ParseBudget(recorded[k]) != want) ++k;
    if (k == recorded.size())
      return Status::InvalidArgument("--memory-budget " + budget + ": " + g.source + " (" + op.name +
                                     ") records the partitioner's program" + (recorded.size() > 1 ? "s for budgets " : " for budget ") +
                                     Joined(recorded, ", ") +
                                     " only: re-export with `export_torch.py MODEL --compile --memory-budget " +
                                     Joined(recorded, ",") + "," + budget + "`");
    const std::string current = "mb" + recorded[0] + ":";
    for (const char* key : kProgramKeys) {  // the first budget's program stays recorded under its key
      const AttrValue* v = op.attrs.Find(key);
      if (k > 0 && v && !op.attrs.Has(current + key)) op.attrs.Set(current + key, AttrValue(*v));
      if (const AttrValue* alt = op.attrs.Find("mb" + recorded[k] + ":" + key)) op.attrs.Set(key, AttrValue(*alt));
    }
    op.attrs.Set("memory_budget", *want);
  }
  if (!any)
    return Status::InvalidArgument("--memory-budget applies to a graph exported with --compile (" + g.source +
                                   " has no compiled region)");
  return g;
}

}  // namespace memsim
