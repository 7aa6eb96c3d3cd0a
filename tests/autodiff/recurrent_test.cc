// What the recurrent layers' expansion relies on (Note [Recurrent layers]): in-place ops the code
// calls itself keep `inplace` under --inplace-activations off, and a linear's bias grad reaches its
// InputBuffer before the input's and the weight's (addmm's `self` is its first output).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::Opts;

std::string SigmoidAfterLinear(const std::string& attrs) {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "sigmoid", "inputs": ["h"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

bool Aliases(const testing::Run& run, const std::string& a, const std::string& b) {
  return run.r.bound.owner[run.graph.FindTensor(a)] == run.r.bound.owner[run.graph.FindTensor(b)];
}

TEST(RecurrentTest, InplaceFixedIsKeptUnderInplaceActivationsOff) {
  SimOptions off = Opts("cpu", "sgd", "1.13");
  off.inplace = false;
  auto fixed = testing::Simulate(SigmoidAfterLinear(R"({"inplace": true, "inplace_fixed": true})"), off);
  ASSERT_TRUE(fixed.ok) << fixed.error;
  EXPECT_TRUE(Aliases(fixed, "y", "h"));
  auto module = testing::Simulate(SigmoidAfterLinear(R"({"inplace": true})"), off);
  ASSERT_TRUE(module.ok) << module.error;
  EXPECT_FALSE(Aliases(module, "y", "h"));  // nn.Sigmoid's choice: --inplace-activations off overrides it
}

// One weight and bias used twice (two steps of a recurrent layer): on 1.13's CPU the second grads
// are summed out of place, the bias's before the weight's.
std::string SharedLinear() {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}],
      "parameters": [{"name": "w", "shape": [8, 8]}, {"name": "b", "shape": [8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w", "b"], "outputs": ["h1"]},
              {"op": "linear", "inputs": ["h1", "w", "b"], "outputs": ["h2"]},
              {"op": "mean", "inputs": ["h2"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(RecurrentTest, BiasGradIsSummedBeforeTheWeightGrad) {
  auto run = testing::Simulate(SharedLinear(), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  const auto& s = run.r.events;
  auto b = testing::BuffersNamed(s, "b.grad");
  auto w = testing::BuffersNamed(s, "w.grad");
  ASSERT_EQ(b.size(), 3u) << testing::Dump(s);
  ASSERT_EQ(w.size(), 3u) << testing::Dump(s);
  EXPECT_LT(testing::AllocIndex(s, b[2]), testing::AllocIndex(s, w[2])) << testing::Dump(s);
}

// An embedding feeding a batch_first layer gets its grad through a transpose:
// embedding_dense_backward_cpu copies the non-contiguous grad (`grad_.contiguous()`).
TEST(RecurrentTest, EmbeddingCopiesANonContiguousGrad) {
  const std::string body = R"("inputs": [{"name": "ids", "shape": [4, 6], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [100, 8]}],
      "ops": [{"op": "embedding", "inputs": ["ids", "w"], "outputs": ["e"]},
              {"op": "transpose", "inputs": ["e"], "outputs": ["t"], "attrs": {"dim0": 0, "dim1": 1}},
              {"op": "contiguous", "inputs": ["t"], "outputs": ["c"]},
              {"op": "mean", "inputs": ["c"], "outputs": ["loss"]}], "loss": "loss")";
  auto run = testing::Simulate(body, Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "grad contiguous", &n), 4 * 6 * 8 * 4) << testing::Dump(run.r.events);
  EXPECT_EQ(n, 1u);
}

}  // namespace
}  // namespace memsim
