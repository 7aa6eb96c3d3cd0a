// A torch.compile region (lib/ops/rules_compiled.cc, Note [Compiled regions]): one autograd node
// whose forward and backward replay the buffer programs the exporter read from Inductor's
// wrappers; the partitioner's saved set is what the node keeps, each saved buffer dies where the
// backward wrapper drops its last name, and a region exported for other sizes is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/ir/compiled_budget.h"
#include "lib/ir/compiled_recompute.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using ::testing::ElementsAre;
using testing::Opts;

// w [8, 8] (256 bytes), x [rows, 8] -> compiled region -> y [4, 8] -> mean. Forward: fwd.buf0 is a
// scratch buffer freed within the region, fwd.buf1 is saved, fwd.buf2 is y. Backward: bwd.buf0 a
// temporary, bwd.buf1 w's grad; the incoming grad goes first (G), then saved fwd.buf1 (R1).
std::string Region(int rows = 4) {
  return R"("inputs": [{"name": "x", "shape": [)" + std::to_string(rows) + R"(, 8]}],
      "parameters": [{"name": "w", "shape": [8, 8]}],
      "ops": [{"op": "compiled", "name": "region", "inputs": ["w", "x"], "outputs": ["y"], "attrs": {
                 "fwd_bytes": [128, 128, 128], "fwd_names": "fwd.buf0 fwd.buf1 fwd.buf2",
                 "fwd_program": "A0 A1 F0 A2", "fwd_outputs": [2], "saved": "i1 b1",
                 "bwd_bytes": [128, 256], "bwd_names": "bwd.buf0 bwd.buf1", "bwd_program": "A0 G A1 R1 F0",
                 "bwd_grads": [1, -1], "input_bytes": [256, 128], "out0_shape": [4, 8], "out0_dtype": "float32"}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(CompiledRuleTest, KeepsThePartitionersSavedSet) {
  auto run = testing::Simulate(Region(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "region"), ElementsAre("x", "extra:fwd.buf1"));
  EXPECT_EQ(testing::SavedActivationBytes(run, "region"), 128);
}

TEST(CompiledRuleTest, ReplaysTheForwardAndBackwardPrograms) {
  auto run = testing::Simulate(Region(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const EventStream& s = run.r.events;
  auto scratch = testing::Lives(s, "region:fwd.buf0");
  ASSERT_EQ(scratch.size(), 1u);
  EXPECT_EQ(scratch[0].alloc, Phase::kForward);
  EXPECT_EQ(scratch[0].free, Phase::kForward);  // del buf0 inside the region
  auto saved = testing::Buffer(s, "region:fwd.buf1");
  auto temp = testing::Buffer(s, "region:bwd.buf0");
  auto grad = testing::Buffer(s, "w.grad");
  ASSERT_TRUE(saved && temp && grad);
  EXPECT_EQ(testing::FreeEvent(s, *saved)->phase, Phase::kBackward);
  // A1 (w's grad), then R1 (the saved buffer's last name), then F0 (the temporary)
  EXPECT_LT(testing::AllocIndex(s, *grad), testing::FreeIndex(s, *saved));
  EXPECT_LT(testing::FreeIndex(s, *saved), testing::FreeIndex(s, *temp));
  EXPECT_EQ(testing::AllocatedContaining(s, "w.grad"), 256);
}

TEST(CompiledRecomputeTest, NamesTheBackwardBuffersHoldingRecomputedValues) {
  std::string body = Region();
  body.replace(body.find(R"("bwd_grads")"), 0, R"("bwd_recomputed": "bwd.buf0=addmm,relu", )");
  Graph g = testing::ParseBody(body);
  const Op& region = g.ops[testing::OpNamed(g, "region")];
  auto got = RecomputedBuffers(region);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].buffer, "bwd.buf0");
  EXPECT_EQ(got[0].bytes, 128);  // its bwd_bytes
  EXPECT_THAT(got[0].nodes, ElementsAre("addmm", "relu"));
  EXPECT_EQ(RecomputedNodesOf(region, "bwd.buf0"), "addmm, relu");
  EXPECT_EQ(RecomputedNodesOf(region, "bwd.buf1"), std::nullopt);  // w's grad: computed, not recomputed
  EXPECT_TRUE(RecomputedBuffers(testing::ParseBody(Region()).ops[0]).empty());  // an export without the key
}

TEST(CompiledRuleTest, RefusesOtherSizesThanTheExports) {
  auto run = testing::Simulate(Region(/*rows=*/5), Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.error.find("re-export with --compile"), std::string::npos) << run.error;
}

TEST(CompiledRuleTest, RefusesAMalformedProgram) {
  std::string body = Region();
  body.replace(body.find("A0 G A1 R1 F0"), 13, "A0 G A1 R7 F0");
  auto run = testing::Simulate(body, Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.error.find("bad token \"R7\""), std::string::npos) << run.error;
}

// Two regions with a graph break between them: region0 (w0, x) -> h, region1 (w1, h) -> y. The
// second saves its input h (i1), so h lives into backward; its grad is region1's bwd.buf0, which
// region0's backward takes as its incoming grad (G). Both record budgets 1 and 0 (r0's programs
// are the same for both: no mb0: keys).
const char* kTwoRegions = R"("inputs": [{"name": "x", "shape": [4, 8]}],
    "parameters": [{"name": "w0", "shape": [8, 8]}, {"name": "w1", "shape": [8, 8]}],
    "ops": [{"op": "compiled", "name": "r0", "inputs": ["w0", "x"], "outputs": ["h"], "attrs": {
               "fwd_bytes": [128], "fwd_names": "fwd.buf0", "fwd_program": "A0", "fwd_outputs": [0], "saved": "i1",
               "bwd_bytes": [256], "bwd_names": "bwd.buf0", "bwd_program": "A0 G R0", "bwd_grads": [0, -1],
               "input_bytes": [256, 128], "out0_shape": [4, 8], "out0_dtype": "float32", "memory_budgets": "1 0"}},
             {"op": "compiled", "name": "r1", "inputs": ["w1", "h"], "outputs": ["y"], "attrs": {
               "fwd_bytes": [128], "fwd_names": "fwd.buf0", "fwd_program": "A0", "fwd_outputs": [0], "saved": "i1",
               "bwd_bytes": [256, 128], "bwd_names": "bwd.buf0 bwd.buf1", "bwd_program": "A0 A1 G R0",
               "bwd_grads": [0, 1], "input_bytes": [256, 128], "out0_shape": [4, 8], "out0_dtype": "float32",
               "memory_budget": 1.0, "memory_budgets": "1 0", "mb0:fwd_bytes": [128, 128],
               "mb0:fwd_program": "A0 A1 F1", "mb0:fwd_names": "fwd.buf0 fwd.buf1", "mb0:saved": "i1"}},
             {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";

TEST(CompiledRuleTest, ChainsRegionsAcrossAGraphBreak) {
  auto run = testing::Simulate(kTwoRegions, Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "r1"), ElementsAre("h"));
  const EventStream& s = run.r.events;
  auto h = testing::Buffer(s, "h");
  auto hgrad = testing::Buffer(s, "h.grad");
  auto w0grad = testing::Buffer(s, "w0.grad");
  ASSERT_TRUE(h && hgrad && w0grad) << testing::Dump(s);
  EXPECT_EQ(testing::FreeEvent(s, *h)->phase, Phase::kBackward);  // saved by r1 until its backward
  EXPECT_LT(testing::AllocIndex(s, *hgrad), testing::AllocIndex(s, *w0grad));  // r1's backward, then r0's
  EXPECT_LT(testing::AllocIndex(s, *w0grad), testing::FreeIndex(s, *hgrad));   // r0 drops it after A0 (G)
}

// A transposed weight grad (grad0_strides [1, 64]: Inductor's mm wrote the grad's transpose):
// AccumulateGrad copies it into w's row-major layout, on the CPU through a 60 x 60 block buffer.
TEST(CompiledRuleTest, CopiesATransposedGradIntoTheParametersLayout) {
  const char* body = R"("inputs": [{"name": "x", "shape": [4, 64]}],
      "parameters": [{"name": "w", "shape": [64, 64]}],
      "ops": [{"op": "compiled", "name": "region", "inputs": ["w", "x"], "outputs": ["y"], "attrs": {
                 "fwd_bytes": [1024], "fwd_names": "fwd.buf0", "fwd_program": "A0", "fwd_outputs": [0], "saved": "i1",
                 "bwd_bytes": [16384], "bwd_names": "bwd.buf0", "bwd_program": "A0 G R0", "bwd_grads": [0, -1],
                 "grad0_strides": [1, 64], "input_bytes": [16384, 1024], "out0_shape": [4, 64], "out0_dtype": "float32"}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  auto cpu = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(cpu.ok) << cpu.error;
  EXPECT_EQ(testing::BuffersNamed(cpu.r.events, "w.grad").size(), 2u) << testing::Dump(cpu.r.events);
  EXPECT_EQ(testing::AllocatedContaining(cpu.r.events, "w.grad copy block"), 60 * 60 * 4);
  auto cuda = testing::Simulate(body, Opts("cuda"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_EQ(testing::AllocatedContaining(cuda.r.events, "w.grad copy block"), 0);
}

TEST(CompiledBudgetTest, SelectsTheRecordedProgram) {
  Graph g = testing::ParseBody(kTwoRegions);
  auto r1 = [](const Graph& x) { return x.ops[testing::OpNamed(x, "r1")]; };
  EXPECT_EQ(RecordedMemoryBudgets(r1(g)), (std::vector<std::string>{"1", "0"}));
  auto zero = SelectMemoryBudget(g, "0");
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  EXPECT_EQ(r1(*zero).attrs.GetString("fwd_program", ""), "A0 A1 F1");
  EXPECT_EQ(r1(*zero).attrs.GetFloat("memory_budget", -1), 0.0);
  auto sim = testing::SimulateOk(*zero, Opts("cpu"));
  EXPECT_EQ(testing::AllocatedContaining(sim.events, "r1:fwd.buf1"), 128);
  auto one = SelectMemoryBudget(g, "1.0");  // the default program, the same number spelled otherwise
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(r1(*one).attrs.GetString("fwd_program", ""), "A0");
}

TEST(CompiledBudgetTest, NamesTheExportThatRecordsAnotherBudget) {
  Graph g = testing::ParseBody(kTwoRegions);
  auto r = SelectMemoryBudget(g, "0.5");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(r0) records the partitioner's programs for budgets 1, 0 only: re-export with "
                                      "`export_torch.py MODEL --compile --memory-budget 1,0,0.5`"),
            std::string::npos) << r.status().message();
  // a region that lists no budgets records its export's one (memory_budget, default 1)
  Graph one = testing::ParseBody(Region());
  EXPECT_EQ(RecordedMemoryBudgets(one.ops[0]), (std::vector<std::string>{"1"}));
  EXPECT_NE(SelectMemoryBudget(one, "0").status().message().find("program for budget 1 only"), std::string::npos);
  EXPECT_FALSE(SelectMemoryBudget(g, "2").ok());
  EXPECT_FALSE(SelectMemoryBudget(testing::ParseBody(R"("inputs": [{"name": "x", "shape": [4]}],
      "ops": [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}])"), "0").ok());
}

}  // namespace
}  // namespace memsim
