// Training setups: gradient accumulation, clip_grad_norm_, activation checkpointing.
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/invariants.h"

namespace memsim {
namespace {

using testing::ZooGraph;


using testing::SimulateOk;

size_t Count(const EventStream& s, EventKind kind, const std::string& name_part) {
  size_t n = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == kind && s.buffers[e.buffer].name.find(name_part) != std::string::npos) ++n;
  return n;
}

TEST(AccumulateTest, SecondPassAddsIntoTheExistingGradInPlace) {
  Graph g = ZooGraph("mlp");
  SimOptions opt;
  opt.symbols["batch"] = 32;
  opt.optimizer = "sgd";
  SimResult one = SimulateOk(g, opt);
  opt.accumulate = 3;
  SimResult three = SimulateOk(g, opt);
  // Forward and backward run three times; the parameters' .grad are freed once, by zero_grad.
  EXPECT_EQ(Count(three.events, EventKind::kAlloc, ":out"), 3 * Count(one.events, EventKind::kAlloc, ":out"));
  size_t grads_freed_in_step = 0;
  for (const MemEvent& e : three.events.events)
    if (e.kind == EventKind::kFree && e.phase == Phase::kOptimizer &&
        three.events.buffers[e.buffer].category == Category::kGradient)
      ++grads_freed_in_step;
  EXPECT_EQ(grads_freed_in_step, g.parameters.size());
  // Grads of later passes never outlive their pass: the peak grows by at most one pass's grads.
  EXPECT_GE(three.peak.peak_live_bytes, one.peak.peak_live_bytes);
  opt.accumulate = 0;
  EXPECT_FALSE(Simulate(g, opt).ok());
}

TEST(ClipGradNormTest, NormsStackAndScalarsAreTemporariesOfTheStepPhase) {
  Graph g = ZooGraph("mlp");
  SimOptions opt;
  opt.symbols["batch"] = 8;
  opt.optimizer = "sgd";
  opt.clip_grad_norm = 1.0;
  SimResult r = SimulateOk(g, opt);
  EXPECT_EQ(Count(r.events, EventKind::kAlloc, "clip_grad_norm_: norm"), g.parameters.size());
  size_t stack_bytes = 0;
  for (const Buffer& b : r.events.buffers)
    if (b.name == "clip_grad_norm_: stack") stack_bytes = b.bytes;
  EXPECT_EQ(stack_bytes, 4 * g.parameters.size());
  EXPECT_EQ(Count(r.events, EventKind::kFree, "clip_grad_norm_"), Count(r.events, EventKind::kAlloc, "clip_grad_norm_"));
  opt.clip_grad_norm = -1;
  EXPECT_FALSE(Simulate(g, opt).ok());
}

TEST(CheckpointTest, ForwardKeepsLessAndTheRecomputationRunsInBackward) {
  Graph g = ZooGraph("resnet18");
  SimOptions opt;
  opt.symbols["batch"] = 2;
  opt.profile = "cpu";
  opt.torch = "1.13";
  SimResult plain = SimulateOk(g, opt);
  opt.checkpoint_globs = {"layer?.?"};
  SimResult ckpt = SimulateOk(g, opt);
  EXPECT_LT(ckpt.peak.phase_peaks[int(Phase::kForward)], plain.peak.phase_peaks[int(Phase::kForward)]);
  // Every checkpointed conv output is made twice, the second time in backward.
  std::string conv_out;
  for (const Op& op : g.ops)
    if (op.module == "layer1.0.conv1") conv_out = g.tensors[op.outputs[0]].name;
  ASSERT_FALSE(conv_out.empty());
  size_t recomputed = 0;
  for (const MemEvent& e : ckpt.events.events)
    if (e.kind == EventKind::kAlloc && e.phase == Phase::kBackward && ckpt.events.buffers[e.buffer].name == conv_out)
      ++recomputed;
  EXPECT_EQ(recomputed, 1u);
  // Eight blocks: eight forward RNG states and eight fork_rng states on CPU.
  EXPECT_EQ(Count(ckpt.events, EventKind::kAlloc, "checkpoint: forward RNG state"), 8u);
  EXPECT_EQ(Count(ckpt.events, EventKind::kAlloc, "checkpoint: fork_rng"), 8u);
  // The step after backward is unchanged: checkpointing leaves nothing behind.
  EXPECT_EQ(ckpt.peak.final_bytes, plain.peak.final_bytes);
  opt.profile = "cuda";
  SimResult cuda = SimulateOk(g, opt);
  EXPECT_EQ(Count(cuda.events, EventKind::kAlloc, "checkpoint:"), 0u) << "RNG states are host memory on CUDA";
  opt.checkpoint_globs = {"nosuchmodule*"};
  auto bad = Simulate(g, opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--checkpoint \"nosuchmodule*\" matches no module"), std::string::npos);
}

