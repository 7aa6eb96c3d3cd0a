// Pooling rules of lib/ops/rules_nn.cc beyond nn_rules_test.cc: the backward's copy of a
// non-contiguous incoming grad, and the 1-D composites and instance_norm the exporter spells out of
// the 2-D / batch_norm rows (Notes [1-D pooling] and [Instance norm] in docs/op-rules.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::AllocBytes;

using ::testing::UnorderedElementsAre;
using testing::Opts;
using testing::SavedNames;

// x [2, 4, 8, 8] (a parameter) -> avg_pool2d k2 -> y [2, 4, 4, 4]; the loss reads y directly, or a
// transposed copy of it (its grad, transposed back, reaches the pool non-contiguous).
std::string PoolGradBody(const std::string& op, const std::string& attrs, bool transposed) {
  std::string tail = transposed ? R"({"op": "transpose", "inputs": ["y"], "outputs": ["yt"], "attrs": {"dim0": 1, "dim1": 3}},
      {"op": "contiguous", "inputs": ["yt"], "outputs": ["yc"]}, {"op": "mean", "inputs": ["yc"], "outputs": ["loss"]})"
                                : R"({"op": "mean", "inputs": ["y"], "outputs": ["loss"]})";
  return R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 4, 8, 8]}],
      "ops": [{"op": ")" + op + R"(", "inputs": ["x"], "outputs": ["y"], "attrs": )" + attrs + "}, " + tail +
         R"(], "loss": "loss")";
}

TEST(PoolBackwardTest, ANonContiguousIncomingGradIsCopiedAfterTheGradInput) {
  for (const char* op : {"avg_pool2d", "max_pool2d"}) {
    auto run = testing::Simulate(PoolGradBody(op, R"({"kernel_size": 2})", true), Opts("cpu"));
    ASSERT_TRUE(run.ok) << run.error;
    size_t n = 0;
    EXPECT_EQ(testing::AllocatedContaining(run.r.events, "y:grad_output contiguous", &n), 2 * 4 * 4 * 4 * 4) << op;
    EXPECT_EQ(n, 1u) << op;
  }
}

TEST(PoolBackwardTest, AContiguousIncomingGradOrAGlobalAverageIsNotCopied) {
  auto plain = testing::Simulate(PoolGradBody("avg_pool2d", R"({"kernel_size": 2})", false), Opts("cpu"));
  ASSERT_TRUE(plain.ok) << plain.error;
  EXPECT_TRUE(testing::BuffersContaining(plain.r.events, "grad_output contiguous").empty());
  auto global = testing::Simulate(PoolGradBody("adaptive_avg_pool2d", R"({"output_size": [1, 1]})", true), Opts("cpu"));
  ASSERT_TRUE(global.ok) << global.error;
  EXPECT_TRUE(testing::BuffersContaining(global.r.events, "grad_output contiguous").empty());
}

// nn.MaxPool1d(2) as the exporter writes it: unsqueeze(-2), max_pool2d over [1, 2], squeeze(-2).
TEST(Pool1dCompositeTest, TheViewsAllocateNothingAndTheKernelKeepsItsInputAndIndices) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 4, 16]}],
      "ops": [{"op": "unsqueeze", "inputs": ["x"], "outputs": ["u"], "attrs": {"dim": -2}},
              {"op": "max_pool2d", "inputs": ["u"], "outputs": ["p"], "attrs": {"kernel_size": [1, 2], "stride": [1, 2]}},
              {"op": "squeeze", "inputs": ["p"], "outputs": ["y"], "attrs": {"dim": -2}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")", Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.r.bound.metas[run.graph.FindTensor("y")].sizes, (std::vector<int64_t>{2, 4, 8}));
  EXPECT_THAT(SavedNames(run, "p"), UnorderedElementsAre("u", "extra:max_pool indices"));
  EXPECT_EQ(testing::Lives(run.r.events, "p").size(), 1u);
  EXPECT_TRUE(testing::Lives(run.r.events, "y").empty());  // a view of p
}

