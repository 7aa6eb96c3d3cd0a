// GradScaler (--grad-scaler), model.half() (--dtype) and the training loop (--steps,
// --loop-holds, --zero-grad): Note [GradScaler], Note [Training loop] in docs/op-rules.md.
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/simulator.h"
#include "tests/autodiff/mlp_fixture.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/invariants.h"

namespace memsim {
namespace {

Graph Mlp() { return testing::ParseBody(testing::MlpBody()); }

using testing::SimulateOk;

/// (alloc phase, free phase or nullopt) of the one buffer named |name|; fails if not exactly one.
struct Life {
  Phase alloc = Phase::kSetup;
  std::optional<Phase> free;
  int64_t bytes = 0;
};
std::vector<Life> Lives(const EventStream& s, const std::string& name) {
  std::vector<Life> out;
  std::vector<int> idx(s.buffers.size(), -1);
  for (const MemEvent& e : s.events) {
    if (s.buffers[e.buffer].name != name) continue;
    if (e.kind == EventKind::kAlloc) {
      idx[e.buffer] = static_cast<int>(out.size());
      out.push_back({e.phase, std::nullopt, s.buffers[e.buffer].bytes});
    } else {
      out[idx[e.buffer]].free = e.phase;
    }
  }
  return out;
}

TEST(GradScalerTest, ScaleAndTrackerStayScaledLossDiesWithBackwardUnscaleTemporariesInTheStep) {
  Graph g = Mlp();
  SimOptions opt;
  opt.amp = "fp16";  // the scaler is on by default with fp16
  SimResult r = SimulateOk(g, opt);
  for (const char* resident : {"GradScaler: scale", "GradScaler: growth tracker"}) {
    auto l = Lives(r.events, resident);
    ASSERT_EQ(l.size(), 1u) << resident;
    EXPECT_EQ(l[0].bytes, 4);
    EXPECT_FALSE(l[0].free.has_value()) << resident;  // kept for the run
  }
  for (const char* bwd : {"GradScaler: scaled loss", "GradScaler: scaled loss grad (seed)"}) {
    auto l = Lives(r.events, bwd);
    ASSERT_EQ(l.size(), 1u) << bwd;
    EXPECT_EQ(l[0].free, Phase::kBackward) << bwd;
  }
  auto dbl = Lives(r.events, "GradScaler: scale.double()");
  ASSERT_EQ(dbl.size(), 1u);
  EXPECT_EQ(dbl[0].bytes, 8);
  for (const char* step : {"GradScaler: scale.double()", "GradScaler: reciprocal", "GradScaler: inv_scale",
                           "GradScaler: found_inf"}) {
    auto l = Lives(r.events, step);
    ASSERT_EQ(l.size(), 1u) << step;
    EXPECT_EQ(l[0].alloc, Phase::kOptimizer) << step;
    EXPECT_EQ(l[0].free, Phase::kOptimizer) << step;
  }
  // Nothing grad-sized: unscaling works in place.
  for (const Buffer& b : r.events.buffers)
    if (b.name.starts_with("GradScaler")) {
      EXPECT_LE(b.bytes, 8) << b.name;
    }
  // Off: none of it; bf16 has no scaler unless asked; a steady step finds scale and tracker resident.
  opt.grad_scaler = "off";
  EXPECT_TRUE(Lives(SimulateOk(g, opt).events, "GradScaler: scale").empty());
  opt.grad_scaler = "";
  opt.amp = "bf16";
  EXPECT_TRUE(Lives(SimulateOk(g, opt).events, "GradScaler: scale").empty());
  opt.grad_scaler = "on";
  opt.first_step = false;
  auto steady = Lives(SimulateOk(g, opt).events, "GradScaler: scale");
  ASSERT_EQ(steady.size(), 1u);
  EXPECT_EQ(steady[0].alloc, Phase::kSetup);
  opt.grad_scaler = "maybe";
  EXPECT_FALSE(Simulate(g, opt).ok());
}

TEST(ModelDtypeTest, HalfModelHalvesParametersGradsAndOptimizerState) {
  Graph g = Mlp();
  SimOptions opt;
  opt.optimizer = "adam";
  SimResult fp32 = SimulateOk(g, opt);
  opt.dtype = "fp16";
  SimResult half = SimulateOk(g, opt);
  // Setup holds parameters (and the input x): all floating tensors are half the size.
  EXPECT_EQ(half.peak.breakdown_at_peak[int(Category::kParameter)] * 2,
            fp32.peak.breakdown_at_peak[int(Category::kParameter)]);
  auto grad = Lives(half.events, "l1.weight.grad");
  ASSERT_EQ(grad.size(), 1u);
  EXPECT_EQ(grad[0].bytes, testing::kW1 / 2);
  for (const Buffer& b : half.events.buffers) {
    if (b.category == Category::kOptimizerState && b.name.find("l1.weight") != std::string::npos && b.bytes > 8) {
      EXPECT_EQ(b.bytes, testing::kW1 / 2) << b.name;
    }
  }
  for (const Buffer& b : half.events.buffers)
    if (b.name == "t") {
      EXPECT_EQ(b.bytes, 8 * 8);  // integer inputs keep their dtype
    }
  EXPECT_LT(half.peak.peak_live_bytes, fp32.peak.peak_live_bytes);
  opt.dtype = "fp8";
  EXPECT_FALSE(Simulate(g, opt).ok());
}

SimOptions Loop(int steps) {
  SimOptions opt;
  opt.optimizer = "adam";
  opt.profile = "cpu";
  opt.torch = "1.13";
  opt.steps = steps;
  return opt;
}

TEST(TrainingLoopTest, FirstStepSpikeThenASteadyState) {
  Graph g = Mlp();
  SimResult one = SimulateOk(g, Loop(1));
  EXPECT_TRUE(one.peak.step_peaks.empty());
  SimResult r = SimulateOk(g, Loop(3));
  ASSERT_EQ(r.peak.step_peaks.size(), 3u);
  ASSERT_EQ(r.peak.step_end_bytes.size(), 3u);
  // The first step is the single-step simulation; steps 2 and 3 are identical.
  EXPECT_EQ(r.peak.step_peaks[0], one.peak.peak_live_bytes);
  EXPECT_EQ(r.peak.step_peaks[1], r.peak.step_peaks[2]);
  EXPECT_EQ(r.peak.step_end_bytes[0], one.peak.final_bytes);
  EXPECT_EQ(r.peak.step_end_bytes[1], r.peak.step_end_bytes[0]);
  // Adam's state is made once, in the first step, and never freed.
  size_t states = 0;
  for (size_t i = 0; i < r.events.events.size(); ++i) {
    const MemEvent& e = r.events.events[i];
    if (r.events.buffers[e.buffer].category != Category::kOptimizerState) continue;
    EXPECT_EQ(e.kind, EventKind::kAlloc);
    EXPECT_LT(i, r.events.step_starts[1]);
    ++states;
  }
  EXPECT_GE(states, 2 * g.parameters.size());
  SimOptions bad = Loop(0);
  EXPECT_FALSE(Simulate(g, bad).ok());
}

TEST(TrainingLoopTest, ZeroGradModesKeepOrFreeTheGrads) {
  Graph g = Mlp();
  SimResult none_freed = SimulateOk(g, Loop(2));
  SimOptions opt = Loop(2);
  opt.zero_grad = "zeros";
  SimResult zeros = SimulateOk(g, opt);
  EXPECT_EQ(zeros.peak.step_end_bytes[1], none_freed.peak.step_end_bytes[1] + testing::kParamBytes);
  // The second backward adds into the kept .grad: no new .grad is made in step 2.
  size_t grads = 0;
  for (const Buffer& b : zeros.events.buffers)
    if (b.name.ends_with(".weight.grad") || b.name.ends_with(".bias.grad")) ++grads;
  size_t grads_freed_each_step = 0;
  for (const Buffer& b : none_freed.events.buffers)
    if (b.name.ends_with(".weight.grad") || b.name.ends_with(".bias.grad")) ++grads_freed_each_step;
  EXPECT_EQ(grads_freed_each_step, 2 * g.parameters.size());
  EXPECT_EQ(grads, 2 * g.parameters.size());  // made in step 2 and added in place (then freed)
  opt.zero_grad = "none";
  EXPECT_EQ(SimulateOk(g, opt).peak.step_end_bytes[1], zeros.peak.step_end_bytes[1]);
  opt.zero_grad = "sometimes";
  EXPECT_FALSE(Simulate(g, opt).ok());
}

TEST(TrainingLoopTest, LoopHoldsOutputUntilTheNextForwardRebindsIt) {
  Graph g = Mlp();
  SimOptions opt = Loop(3);
  opt.loop_holds = "output";
  SimResult r = SimulateOk(g, opt);
  auto loss = Lives(r.events, "loss");
  ASSERT_EQ(loss.size(), 3u);
  // Steps 1 and 2's loss die in the next step's forward; the last is still held at the end.
  EXPECT_EQ(loss[0].free, Phase::kForward);
  EXPECT_EQ(loss[1].free, Phase::kForward);
  EXPECT_FALSE(loss[2].free.has_value());
  SimResult del = SimulateOk(g, Loop(3));
  EXPECT_GE(r.peak.step_peaks[1], del.peak.step_peaks[1]);
  EXPECT_EQ(r.peak.step_end_bytes[2], del.peak.step_end_bytes[2] + 4);  // the fp32 0-dim loss
  opt.loop_holds = "everything";
  EXPECT_FALSE(Simulate(g, opt).ok());
}

TEST(TrainingLoopTest, LoopHoldingTheLossAloneDropsTheOutputBeforeBackward) {
  Graph g = testing::ParseBody(testing::MlpBody(R"(, "outputs": ["logits"])"));
  ASSERT_EQ(g.outputs.size(), 1u);
  const std::string out = g.tensors[g.outputs[0]].name;
  SimOptions opt = Loop(2);
  SimResult held = SimulateOk(g, opt);
  opt.loop_holds = "loss";
  SimResult loss = SimulateOk(g, opt);
  // `loss = loss_fn(model(x), y)`: the output dies in forward, once the loss is made; held by
  // `out` (the default) it lives until `del out, loss` after backward.
  ASSERT_EQ(Lives(loss.events, out).size(), 2u);
  EXPECT_EQ(Lives(loss.events, out)[0].free, Phase::kForward);
  EXPECT_EQ(Lives(held.events, out)[0].free, Phase::kBackward);
  EXPECT_LE(loss.peak.phase_peaks[static_cast<int>(Phase::kBackward)],
            held.peak.phase_peaks[static_cast<int>(Phase::kBackward)]);
  EXPECT_EQ(loss.peak.step_end_bytes[1], held.peak.step_end_bytes[1]);  // nothing leaks either way
}

}  // namespace
}  // namespace memsim
