#include "lib/ir/topo.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>

namespace memsim {

Result<std::vector<OpId>> TopologicalOrder(const Graph& g) {
  const size_t n = g.ops.size();
  bool listed_order_ok = true;
  std::vector<bool> defined(g.tensors.size(), false);
  for (TensorId t = 0; t < g.tensors.size(); ++t)
    defined[t] = g.tensors[t].role != TensorRole::kActivation;
  for (const Op& op : g.ops) {
    for (TensorId in : op.inputs)
      if (!defined[in]) listed_order_ok = false;
    for (TensorId out : op.outputs) defined[out] = true;
  }
  using BGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  BGraph bg(n);
  for (OpId o = 0; o < n; ++o)
    for (TensorId in : g.ops[o].inputs)
      if (OpId p = g.tensors[in].producer; p != kNone) boost::add_edge(p, o, bg);
  std::vector<size_t> rev;
  try {
    boost::topological_sort(bg, std::back_inserter(rev));
  } catch (const boost::not_a_dag&) {
    // Find an op on a cycle for the message: one whose producer chain returns to itself.
    for (OpId o = 0; o < n; ++o)
      for (TensorId in : g.ops[o].inputs)
        if (g.tensors[in].producer != kNone && g.tensors[in].producer >= o)
          return Status::InvalidArgument(g.source + ": " + g.ops[o].pointer + ": op \"" + g.ops[o].name +
                                         "\" is on a cycle (its input \"" + g.tensors[in].name +
                                         "\" depends on its own output)");
    return Status::InvalidArgument(g.source + ": /ops: the ops form a cycle");
  }
  std::vector<OpId> order(n);
  if (listed_order_ok) {
    for (OpId o = 0; o < n; ++o) order[o] = o;
  } else {
    std::transform(rev.rbegin(), rev.rend(), order.begin(), [](size_t v) { return OpId(v); });
  }
  return order;
}

}  // namespace memsim
