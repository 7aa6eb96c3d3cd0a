// Op rules of lib/ops/rules_moe.cc (bincount, sort, floor_divide, histc, grouped_mm), scatter_add,
// and the routed split whose sections are per-expert count symbols (Note [Routed token counts]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SizesOf;
using testing::AllocBytes;

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::Opts;
using testing::SavedNames;



// A one-layer MoE on x [8, 4], top-2 of 2 experts: router, topk, bincount, argsort, floor
// division, gather, the routed split by routed0_e0/e1, one Linear-free "expert" per slice (a mul
// by a per-expert parameter), cat, scatter_add into zeros. |symbols| are the graph's defaults.
std::string Moe(const std::string& symbols) {
  return R"("symbols": )" + symbols + R"(,
      "routing": [{"tokens": 16, "experts": 2}],
      "inputs": [{"name": "x", "shape": [8, 4]}],
      "parameters": [{"name": "gate", "shape": [2, 4]}, {"name": "w", "shape": [2, 4]}],
      "ops": [{"op": "linear", "inputs": ["x", "gate"], "outputs": ["logits"]},
              {"op": "softmax", "inputs": ["logits"], "outputs": ["probs"], "attrs": {"dim": 1}},
              {"op": "topk", "inputs": ["probs"], "outputs": ["top", "sel"], "attrs": {"k": 2, "dim": 1}},
              {"op": "view", "inputs": ["sel"], "outputs": ["flat"], "attrs": {"shape": [-1]}},
              {"op": "bincount", "inputs": ["flat"], "outputs": ["counts"], "attrs": {"minlength": 2}},
              {"op": "sort", "inputs": ["flat"], "outputs": ["sv", "order"], "attrs": {"stable": true}},
              {"op": "floor_divide", "inputs": ["order"], "outputs": ["tok"], "attrs": {"scalar": 2}},
              {"op": "view", "inputs": ["tok"], "outputs": ["tok2"], "attrs": {"shape": [-1, 1]}},
              {"op": "expand", "inputs": ["tok2"], "outputs": ["idx"], "attrs": {"sizes": [-1, 4]}},
              {"op": "gather", "inputs": ["x", "idx"], "outputs": ["routed"], "attrs": {"dim": 0}},
              {"op": "split", "inputs": ["routed"], "outputs": ["r0", "r1"],
               "attrs": {"sections": ["routed0_e0", "routed0_e1"], "dim": 0, "routing": 0}},
              {"op": "select", "inputs": ["w"], "outputs": ["w0"], "attrs": {"dim": 0, "index": 0}},
              {"op": "mul", "inputs": ["r0", "w0"], "outputs": ["o0"]},
              {"op": "select", "inputs": ["w"], "outputs": ["w1"], "attrs": {"dim": 0, "index": 1}},
              {"op": "mul", "inputs": ["r1", "w1"], "outputs": ["o1"]},
              {"op": "cat", "inputs": ["o0", "o1"], "outputs": ["out"], "attrs": {"dim": 0}},
              {"op": "full", "inputs": [], "outputs": ["zeros"], "attrs": {"shape": [8, 4]}},
              {"op": "scatter", "inputs": ["zeros", "idx", "out"], "outputs": ["y"],
               "attrs": {"dim": 0, "reduce": "add"}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

const char* kBalanced = R"({"routed0_e0": 8, "routed0_e1": 8})";

TEST(MoeRuleTest, RoutingOpsHaveTheirShapesAndDtypes) {
  auto run = testing::Simulate(Moe(kBalanced), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "counts"), ElementsAre(2));
  EXPECT_EQ(run.r.bound.metas[run.graph.FindTensor("counts")].dtype, Dtype::kInt64);
  EXPECT_THAT(SizesOf(run, "order"), ElementsAre(16));
  EXPECT_EQ(run.r.bound.metas[run.graph.FindTensor("order")].dtype, Dtype::kInt64);
  EXPECT_EQ(run.r.bound.metas[run.graph.FindTensor("tok")].dtype, Dtype::kInt64);
  EXPECT_THAT(SizesOf(run, "r0"), ElementsAre(8, 4));
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(8, 4));
}

TEST(MoeRuleTest, BincountAndSortAllocateTheirCpuTemporaries) {
  auto run = testing::Simulate(Moe(kBalanced), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  for (const char* label : {"bincount min", "bincount max"}) {
    auto b = testing::BuffersContaining(run.r.events, label);
    ASSERT_EQ(b.size(), 1u) << label;
    EXPECT_EQ(run.r.events.buffers[b[0]].bytes, 8) << label;
  }
  auto arange = testing::BuffersContaining(run.r.events, "_fill_indices");
  ASSERT_EQ(arange.size(), 1u);
  EXPECT_EQ(run.r.events.buffers[arange[0]].bytes, 8 * 16);  // int64 arange of the sorted dim
}

TEST(MoeRuleTest, ScatterAddKeepsTheIndexAndRoutingOpsSaveNothing) {
  auto run = testing::Simulate(Moe(kBalanced), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("idx"));
  EXPECT_THAT(SavedNames(run, "counts"), IsEmpty());
  EXPECT_THAT(SavedNames(run, "tok"), IsEmpty());
  EXPECT_THAT(SavedNames(run, "sv"), IsEmpty());  // sort: its input (router indices) needs no grad
}

TEST(MoeRuleTest, CountsThatDoNotAddUpAreRefused) {
  SimOptions opt = Opts("cpu");
  opt.symbols = {{"routed0_e0", 8}, {"routed0_e1", 9}};
  auto run = testing::Simulate(Moe(kBalanced), opt);
  EXPECT_FALSE(run.ok);
  EXPECT_THAT(run.error, ::testing::HasSubstr("routed0_e* add up to 17 but routing 0 routes 16 rows"));
}

TEST(MoeRuleTest, ImbalanceMovesTheExpertActivations) {
  auto balanced = testing::Simulate(Moe(kBalanced), Opts("cpu"));
  SimOptions skew_opt = Opts("cpu");
  skew_opt.symbols = {{"routed0_e0", 14}, {"routed0_e1", 2}};
  auto skewed = testing::Simulate(Moe(kBalanced), skew_opt);
  ASSERT_TRUE(balanced.ok && skewed.ok) << balanced.error << skewed.error;
  EXPECT_THAT(SizesOf(skewed, "o0"), ElementsAre(14, 4));
  EXPECT_THAT(SizesOf(skewed, "o1"), ElementsAre(2, 4));
}

TEST(MoeRuleTest, MoeRoutingBindsCountsSetLeavesUnset) {
  SimOptions hot = Opts("cpu");
  hot.moe_routing = "hot=1.5";  // expert 0: 1.5 × the mean of 8 = 12, expert 1 the other 4
  auto run = testing::Simulate(Moe(kBalanced), hot);
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "o0"), ElementsAre(12, 4));
  EXPECT_THAT(SizesOf(run, "o1"), ElementsAre(4, 4));
  SimOptions bad = Opts("cpu");
  bad.moe_routing = "zipf";
  auto refused = testing::Simulate(Moe(kBalanced), bad);
  EXPECT_FALSE(refused.ok);
  EXPECT_THAT(refused.error, ::testing::HasSubstr("--moe-routing"));
}

