// The rule of lib/ops/rules_rnn_onednn.cc: mkldnn_rnn_layer, one layer and direction of nn.LSTM on
// the CPU under PyTorch 2.x (Note [oneDNN LSTM]): what its node keeps, oneDNN's buffers around the
// forward and the backward, the diff buffers of inputs that need no grad, and where it is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using testing::Opts;

// T 3, B 2, I 4, H 5: x [3, 2, 4], weights [20, 4] and [20, 5]; zeros initial states selected
// from [1, 2, 5]; |loss| sums what the caller uses of (y, hy, cy).
std::string Layer(const std::string& biases, const std::string& loss_ops, const std::string& extra_params = "") {
  return R"("inputs": [{"name": "x", "shape": [3, 2, 4]}],
      "parameters": [{"name": "w_ih", "shape": [20, 4]}, {"name": "w_hh", "shape": [20, 5]})" + extra_params + R"(],
      "ops": [{"op": "full", "inputs": [], "outputs": ["h0"], "attrs": {"shape": [1, 2, 5], "dtype": "float32"}},
              {"op": "full", "inputs": [], "outputs": ["c0"], "attrs": {"shape": [1, 2, 5], "dtype": "float32"}},
              {"op": "select", "inputs": ["h0"], "outputs": ["hx"], "attrs": {"dim": 0, "index": 0}},
              {"op": "select", "inputs": ["c0"], "outputs": ["cx"], "attrs": {"dim": 0, "index": 0}},)" +
         biases + R"(
              {"op": "sum", "inputs": ["y"], "outputs": ["m"]})" + loss_ops + R"(], "loss": "loss")";
}

const std::string kWithBiases =
    R"({"op": "mkldnn_rnn_layer", "inputs": ["x", "w_ih", "w_hh", "b_ih", "b_hh", "hx", "cx"],
        "outputs": ["y", "hy", "cy"], "attrs": {"reverse": false, "hidden_size": 5, "has_biases": true}},)";
const std::string kBiasParams = R"(, {"name": "b_ih", "shape": [20]}, {"name": "b_hh", "shape": [20]})";
const std::string kMeanIsLoss = R"(, {"op": "mean", "inputs": ["m"], "outputs": ["loss"]})";

int64_t Allocated(const testing::Run& run, const std::string& part) {
  return testing::AllocatedContaining(run.r.events, part);
}

TEST(OneDnnLstmRuleTest, NodeKeepsEveryInputTheOutputsAndTheWorkspace) {
  auto run = testing::Simulate(Layer(kWithBiases, kMeanIsLoss, kBiasParams), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "y"), UnorderedElementsAre("x", "w_ih", "w_hh", "b_ih", "b_hh", "hx", "cx", "y",
                                                                  "hy", "cy", "extra:workspace"));
  EXPECT_EQ(Allocated(run, "y:workspace"), 28672);
  // oneDNN's scratchpad in forward and in backward; the bias sum in both
  EXPECT_EQ(Allocated(run, "y:scratchpad"), 2 * 16952);
  EXPECT_EQ(Allocated(run, "y:bias"), 2 * 20 * 4);
  // forward ldigo reorders (I·ld(4H), H·ld(4H)); backward ldgoi ones (4H·ld(I), 4H·ld(H)): ld(4) = ld(5) = 16
  EXPECT_EQ(Allocated(run, "y:weights_layer reorder"), 4 * 32 * 4 + 20 * 16 * 4);
  EXPECT_EQ(Allocated(run, "y:weights_iter reorder"), 5 * 32 * 4 + 20 * 16 * 4);
  EXPECT_EQ(Allocated(run, "y:diff_weights_layer"), 4 * 32 * 4);
  EXPECT_EQ(Allocated(run, "y:diff_bias"), 20 * 4);
}

