// A torch.compile region (lib/ops/rules_compiled.cc, Note [Compiled regions]): one autograd node
// whose forward and backward replay the buffer programs the exporter read from Inductor's
// wrappers; the partitioner's saved set is what the node keeps, each saved buffer dies where the
// backward wrapper drops its last name, and a region exported for other sizes is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace memsim
