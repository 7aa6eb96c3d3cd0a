#include "lib/ir/graph.h"

#include <functional>
#include <map>

namespace memsim {

TensorId Graph::FindTensor(const std::string& n) const {
  for (TensorId i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == n) return i;
  return kNone;
}

void Graph::RelinkProducers() {
  for (Tensor& t : tensors)
    if (t.role == TensorRole::kActivation) t.producer = kNone;
  for (OpId o = 0; o < ops.size(); ++o)
    for (TensorId t : ops[o].outputs) tensors[t].producer = o;
}

uint32_t Graph::FindSymbol(const std::string& n) const {
  for (uint32_t i = 0; i < symbols.size(); ++i)
    if (symbols[i] == n) return i;
  return kNone;
}

std::vector<TensorId> ModuleApplyOrder(const Graph& g) {
  struct Module {
    std::vector<int> children;  // first-appearance order
    std::vector<TensorId> params, buffers;
  };
  std::vector<Module> mods(1);  // [0] = the root module ""
  std::map<std::string, int> index{{"", 0}};
  std::function<int(const std::string&)> get = [&](const std::string& path) -> int {
    auto it = index.find(path);
    if (it != index.end()) return it->second;
    auto dot = path.rfind('.');
    int parent = get(dot == std::string::npos ? "" : path.substr(0, dot));
    int id = static_cast<int>(mods.size());
    mods.push_back({});
    mods[parent].children.push_back(id);
    index[path] = id;
    return id;
  };
  auto module_of = [&](TensorId t) {
    const std::string& n = g.tensors[t].name;
    auto dot = n.rfind('.');
    return dot == std::string::npos ? std::string() : n.substr(0, dot);
  };
  for (TensorId t : g.parameters) mods[get(module_of(t))].params.push_back(t);
  for (TensorId t : g.buffers) mods[get(module_of(t))].buffers.push_back(t);
  std::vector<TensorId> order;
  std::function<void(int)> visit = [&](int m) {
    for (int c : mods[m].children) visit(c);
    order.insert(order.end(), mods[m].params.begin(), mods[m].params.end());
    order.insert(order.end(), mods[m].buffers.begin(), mods[m].buffers.end());
  };
  visit(0);
  return order;
}

}  // namespace memsim