TEST(OneDnnLstmRuleTest, BackwardMakesUndefinedAndStridedGradsContiguous) {
  auto run = testing::Simulate(Layer(kWithBiases, kMeanIsLoss, kBiasParams), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Allocated(run, "y:grad_output"), 3 * 2 * 5 * 4);  // sum's grad: an expanded view
  EXPECT_EQ(Allocated(run, "y:grad_hy"), 2 * 5 * 4);          // hy unused: zeros_like(hx)
  EXPECT_EQ(Allocated(run, "y:grad_cy"), 2 * 5 * 4);
  // x, hx and cx need no grad: the kernel's buffers for them are dropped
  EXPECT_EQ(Allocated(run, "y:diff_x"), 3 * 2 * 4 * 4);
  EXPECT_EQ(Allocated(run, "y:diff_hx"), 2 * 5 * 4);
  EXPECT_EQ(Allocated(run, "y:diff_b_"), 0);  // b_ih and b_hh take theirs as grads
  EXPECT_EQ(Allocated(run, "y:diff_b2_"), 0);

  // hy through a linear: its grad arrives contiguous, so neither zeros nor a copy
  const std::string uses_hy = R"(, {"op": "linear", "inputs": ["hy", "w_o"], "outputs": ["o"]},
      {"op": "mean", "inputs": ["o"], "outputs": ["mh"]}, {"op": "add", "inputs": ["m", "mh"], "outputs": ["loss"]})";
  auto hy = testing::Simulate(Layer(kWithBiases, uses_hy, kBiasParams + R"(, {"name": "w_o", "shape": [3, 5]})"),
                              Opts("cpu"));
  ASSERT_TRUE(hy.ok) << hy.error;
  EXPECT_EQ(Allocated(hy, "y:grad_hy"), 0);
  EXPECT_EQ(Allocated(hy, "y:grad_cy"), 2 * 5 * 4);
}

TEST(OneDnnLstmRuleTest, WithoutBiasesTheZerosAreKeptAndTheirGradsDropped) {
  const std::string zeros =
      R"({"op": "full", "inputs": [], "outputs": ["z_hh"], "attrs": {"shape": [20, 5], "dtype": "float32"}},
         {"op": "full", "inputs": [], "outputs": ["z_ih"], "attrs": {"shape": [20, 4], "dtype": "float32"}},
         {"op": "mkldnn_rnn_layer", "inputs": ["x", "w_ih", "w_hh", "z_ih", "z_hh", "hx", "cx"],
          "outputs": ["y", "hy", "cy"], "attrs": {"reverse": true, "hidden_size": 5, "has_biases": false}},)";
  auto run = testing::Simulate(Layer(zeros, kMeanIsLoss), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  auto saved = testing::SavedNames(run, "y");
  EXPECT_THAT(saved, ::testing::Contains("z_ih"));
  EXPECT_THAT(saved, ::testing::Contains("z_hh"));
  EXPECT_EQ(Allocated(run, "y:diff_b_"), 20 * 4);  // diff_b_ and diff_b2_, both dropped
  EXPECT_EQ(Allocated(run, "y:diff_b2_"), 20 * 4);
  EXPECT_EQ(Allocated(run, "y:bias"), 2 * 20 * 4);    // at::zeros({4H}) in forward and backward
}

TEST(OneDnnLstmRuleTest, RefusedOffTheCpu213Profile) {
  for (auto [profile, torch] : {std::pair{"cuda", "2.13"}, {"cpu", "1.13"}}) {
    auto run = testing::Simulate(Layer(kWithBiases, kMeanIsLoss, kBiasParams), Opts(profile, "sgd", torch));
    EXPECT_FALSE(run.ok) << profile << " " << torch;
    EXPECT_THAT(run.error, HasSubstr("oneDNN's LSTM runs on the CPU under PyTorch 2.x only"));
  }
}

TEST(OneDnnLstmRuleTest, RefusedUnderAutocast) {
  SimOptions opt = Opts("cpu");
  opt.amp = "bf16";
  auto run = testing::Simulate(Layer(kWithBiases, kMeanIsLoss, kBiasParams), opt);
  EXPECT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("oneDNN's bf16 LSTM is not modelled"));
}

TEST(OneDnnLstmRuleTest, RejectsMismatchedShapes) {
  std::string bad = kWithBiases;
  bad.replace(bad.find("\"hx\", \"cx\""), 10, "\"hx\", \"x\"");
  auto run = testing::Simulate(Layer(bad, kMeanIsLoss, kBiasParams), Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("does not fit"));
}

}  // namespace
}  // namespace memsim