// instance_norm of x [2, 4, 5, 5] with affine parameters: weight and bias repeated B times into
// batch_norm over x viewed as [1, 8, 5, 5]. The node keeps the repeated weight, not the bias.
TEST(InstanceNormCompositeTest, BatchNormKeepsTheRepeatedWeightAndTheRepeatedBiasDies) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 4, 5, 5]},
      {"name": "g", "shape": [4]}, {"name": "b", "shape": [4]}],
      "ops": [{"op": "repeat", "inputs": ["g"], "outputs": ["gr"], "attrs": {"repeats": [2]}},
              {"op": "repeat", "inputs": ["b"], "outputs": ["br"], "attrs": {"repeats": [2]}},
              {"op": "view", "inputs": ["x"], "outputs": ["v"], "attrs": {"shape": [1, 8, 5, 5]}},
              {"op": "batch_norm", "inputs": ["v", "gr", "br"], "outputs": ["n"], "attrs": {"training": true}},
              {"op": "view", "inputs": ["n"], "outputs": ["y"], "attrs": {"shape": [2, 4, 5, 5]}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")", Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "n"), UnorderedElementsAre("v", "gr", "extra:mean", "extra:rstd"));
  auto br = testing::Lives(run.r.events, "br");
  ASSERT_EQ(br.size(), 1u);
  EXPECT_EQ(br[0].bytes, 8 * 4);
  EXPECT_TRUE(br[0].freed);
  EXPECT_EQ(br[0].free, Phase::kForward);
}


// x [2, 4, 8, 8] -> max_pool2d k2 with return_indices -> (p, i) -> max_unpool2d to 8 x 8 -> u.
std::string UnpoolBody(const std::string& unpool_attrs = R"({"output_size": [8, 8]})") {
  return R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 4, 8, 8]}],
      "ops": [{"op": "max_pool2d", "inputs": ["x"], "outputs": ["p", "i"], "attrs": {"kernel_size": 2, "return_indices": true}},
              {"op": "max_unpool2d", "inputs": ["p", "i"], "outputs": ["u"], "attrs": )" + unpool_attrs + R"(},
              {"op": "mean", "inputs": ["u"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(MaxUnpoolRuleTest, ThePoolReturnsItsIndicesAndTheUnpoolKeepsThem) {
  auto run = testing::Simulate(UnpoolBody(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const auto& i = run.r.bound.metas[run.graph.FindTensor("i")];
  EXPECT_EQ(i.dtype, Dtype::kInt64);
  EXPECT_EQ(i.sizes, (std::vector<int64_t>{2, 4, 4, 4}));
  EXPECT_EQ(run.r.bound.metas[run.graph.FindTensor("u")].sizes, (std::vector<int64_t>{2, 4, 8, 8}));
  EXPECT_THAT(SavedNames(run, "p"), UnorderedElementsAre("x", "i"));
  EXPECT_THAT(SavedNames(run, "u"), UnorderedElementsAre("i"));
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "max_pool indices").empty());  // an output, not a hidden buffer
  // max_pool_double_backward: the gather's grad of p's size, then the pool's grad of x's.
  EXPECT_THAT(AllocBytes(run, "p.grad"), ::testing::ElementsAre(2 * 4 * 4 * 4 * 4));
  EXPECT_THAT(AllocBytes(run, "x.grad"), ::testing::ElementsAre(2 * 4 * 8 * 8 * 4));
}

TEST(MaxUnpoolRuleTest, RefusesAMissingOutputSize) {
  auto run = testing::Simulate(UnpoolBody("{}"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, ::testing::HasSubstr("output_size"));
}

// x [2, 4, 8, 8] -> fractional_max_pool2d to 5 x 5 with its random samples [2, 4, 2].
TEST(FractionalMaxPoolRuleTest, KeepsTheInputAndHiddenInt64IndicesNotTheSamples) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 4, 8, 8]}],
      "ops": [{"op": "full", "inputs": [], "outputs": ["s"], "attrs": {"shape": [2, 4, 2]}},
              {"op": "fractional_max_pool2d", "inputs": ["x", "s"], "outputs": ["y"], "attrs": {"kernel_size": [3, 3], "output_size": [5, 5]}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")", Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.r.bound.metas[run.graph.FindTensor("y")].sizes, (std::vector<int64_t>{2, 4, 5, 5}));
  EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("x", "extra:fractional_max_pool indices"));
  EXPECT_THAT(AllocBytes(run, "y:fractional_max_pool indices"), ::testing::ElementsAre(2 * 4 * 5 * 5 * 8));
  auto s = testing::Lives(run.r.events, "s");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].free, Phase::kForward);  // the samples die with the call
}

