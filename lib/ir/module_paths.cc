#include "lib/ir/module_paths.h"

namespace memsim {

std::set<std::string> ModulePaths(const Graph& g) {
  std::set<std::string> paths;
  for (const Op& op : g.ops) {
    const std::string& m = op.module;
    for (size_t end = m.find('.');; end = m.find('.', end + 1)) {
      paths.insert(m.substr(0, end));
      if (end == std::string::npos) break;
    }
  }
  return paths;
}

}  // namespace memsim
