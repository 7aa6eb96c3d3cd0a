#include "lib/ir/graph.h"

namespace memsim {

TensorId Graph::FindTensor(const std::string& n) const {
  for (TensorId i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == n) return i;
  return kNone;
}

uint32_t Graph::FindSymbol(const std::string& n) const {
  for (uint32_t i = 0; i < symbols.size(); ++i)
    if (symbols[i] == n) return i;
  return kNone;
}

}  // namespace memsim
