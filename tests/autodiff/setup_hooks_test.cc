// The step engine's hook points: a training setup plugged in through StepConfig::setups is
// called at every point, in engine order, and what it allocates appears in the event stream.
#include <gtest/gtest.h>

#include "lib/autodiff/state.h"
#include "lib/io/graph_json.h"
#include "sim/simulator.h"

namespace memsim {
namespace {

/// Records the hook calls and keeps a copy of every parameter grad until the optimizer step.
class RecordingSetup : public TrainingSetup {
 public:
  void OnSetup(StepState& s) override { calls.push_back("setup"); }
  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy* p) override {
    ++forward_ops;
    if (s.g.ops[o].name == drop_saving) p->save_for_backward = false;
  }
  void AfterForwardOp(StepState&, OpId) override { ++after_forward; }
  void BeforeBackwardNode(StepState&, OpId o) override { backward_order.push_back(o); }
  void AfterBackwardNode(StepState&, OpId) override { ++after_backward; }
  void OnGradReady(StepState& s, uint32_t k) override {
    copies.push_back(s.ledger.Alloc(s.ledger.bytes(s.param_grad[k]), "copy", Category::kTemporary));
  }
  void BeforeOptimizerStep(StepState& s) override {
    calls.push_back("before_step");
    for (auto c : copies) s.ledger.Unref(c);
  }
  void AfterOptimizerStep(StepState&) override { calls.push_back("after_step"); }

  std::string drop_saving;
  std::vector<std::string> calls;
  std::vector<OpId> backward_order;
  std::vector<Ledger::StorageId> copies;
  int forward_ops = 0, after_forward = 0, after_backward = 0;
};

struct Fixture {
  Graph g;
  SimResult r;
  StepConfig cfg;
};

Fixture Mlp() {
  Fixture f;
  f.g = *LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
  SimOptions opt;
  opt.optimizer = "sgd";
  f.r = *Simulate(f.g, opt);
  f.cfg.profile = &f.r.profile;
  f.cfg.optimizer = f.r.optimizer;
  f.cfg.frozen = f.r.frozen;
  return f;
}

int64_t Peak(const EventStream& s) {
  int64_t live = 0, peak = 0;
  for (const MemEvent& e : s.events) {
    live += (e.kind == EventKind::kAlloc ? 1 : -1) * s.bytes(e);
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(SetupHooksTest, EveryHookIsCalledInEngineOrderAndItsAllocationsAreEvents) {
  Fixture f = Mlp();
  RecordingSetup setup;
  f.cfg.setups = {&setup};
  auto with = SimulateStep(f.g, f.r.bound, f.cfg);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(setup.calls, (std::vector<std::string>{"setup", "before_step", "after_step"}));
  EXPECT_EQ(setup.forward_ops, static_cast<int>(f.g.ops.size()));
  EXPECT_EQ(setup.after_forward, setup.forward_ops);
  ASSERT_FALSE(setup.backward_order.empty());
  EXPECT_EQ(setup.after_backward, static_cast<int>(setup.backward_order.size()));
  EXPECT_EQ(setup.backward_order.front(), f.g.tensors[f.g.loss].producer) << "backward starts at the loss";
  EXPECT_EQ(setup.copies.size(), f.g.parameters.size()) << "one OnGradReady per trainable parameter";
  // Without the setup the stream has none of the copies, and peaks lower.
  f.cfg.setups.clear();
  auto without = SimulateStep(f.g, f.r.bound, f.cfg);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(with->buffers.size(), without->buffers.size() + f.g.parameters.size());
  EXPECT_GT(Peak(*with), Peak(*without));
}

/// Saves nothing for backward (what a checkpointed region does in forward).
class SaveNothing : public TrainingSetup {
  void BeforeForwardOp(StepState&, OpId, ForwardOpPolicy* p) override { p->save_for_backward = false; }
};

/// Live bytes right after the last forward event.
int64_t LiveAfterForward(const EventStream& s) {
  int64_t live = 0, at = 0;
  for (const MemEvent& e : s.events) {
    live += (e.kind == EventKind::kAlloc ? 1 : -1) * s.bytes(e);
    if (e.phase <= Phase::kForward) at = live;
  }
  return at;
}

TEST(SetupHooksTest, APolicyThatStopsSavingFreesActivationsInForward) {
  Fixture f = Mlp();
  auto base = SimulateStep(f.g, f.r.bound, f.cfg);
  ASSERT_TRUE(base.ok());
  SaveNothing setup;
  f.cfg.setups = {&setup};
  auto dropped = SimulateStep(f.g, f.r.bound, f.cfg);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->buffers.size(), base->buffers.size()) << "the same tensors are made";
  EXPECT_LT(LiveAfterForward(*dropped), LiveAfterForward(*base)) << "nothing is held for backward";
}

}  // namespace
}  // namespace memsim
