// Expert parallelism as a graph rewrite (lib/ir/expert_parallel.h, Note [Expert parallel]): the
// experts' [E, ...] weights sharded on dim 0, the dispatch and combine around the local experts'
// split, the other ranks' experts dropped, the received-row symbols, and the refusals.
#include "lib/ir/expert_parallel.h"

#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

Graph Moe(const std::string& name) {
  Result<Graph> g = LoadGraph(test_data::TestDataPath("traces_moe_2_13/graphs/" + name + ".json"));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *g;
}

int Count(const Graph& g, OpKind k) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == k;
  return n;
}

TEST(ExpertParallel, ShardsTheExpertsWeightsOnDimZero) {
  const Graph g = Moe("moe_mlp2");  // 8 experts, two MoE layers
  Result<Graph> ep = ApplyExpertParallel(g, 4);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_EQ(ep->ep_degree, 4);
  ASSERT_EQ(ep->ep_shards.size(), 6u);  // w1, w3, w2 of each layer, in the order the experts use them
  for (TensorId p : ep->ep_shards) {
    EXPECT_NE(ep->tensors[p].name.find(".experts.w"), std::string::npos);
    EXPECT_EQ(ep->tensors[p].shape[0].coeff, 2) << ep->tensors[p].name;  // 8 experts / 4 ranks
    EXPECT_EQ(ep->tensors[p].shape[1].coeff, g.tensors[p].shape[1].coeff);
  }
  EXPECT_EQ(ep->tensors[ep->FindTensor("moe.0.gate.weight")].shape[0].coeff, 8);  // the router stays whole
}

TEST(ExpertParallel, DispatchesToTheLocalExpertsAndCombinesBack) {
  const Graph g = Moe("moe_mlp2");
  Result<Graph> ep = ApplyExpertParallel(g, 4);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_EQ(Count(*ep, OpKind::kEpDispatch), 2);
  EXPECT_EQ(Count(*ep, OpKind::kEpCombine), 2);
  // each layer's loop keeps 2 of its 8 experts: three matmuls each
  EXPECT_EQ(Count(*ep, OpKind::kMatmul), Count(g, OpKind::kMatmul) / 4);
  for (const Op& op : ep->ops) {
    if (op.kind == OpKind::kSplit && op.attrs.Has("routing")) {
      EXPECT_EQ(op.outputs.size(), 2u);
      EXPECT_EQ(ep->ops[ep->tensors[op.inputs[0]].producer].kind, OpKind::kEpDispatch);
    }
    if (op.kind == OpKind::kSelect) EXPECT_LT(*op.attrs.GetInt("index", ep->symbol_defaults), 2);
  }
  // the symbols the run binds per rank
  for (const std::string& s : {EpReceivedSymbol(1), EpExpertSymbol(1, 1), EpRowsSymbol(1, 3, 1)})
    EXPECT_NE(ep->FindSymbol(s), kNone) << s;
  EXPECT_EQ(ep->FindSymbol(EpExpertSymbol(0, 2)), kNone);
}

TEST(ExpertParallel, RefusesWithOneLineNamingTheFix) {
  Result<Graph> uneven = ApplyExpertParallel(Moe("moe_mlp"), 3);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("4 experts, not divisible by 3"), std::string::npos) << uneven.status().message();
  Graph dense = Moe("moe_mlp");
  dense.routing.clear();
  Result<Graph> none = ApplyExpertParallel(dense, 2);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no mixture-of-experts routing"), std::string::npos);
}

}  // namespace
}  // namespace memsim
