// Autocast combined with the other setups and the machine: casts made again in a checkpoint's
// recomputation, the loss outside the autocast region (--amp-loss), and bf16 convolutions on a
// CPU without oneDNN's bf16 path (--cpu-isa). Note [Autocast], Note [Activation checkpointing],
// Note [bf16 convolutions on CPU] in docs/op-rules.md.
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "tests/autodiff/mlp_fixture.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/invariants.h"

namespace memsim {
namespace {

/// Simulate (--amp-loss, --cpu-isa applied); checks the event stream's invariants.
SimResult RunAmp(const Graph& g, const SimOptions& opt) {
  auto r = Simulate(g, opt);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return SimResult{};
  EXPECT_TRUE(testing::VerifyEventStream(r->events).ok()) << testing::VerifyEventStream(r->events).message();
  return std::move(*r);
}

SimOptions Amp(const std::string& profile) {
  SimOptions opt = testing::Opts(profile, "sgd");
  opt.amp = "bf16";
  return opt;
}

using testing::Lives;

TEST(AmpCheckpointTest, RecomputationCastsAgainInItsOwnRegion) {
  Graph g = testing::ParseBody(testing::MlpBody());
  SimOptions opt = Amp("cpu");
  opt.checkpoint_globs = {"l2"};
  for (const char* impl : {"non-reentrant", "reentrant"}) {
    opt.checkpoint_impl = impl;
    SimResult r = RunAmp(g, opt);
    // l2's weight is cast in the forward (cached, nothing saved inside the checkpoint: dies at
    // region exit) and again in backward's recomputation, whose cast the node saves.
    auto w = Lives(r.events, "l2.weight (autocast bfloat16)");
    ASSERT_EQ(w.size(), 2u) << impl;
    EXPECT_EQ(w[0].bytes, 10 * 64 * 2);
    EXPECT_EQ(w[0].alloc, Phase::kForward);
    EXPECT_EQ(w[0].free, Phase::kForward);
    EXPECT_EQ(w[1].alloc, Phase::kBackward);
    EXPECT_EQ(w[1].free, Phase::kBackward);
    // The bias cast is cached too but unsaved: the recomputation's region exit frees it.
    auto b = Lives(r.events, "l2.bias (autocast bfloat16)");
    ASSERT_EQ(b.size(), 2u) << impl;
    EXPECT_EQ(b[1].alloc, Phase::kBackward);
    // Still one ToCopyBackward0 per weight: a bf16 grad, then the fp32 .grad.
    auto grads = Lives(r.events, "l2.weight.grad");
    ASSERT_EQ(grads.size(), 2u) << impl;
    EXPECT_EQ(grads[0].bytes, 10 * 64 * 2);
    EXPECT_EQ(grads[1].bytes, 10 * 64 * 4);
  }
  // Without autocast the recomputation casts nothing.
  opt.amp = "";
  EXPECT_TRUE(Lives(RunAmp(g, opt).events, "l2.weight (autocast bfloat16)").empty());
}

TEST(AmpLossTest, LossOutsideTheRegionRunsOnTheLowPrecisionOutput) {
  Graph g = testing::ParseBody(testing::MlpBody());
  SimOptions opt = Amp("cpu");
  SimResult inside = RunAmp(g, opt);
  // Inside: cross_entropy's fp32 policy casts the bf16 logits; the loss is fp32.
  EXPECT_EQ(Lives(inside.events, "logits (autocast float32)").size(), 1u);
  EXPECT_EQ(inside.bound.metas[g.loss].dtype, Dtype::kFloat32);
  opt.amp_loss = "outside";
  SimResult outside = RunAmp(g, opt);
  EXPECT_TRUE(Lives(outside.events, "logits (autocast float32)").empty());
  EXPECT_EQ(outside.bound.metas[g.loss].dtype, Dtype::kBFloat16);
  EXPECT_EQ(outside.bound.autocast_exit, g.ops.size() - 1);  // the cross_entropy
  // The region exits before the loss: the cached casts of the unsaved biases are gone by then.
  opt.amp_loss = "sideways";
  auto bad = Simulate(g, opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("--amp-loss"), std::string::npos);
}

TEST(AmpLossTest, TheLossIsTheTrailingOpsTheOutputsDoNotNeed) {
  // A model whose output feeds a reshape and the loss: both run after the region.
  Graph g = testing::ParseBody(R"("inputs": [{"name": "x", "shape": [4, 16]}],
    "parameters": [{"name": "w", "shape": [16, 16]}],
    "ops": [{"op": "linear", "module": "fc", "inputs": ["x", "w"], "outputs": ["y"]},
            {"op": "relu", "module": "act", "inputs": ["y"], "outputs": ["out"]},
            {"op": "sum", "module": "loss", "inputs": ["out"], "outputs": ["loss"]}],
    "outputs": ["out"], "loss": "loss")");
  SimOptions opt = Amp("cuda");
  opt.amp_loss = "outside";
  EXPECT_EQ(RunAmp(g, opt).bound.autocast_exit, 2u);
}

/// One 3×3 (pad 1) and one 1×1 convolution on a [2, 3, 8, 8] input.
std::string ConvBody() {
  return R"("inputs": [{"name": "x", "shape": [2, 3, 8, 8]}, {"name": "t", "shape": [2], "dtype": "int64"}],
    "parameters": [{"name": "c1.weight", "shape": [4, 3, 3, 3]}, {"name": "c1.bias", "shape": [4]},
                   {"name": "c2.weight", "shape": [6, 4, 1, 1]}],
    "ops": [{"op": "conv2d", "module": "c1", "inputs": ["x", "c1.weight", "c1.bias"], "outputs": ["h"],
             "attrs": {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1}},
            {"op": "conv2d", "module": "c2", "inputs": ["h", "c2.weight"], "outputs": ["y"],
             "attrs": {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}},
            {"op": "mean", "module": "loss", "inputs": ["y"], "outputs": ["loss"]}],
    "loss": "loss")";
}

TEST(Bf16ConvTest, Avx2RunsSlowConv2dWithIm2colColumns) {
  Graph g = testing::ParseBody(ConvBody());
  SimOptions opt = Amp("cpu");
  opt.cpu_isa = "avx2";
  SimResult r = RunAmp(g, opt);
  // c1: columns [N, Cin·kh·kw, Hout·Wout] in bf16, in forward and again for grad_weight.
  int c1_columns = 0;
  for (const Buffer& b : r.events.buffers)
    if (b.name.find("slow_conv2d im2col columns") != std::string::npos) {
      EXPECT_EQ(b.bytes, 2 * 3 * 9 * 64 * 2) << b.name;  // c2 is 1×1 stride 1: a view, none
      ++c1_columns;
    }
  EXPECT_EQ(c1_columns, 2);
  for (const Buffer& b : r.events.buffers) EXPECT_EQ(b.name.find("onednn"), std::string::npos) << b.name;
  // avx512: oneDNN's blocked reorders instead, no columns.
  opt.cpu_isa = "avx512";
  SimResult o = RunAmp(g, opt);
  bool reorders = false;
  for (const Buffer& b : o.events.buffers) {
    EXPECT_EQ(b.name.find("slow_conv2d"), std::string::npos) << b.name;
    reorders |= b.name.find("onednn") != std::string::npos;
  }
  EXPECT_TRUE(reorders);
  // fp32 convolutions do not depend on the ISA.
  opt.amp = "";
  for (const Buffer& b : RunAmp(g, opt).events.buffers) EXPECT_EQ(b.name.find("slow_conv2d"), std::string::npos);
}

/// The oneDNN scratchpads of a run, by module, in allocation order.
std::vector<std::pair<std::string, int64_t>> Scratchpads(const SimResult& r) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const MemEvent& e : r.events.events) {
    const Buffer& b = r.events.buffers[e.buffer];
    if (e.kind == EventKind::kAlloc && b.name.find("onednn scratchpad") != std::string::npos)
      out.emplace_back(b.module, b.bytes);
  }
  return out;
}

