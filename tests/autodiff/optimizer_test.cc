// Optimizer state and step temporaries (docs/op-rules.md, Note [Optimizer state];
// docs/research/cpu-1.13-rules.md R12).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/autodiff/mlp_fixture.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;
using namespace testing;  // NOLINT

Run Step(const std::string& opt, const std::string& profile = "cuda", bool first = true) {
  SimOptions o = Opts(profile, opt);
  o.first_step = first;
  auto run = testing::Simulate(MlpBody(), o);
  EXPECT_TRUE(run.ok) << run.error;
  return run;
}

/// Max bytes of live temporaries during the optimizer phase.
int64_t MaxLiveOptimizerTemps(const EventStream& s) {
  int64_t live = 0, best = 0;
  for (const MemEvent& e : s.events) {
    if (e.phase != Phase::kOptimizer || s.buffers[e.buffer].category != Category::kTemporary) continue;
    if (s.buffers[e.buffer].name.starts_with("record_function")) continue;
    live += (e.kind == EventKind::kAlloc ? 1 : -1) * s.bytes(e);
    best = std::max(best, live);
  }
  return best;
}

TEST(OptimizerTest, SgdKeepsNoState) {
  auto run = Step("sgd");
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState), 0);
  EXPECT_EQ(MaxLiveOptimizerTemps(run.r.events), 0);
}

TEST(OptimizerTest, MomentumCreatesOneCloneOfEachGradDuringFirstStep) {
  auto run = Step("momentum");
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kSetup), 0);
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kOptimizer), kParamBytes);
  EXPECT_EQ(BuffersNamed(run.r.events, "l1.weight.momentum_buffer").size(), 1u);
  EXPECT_EQ(LiveAtEnd(run.r.events, Category::kOptimizerState), kParamBytes);
}

TEST(OptimizerTest, AdamKeepsTwoStatesAndNoDeviceStepTensorOnCuda) {
  auto run = Step("adam");
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kOptimizer), 2 * kParamBytes);
  EXPECT_TRUE(BuffersContaining(run.r.events, ".step").empty());
}

TEST(OptimizerTest, AdamOnCpuAddsFourByteStepTensors) {
  auto run = Step("adam", "cpu");
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState), 2 * kParamBytes + 4 * 4);
  auto steps = BuffersContaining(run.r.events, ".step");
  ASSERT_EQ(steps.size(), 4u);
  for (uint32_t b : steps) EXPECT_EQ(run.r.events.buffers[b].bytes, 4);
}

TEST(OptimizerTest, AmsgradKeepsThreeStates) {
  EXPECT_EQ(AllocatedBytes(Step("adam_amsgrad").r.events, Category::kOptimizerState), 3 * kParamBytes);
  EXPECT_EQ(AllocatedBytes(Step("adamw_amsgrad").r.events, Category::kOptimizerState), 3 * kParamBytes);
  EXPECT_EQ(AllocatedBytes(Step("adamw").r.events, Category::kOptimizerState), 2 * kParamBytes);
}

TEST(OptimizerTest, AdagradStateIsEagerEvenOnFirstStep) {
  auto run = Step("adagrad", "cpu");
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kSetup), kParamBytes + 4 * 4);
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kOptimizer), 0);
}

TEST(OptimizerTest, RmspropVariants) {
  EXPECT_EQ(AllocatedBytes(Step("rmsprop").r.events, Category::kOptimizerState), kParamBytes);
  EXPECT_EQ(AllocatedBytes(Step("rmsprop_momentum").r.events, Category::kOptimizerState), 2 * kParamBytes);
  auto centered = Step("rmsprop_centered");
  EXPECT_EQ(AllocatedBytes(centered.r.events, Category::kOptimizerState), 2 * kParamBytes);
  EXPECT_EQ(BuffersNamed(centered.r.events, "l2.bias.grad_avg").size(), 1u);
}

TEST(OptimizerTest, SteadyStepHasAllStateInSetup) {
  auto run = Step("adam", "cuda", /*first=*/false);
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kSetup), 2 * kParamBytes);
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kOptimizer), 0);
  EXPECT_EQ(run.r.peak.setup_bytes, LiveAfterPhase(run.r.events, Phase::kSetup));
  auto mom = Step("momentum", "cuda", false);
  EXPECT_EQ(AllocatedBytes(mom.r.events, Category::kOptimizerState, Phase::kSetup), kParamBytes);
}

// The cuda profile's cuBLAS workspaces (CUBLAS_WORKSPACE_CONFIG default), one for the main
// thread and one for the autograd engine's thread, alive from the first GEMM on each.
// the cuBLAS workspaces of both threads and the main thread's cuBLASLt one (biased linears)
constexpr int64_t kCublasWorkspace = 2 * 8519680 + 1048576;

TEST(OptimizerTest, FirstStepPeakIncludesNewState) {
  auto first = Step("adam", "cuda", true);
  auto steady = Step("adam", "cuda", false);
  // Steady holds the state (and the cuBLAS workspace of an earlier step) from the start; the
  // first step creates the state in optimizer.step().
  EXPECT_EQ(steady.r.peak.setup_bytes - first.r.peak.setup_bytes, 2 * kParamBytes + kCublasWorkspace);
  EXPECT_EQ(first.r.peak.phase_peaks[3], steady.r.peak.phase_peaks[3]);
}