TEST(MoeRuleTest, RoutingKeyNeedsEachExpertsSymbol) {
  std::string g = Moe(kBalanced);
  g.replace(g.find("\"experts\": 2"), 12, "\"experts\": 3");  // routed0_e2 exists nowhere
  auto run = testing::Simulate(g, Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_THAT(run.error, ::testing::HasSubstr("routed0_e2"));
}

// transformers' grouped experts on x [6, 16], top 2 of 4 experts (12 routed rows): histc of the
// sorted expert ids, cumsum to int32 offsets, grouped_mm with an expert weight [4, 24, 16] seen
// transposed (Note [Grouped GEMM experts]).
std::string Grouped(int n) {
  return R"("inputs": [{"name": "x", "shape": [12, 16]}, {"name": "ids", "shape": [12], "dtype": "int32"}],
      "parameters": [{"name": "w", "shape": [4, )" + std::to_string(n) + R"(, 16]}],
      "ops": [{"op": "histc", "inputs": ["ids"], "outputs": ["counts"], "attrs": {"bins": 4}},
              {"op": "cumsum", "inputs": ["counts"], "outputs": ["offs"], "attrs": {"dim": 0}},
              {"op": "transpose", "inputs": ["w"], "outputs": ["wt"], "attrs": {"dim0": -2, "dim1": -1}},
              {"op": "grouped_mm", "inputs": ["x", "wt", "offs"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(MoeRuleTest, HistcAllocatesItsCpuBuffersOnly) {
  auto cpu = testing::Simulate(Grouped(24), Opts("cpu"));
  auto cuda = testing::Simulate(Grouped(24), Opts("cuda"));
  ASSERT_TRUE(cpu.ok && cuda.ok) << cpu.error << cuda.error;
  EXPECT_THAT(SizesOf(cpu, "counts"), ElementsAre(4));
  EXPECT_EQ(testing::AllocatedContaining(cpu.r.events, "histc bin_edges"), 5 * 4);
  EXPECT_EQ(testing::AllocatedContaining(cpu.r.events, "histc per-thread"), 4 * 4);
  EXPECT_TRUE(testing::BuffersContaining(cuda.r.events, "histc").empty());
}

TEST(MoeRuleTest, GroupedMmPadsRowsAndGivesTheWeightItsOwnLayout) {
  auto run = testing::Simulate(Grouped(24), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(12, 24));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("offs", "x"));  // x only needs no grad: B is not kept
  EXPECT_THAT(AllocBytes(run, "y"), ElementsAre(12 * 24 * 4));
  // the weight's grad is [4, 24, 16] dense: AccumulateGrad steals it (one buffer, no copy)
  EXPECT_THAT(AllocBytes(run, "wt.grad"), ElementsAre(4 * 24 * 16 * 4));
  auto padded = testing::Simulate(Grouped(6), Opts("cpu"));  // 6 floats = 24 bytes: rows of 8
  ASSERT_TRUE(padded.ok) << padded.error;
  EXPECT_THAT(AllocBytes(padded, "y"), ElementsAre(12 * 8 * 4));
  EXPECT_EQ(padded.r.bound.metas[padded.graph.FindTensor("y")].strides, (std::vector<int64_t>{8, 1}));
}

}  // namespace
}  // namespace memsim