// LPPool's sign (lib/ops/rules_activation.cc): nothing kept, a zero grad summed with the other path's.
TEST(SignRuleTest, KeepsNothingAndItsGradIsNew) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "x", "shape": [2, 8]}],
      "ops": [{"op": "sign", "inputs": ["x"], "outputs": ["s"]},
              {"op": "mul", "inputs": ["s", "x"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")", Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(SavedNames(run, "s").empty());
  EXPECT_THAT(AllocBytes(run, "s"), ::testing::ElementsAre(2 * 8 * 4));
  EXPECT_GE(testing::Lives(run.r.events, "x.grad").size(), 1u);
}

// embedding_bag (mean) of ids [16, 8] flattened: weight [100, 32], offsets [16].
std::string EmbeddingBagBody(bool frozen = false) {
  return R"("inputs": [{"name": "ids", "shape": [128], "dtype": "int64"}, {"name": "off", "shape": [16], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [100, 32], "requires_grad": )" + std::string(frozen ? "false" : "true") + R"(},
                     {"name": "x", "shape": [16, 32]}],
      "ops": [{"op": "embedding_bag", "inputs": ["w", "ids", "off"], "outputs": ["e"], "attrs": {"mode": "mean"}},
              {"op": "mul", "inputs": ["e", "x"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}


TEST(EmbeddingBagRuleTest, KeepsIndicesOffsetsOffset2bagBagSizeAndMaxIndices) {
  auto run = testing::Simulate(EmbeddingBagBody(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.r.bound.metas[run.graph.FindTensor("e")].sizes, (std::vector<int64_t>{16, 32}));
  EXPECT_THAT(SavedNames(run, "e"),
              UnorderedElementsAre("ids", "off", "extra:offset2bag", "extra:bag_size", "extra:max_indices"));
  EXPECT_THAT(AllocBytes(run, "e:offset2bag"), ::testing::ElementsAre(129 * 8));  // N + 1: resize_ keeps it
  EXPECT_THAT(AllocBytes(run, "e:offset2bag zeros"), ::testing::ElementsAre(129 * 8));
  EXPECT_THAT(AllocBytes(run, "e:bag_size in the output's dtype"), ::testing::ElementsAre(16 * 4));
}

TEST(EmbeddingBagRuleTest, BackwardMakesTheTableGradThenSortsTheIndices) {
  auto run = testing::Simulate(EmbeddingBagBody(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "w.grad"), ::testing::ElementsAre(100 * 32 * 4));
  EXPECT_THAT(AllocBytes(run, "e:sorted indices"), ::testing::ElementsAre(128 * 8));
  auto frozen = testing::Simulate(EmbeddingBagBody(true), Opts("cpu"));
  ASSERT_TRUE(frozen.ok) << frozen.error;
  EXPECT_TRUE(testing::BuffersContaining(frozen.r.events, "sorted indices").empty());
}

std::string WithMode(const std::string& mode) {
  std::string body = EmbeddingBagBody();
  body.replace(body.find(R"("mean"})"), 6, "\"" + mode + "\"");
  return body;
}

TEST(EmbeddingBagRuleTest, RefusesUnknownModesAndSumOffFloat32) {
  auto run = testing::Simulate(WithMode("min"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, ::testing::HasSubstr("embedding_bag"));
  std::string half = WithMode("sum");
  half.replace(half.find(R"("shape": [100, 32])"), 18, R"("shape": [100, 32], "dtype": "float16")");
  half.replace(half.find(R"("shape": [16, 32]})"), 18, R"("shape": [16, 32], "dtype": "float16"})");
  auto h = testing::Simulate(half);
  ASSERT_FALSE(h.ok);
  EXPECT_THAT(h.error, ::testing::HasSubstr("float32"));
}

// Sum's fast path skips offset2bag in the forward (nothing kept for it) and its backward makes it
// again before the sort; no apply_bag_size.
TEST(EmbeddingBagRuleTest, SumSkipsOffset2bagUntilTheBackwardRemakesIt) {
  auto run = testing::Simulate(WithMode("sum"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "e"), UnorderedElementsAre("ids", "off", "extra:bag_size", "extra:max_indices"));
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "bag_size in the output's dtype").empty());
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "offset2bag zeros", &n), 129 * 8);
  EXPECT_EQ(n, 1u);  // made once, in the backward
  EXPECT_THAT(AllocBytes(run, "e:sorted indices"), ::testing::ElementsAre(128 * 8));
}

// Max resizes max_indices to [B, D] (kept); its backward selects the non-empty bags' indices and grad
// and adds one index column at a time, no sort.
TEST(EmbeddingBagRuleTest, MaxKeepsBDIndicesAndAddsAColumnAtATime) {
  auto run = testing::Simulate(WithMode("max"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "e"),
              UnorderedElementsAre("ids", "off", "extra:offset2bag", "extra:bag_size", "extra:max_indices resized to [B, D]"));
  EXPECT_THAT(AllocBytes(run, "e:max_indices resized to [B, D]"), ::testing::ElementsAre(16 * 32 * 8));
  EXPECT_THAT(AllocBytes(run, "e:nonempty_max_indices"), ::testing::ElementsAre(16 * 32 * 8));
  EXPECT_THAT(AllocBytes(run, "e:nonempty_grad"), ::testing::ElementsAre(16 * 32 * 4));
  EXPECT_EQ(AllocBytes(run, "e:index column, contiguous").size(), 32u);
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "sorted indices").empty());
}

}  // namespace
}  // namespace memsim