/// Index of the last event of |kind| on a buffer whose name contains |name_part| (or -1).
int LastEvent(const EventStream& s, EventKind kind, const std::string& name_part) {
  int last = -1;
  for (size_t i = 0; i < s.events.size(); ++i)
    if (s.events[i].kind == kind && s.buffers[s.events[i].buffer].name.find(name_part) != std::string::npos)
      last = static_cast<int>(i);
  return last;
}

int FirstEvent(const EventStream& s, EventKind kind, const std::string& name_part) {
  for (size_t i = 0; i < s.events.size(); ++i)
    if (s.events[i].kind == kind && s.buffers[s.events[i].buffer].name.find(name_part) != std::string::npos)
      return static_cast<int>(i);
  return -1;
}

TEST(CheckpointTest, ReentrantHoldsGradsOutputsAndRngStatesLonger) {
  Graph g = ZooGraph("resnet18");
  SimOptions opt;
  opt.symbols["batch"] = 2;
  opt.profile = "cpu";
  opt.torch = "1.13";
  opt.checkpoint_globs = {"layer?.?"};
  SimResult plain = SimulateOk(g, opt);
  opt.checkpoint_impl = "reentrant";
  SimResult reent = SimulateOk(g, opt);
  // The forward is the same (no_grad vs. saved-tensor hooks keep the same: the inputs, the RNG
  // state); so are the allocations: reentrancy only changes how long things live.
  EXPECT_EQ(reent.peak.phase_peaks[int(Phase::kForward)], plain.peak.phase_peaks[int(Phase::kForward)]);
  EXPECT_EQ(Count(reent.events, EventKind::kAlloc, ""), Count(plain.events, EventKind::kAlloc, ""));
  EXPECT_EQ(reent.peak.final_bytes, plain.peak.final_bytes);
  // The nested backward's `args` (incoming grad) and `outputs` (recomputed block output) live
  // through it: the backward peak grows by at least one block output (layer1: [2, 64, 56, 56] fp32).
  EXPECT_GE(reent.peak.phase_peaks[int(Phase::kBackward)], plain.peak.phase_peaks[int(Phase::kBackward)] + 2 * 64 * 56 * 56 * 4);
  // ctx.fwd_cpu_state lives with the graph: every forward RNG state is freed after the last
  // recomputation (at `del out, loss`); non-reentrant frees the first one before the last recomputation.
  const char* kFwd = "checkpoint: forward RNG state";
  const char* kFork = "checkpoint: fork_rng";
  EXPECT_EQ(Count(reent.events, EventKind::kFree, kFwd), 8u);
  EXPECT_GT(FirstEvent(reent.events, EventKind::kFree, kFwd), LastEvent(reent.events, EventKind::kFree, kFork));
  EXPECT_LT(FirstEvent(plain.events, EventKind::kFree, kFwd), LastEvent(plain.events, EventKind::kFree, kFork));
  opt.checkpoint_impl = "sometimes";
  auto bad = Simulate(g, opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--checkpoint-impl \"sometimes\""), std::string::npos);
}

}  // namespace
}  // namespace memsim
