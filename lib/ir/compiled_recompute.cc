#include "lib/ir/compiled_recompute.h"

#include <sstream>

namespace memsim {

std::vector<RecomputedBuffer> RecomputedBuffers(const Op& op) {
  std::vector<RecomputedBuffer> out;
  if (op.kind != OpKind::kCompiled) return out;
  std::vector<std::string> labels;
  std::istringstream names(op.attrs.GetString("bwd_names", ""));
  for (std::string w; names >> w;) labels.push_back(w);
  const std::vector<int64_t> bytes = op.attrs.GetInts("bwd_bytes", {}).value_or(std::vector<int64_t>{});
  std::istringstream in(op.attrs.GetString("bwd_recomputed", ""));
  for (std::string w; in >> w;) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    RecomputedBuffer b{w.substr(0, eq), 0, {}};
    for (size_t k = 0; k < labels.size() && k < bytes.size(); ++k)
      if (labels[k] == b.buffer) b.bytes = bytes[k];
    std::istringstream nodes(w.substr(eq + 1));
    for (std::string n; std::getline(nodes, n, ',');)
      if (!n.empty()) b.nodes.push_back(n);
    out.push_back(std::move(b));
  }
  return out;
}

std::optional<std::string> RecomputedNodesOf(const Op& op, std::string_view buffer) {
  for (const RecomputedBuffer& b : RecomputedBuffers(op)) {
    if (b.buffer != buffer) continue;
    std::string out;
    for (const std::string& n : b.nodes) out += (out.empty() ? "" : ", ") + n;
    return out;
  }
  return std::nullopt;
}

}  // namespace memsim