TEST(OptimizerTest, ForeachTemporariesCoverAllParametersAtOnce) {
  auto run = Step("adam", "cuda");
  EXPECT_EQ(MaxLiveOptimizerTemps(run.r.events), kParamBytes);
}

TEST(OptimizerTest, ForLoopTemporariesArePerParameter) {
  auto run = Step("adam", "cpu");
  // Per parameter: sqrt + denom, and the previous denom survives: max over i of
  // 2*B(p_i) + B(p_{i-1}); here l1.weight (2*kW1) dominates.
  EXPECT_EQ(MaxLiveOptimizerTemps(run.r.events), 2 * kW1);
  EXPECT_LT(MaxLiveOptimizerTemps(run.r.events), kParamBytes + kW1);
  EXPECT_FALSE(BuffersContaining(run.r.events, "denom").empty());
}

TEST(OptimizerTest, CpuStepRunsInsideRecordFunctionOn113Only) {
  SimOptions o = Opts("cpu", "sgd", "1.13");
  auto cpu113 = testing::Simulate(MlpBody(), o);
  ASSERT_TRUE(cpu113.ok) << cpu113.error;
  EXPECT_EQ(BuffersContaining(cpu113.r.events, "record_function").size(), 4u);
  // The 2.13 CPU traces allocate nothing around optimizer.step() and zero_grad().
  EXPECT_TRUE(BuffersContaining(Step("sgd", "cpu").r.events, "record_function").empty());
  EXPECT_TRUE(BuffersContaining(Step("sgd", "cuda").r.events, "record_function").empty());
}

TEST(OptimizerTest, ZeroGradFreesAllGrads) {
  for (const char* opt : {"sgd", "adam", "momentum"}) {
    auto run = Step(opt);
    EXPECT_GT(AllocatedBytes(run.r.events, Category::kGradient), 0) << opt;
    EXPECT_EQ(LiveAtEnd(run.r.events, Category::kGradient), 0) << opt;
    for (uint32_t b : BuffersContaining(run.r.events, ".grad")) {
      const MemEvent* f = FreeEvent(run.r.events, b);
      ASSERT_NE(f, nullptr) << run.r.events.buffers[b].name;
    }
    auto g = testing::Buffer(run.r.events, "l1.weight.grad");
    ASSERT_TRUE(g);
    EXPECT_EQ(FreeEvent(run.r.events, *g)->phase, Phase::kOptimizer) << opt;
  }
}

TEST(OptimizerTest, FinalBytesAreParametersInputsAndState) {
  auto run = Step("adam");
  const int64_t inputs = 8 * 32 * 4 + 8 * 8;
  EXPECT_EQ(run.r.peak.final_bytes, kParamBytes + 2 * kParamBytes + inputs + kCublasWorkspace);
}

// Note [Recorded optimizers]: a program replayed per parameter. First step: t0 survives (state),
// t1 is freed in its own iteration, t2 lives until the next parameter's iteration (and after the
// last one until step() returns). Steady step: the old state is dropped one parameter later.
std::string RecordedMlp() {
  return MlpBody(R"(, "optimizer": {"name": "MyOpt", "source": "test",
      "first_step": {"resident": [], "before": ["alloc 8B", "free g0"],
                     "body": ["alloc 1", "alloc 1/2", "free t1", "alloc 1", "free prev t2"], "end": ["free t2"]},
      "steady_step": {"resident": ["1"], "before": [], "body": ["alloc 1", "free prev s0"], "end": ["free s0"]}})");
}

TEST(OptimizerTest, RecordedProgramRunsOncePerParameterWithCarriedObjects) {
  auto run = testing::Simulate(RecordedMlp(), Opts("cpu", "recorded", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kOptimizer), kParamBytes);
  EXPECT_EQ(LiveAtEnd(run.r.events, Category::kOptimizerState), kParamBytes);
  EXPECT_EQ(BuffersNamed(run.r.events, "l1.weight.MyOpt state 0").size(), 1u);
  // The most temporaries alive at once: l1.weight's carried t2 while l1.bias's t2 is made.
  EXPECT_EQ(MaxLiveOptimizerTemps(run.r.events), kW1 + kB1);
  EXPECT_EQ(LiveAtEnd(run.r.events, Category::kTemporary), 0);
}

TEST(OptimizerTest, RecordedSteadyStepReplacesTheResidentState) {
  SimOptions o = Opts("cpu", "recorded", "1.13");
  o.first_step = false;
  auto run = testing::Simulate(RecordedMlp(), o);
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kSetup), kParamBytes);
  EXPECT_EQ(AllocatedBytes(run.r.events, Category::kOptimizerState, Phase::kOptimizer), kParamBytes);
  EXPECT_EQ(LiveAtEnd(run.r.events, Category::kOptimizerState), kParamBytes);
}

TEST(OptimizerTest, RecordedNeedsAGraphThatCarriesOne) {
  auto run = testing::Simulate(MlpBody(), Opts("cpu", "recorded", "1.13"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("has no recorded optimizer"));
  EXPECT_THAT(run.error, HasSubstr("--optimizer FILE.py:CLASS"));
}

TEST(OptimizerTest, UnknownOptimizerIsAnError) {
  auto run = testing::Simulate(MlpBody(), Opts("cuda", "lion"));
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("lion"));
  EXPECT_THAT(run.error, HasSubstr("adam"));
}

}  // namespace
}  // namespace memsim
