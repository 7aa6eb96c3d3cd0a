#include "lib/ir/module_paths.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>

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

std::vector<std::string> RepeatedBlocks(const Graph& g) {
  // Module paths ending in an index ("layer1.0", "transformer.h.11"), whose parent has several.
  std::map<std::string, std::map<int64_t, std::string>> children;
  for (const std::string& p : ModulePaths(g)) {
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string last = p.substr(dot + 1);
    if (!last.empty() && last.size() < 18 && std::all_of(last.begin(), last.end(), ::isdigit))
      children[p.substr(0, dot)].emplace(std::stoll(last), p);
  }
  std::vector<std::string> blocks;
  for (const auto& entry : children) {
    const std::string& parent = entry.first;  // not a structured binding: clang 14 cannot capture one
    const std::map<int64_t, std::string>& kids = entry.second;
    if (kids.size() < 2) continue;
    bool nested = std::any_of(blocks.begin(), blocks.end(), [&](const std::string& b) {
      return parent.size() > b.size() && parent.compare(0, b.size() + 1, b + ".") == 0;
    });
    if (nested) continue;
    for (const auto& kid : kids) blocks.push_back(kid.second);
  }
  return blocks;
}

std::optional<std::vector<std::string>> SelectBlocks(const Graph& g, const std::string& selector) {
  int64_t every = 1, rest = 0;
  if (selector.rfind("@blocks%", 0) == 0) {
    const size_t eq = selector.find('=');
    auto number = [](const std::string& t) -> int64_t {
      if (t.empty() || t.size() > 6 || !std::all_of(t.begin(), t.end(), ::isdigit)) return -1;
      return std::stoll(t);
    };
    if (eq == std::string::npos) return std::nullopt;
    every = number(selector.substr(8, eq - 8));
    rest = number(selector.substr(eq + 1));
    if (every < 1 || rest < 0 || rest >= every) return std::nullopt;
  } else if (selector != "@blocks") {
    return std::nullopt;
  }
  std::vector<std::string> blocks = RepeatedBlocks(g), picked;
  for (size_t i = 0; i < blocks.size(); ++i)
    if (static_cast<int64_t>(i) % every == rest) picked.push_back(blocks[i]);
  return picked;
}

}  // namespace memsim