// --cpu-isa amx under 2.13: the MLP's l1 GEMMs take the AMX matmul's scratchpads as measured on
// the AMX host (x·W1ᵀ 8×32×64: 5,120 B; W1's grad 64×8×32 with A transposed: 13,440 B; Note
// [oneDNN AMX matmul scratchpads]); under 1.13 amx is avx512 (oneDNN 2.6's sizes).
TEST(Bf16GemmTest, AmxTakesTheAmxMatmulScratchpadsUnder2x) {
  Graph g = testing::ParseBody(testing::MlpBody());
  SimOptions opt = Amp("cpu");
  opt.torch = "2.13";
  opt.cpu_isa = "amx";
  const auto amx = Scratchpads(RunAmp(g, opt));
  ASSERT_FALSE(amx.empty());
  EXPECT_EQ(amx.front(), std::make_pair(std::string("l1"), int64_t{5120}));
  EXPECT_EQ(amx.back(), std::make_pair(std::string("l1"), int64_t{13440}));
  opt.cpu_isa = "avx512";
  EXPECT_NE(Scratchpads(RunAmp(g, opt)), amx);
  opt.torch = "1.13";
  const auto avx512_113 = Scratchpads(RunAmp(g, opt));
  opt.cpu_isa = "amx";
  EXPECT_EQ(Scratchpads(RunAmp(g, opt)), avx512_113);
}

TEST(Bf16ConvTest, IsaIsACpuProfileOptionWithCheckedValues) {
  Graph g = testing::ParseBody(ConvBody());
  SimOptions opt = Amp("cpu");
  opt.cpu_isa = "sse2";
  auto bad = Simulate(g, opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("--cpu-isa"), std::string::npos);
  opt.cpu_isa = "avx2";
  opt.profile = "cuda";
  EXPECT_FALSE(Simulate(g, opt).ok());
  // The default cpu profile is this machine's: avx2.
  opt.profile = "cpu";
  opt.torch = "1.13";
  opt.cpu_isa = "";
  EXPECT_FALSE(RunAmp(g, opt).profile.bf16_conv_onednn);
}

}  // namespace
}  // namespace memsim
