// The collectives of tensor and sequence parallelism (lib/ops/rules_collective.cc, Note [Tensor
// parallel]): the functional collectives' new outputs, the staging tensor off dim 0, and what each
// backward allocates for the grad.
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::Opts;

// x0 [2, S, 8] -> linear (so x requires grad) -> x -> COLLECTIVE -> y -> mean.
std::string Body(const std::string& op, int64_t seq, const std::string& attrs) {
  return R"("inputs": [{"name": "x0", "shape": [2, )" + std::to_string(seq) + R"(, 8]}],
      "parameters": [{"name": "w", "shape": [8, 8]}],
      "ops": [{"op": "linear", "inputs": ["x0", "w"], "outputs": ["x"]},
              {"op": ")" + op + R"(", "inputs": ["x"], "outputs": ["y"], "attrs": {"world": 2)" + attrs + R"(}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

int64_t Allocated(const testing::Run& run, const std::string& part) {
  return testing::AllocatedContaining(run.r.events, part);
}

/// The bytes of the output y itself (names containing "y" are y, y.grad, y:staging and gloo's work copy).
int64_t Output(const testing::Run& run) {
  return Allocated(run, "y") - Allocated(run, "y.grad") - Allocated(run, "y:staging") - Allocated(run, "y:gloo");
}

TEST(CollectiveRuleTest, AllReduceClonesForwardAndPassesTheGradThrough) {
  auto run = testing::Simulate(Body("all_reduce", 4, ""), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Output(run), 2 * 4 * 8 * 4);  // the clone reduced in place
  EXPECT_EQ(Allocated(run, "x.grad"), 0);        // Replicate → Partial: no communication
}

TEST(CollectiveRuleTest, GradAllReduceIsFreeForwardAndAllReducesTheGrad) {
  auto run = testing::Simulate(Body("grad_all_reduce", 4, ""), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Output(run), 0);  // y is x itself
  EXPECT_EQ(Allocated(run, "x.grad"), 2 * 4 * 8 * 4);          // the Partial grad all-reduced into a new tensor
}

TEST(CollectiveRuleTest, AllGatherOnTheSequenceStagesTheGatheredChunks) {
  auto run = testing::Simulate(Body("all_gather", 4, R"(, "dim": 1)"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t shard = 2 * 4 * 8 * 4, full = 2 * shard;
  EXPECT_EQ(Allocated(run, "staging"), full + full);  // forward gather on dim 0; backward cat before the scatter
  EXPECT_EQ(Allocated(run, "x.grad"), shard);         // reduce-scattered
  EXPECT_EQ(Output(run), full);
}

// _maybe_view_chunk_cat (torch/_utils.py, 2.x): with every dim before the gather dim of size 1 (a
// microbatch of one sequence), the gathered buffer itself is the output: no staging, forward or
// for the reduce-scatter's grad.
std::string BatchOneBody(const std::string& op) {
  return R"("inputs": [{"name": "x0", "shape": [1, 4, 8]}], "parameters": [{"name": "w", "shape": [8, 8]}],
      "ops": [{"op": "linear", "inputs": ["x0", "w"], "outputs": ["x"]},
              {"op": ")" + op + R"(", "inputs": ["x"], "outputs": ["y"], "attrs": {"world": 2, "dim": 1}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(CollectiveRuleTest, AllGatherOfOneSequenceIsAViewOfTheGatheredBuffer) {
  auto run = testing::Simulate(BatchOneBody("all_gather"), Opts("cuda"));
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t shard = 4 * 8 * 4;
  EXPECT_EQ(Output(run), 2 * shard);
  EXPECT_EQ(Allocated(run, "staging"), 2 * shard);  // only the backward's cat before the reduce-scatter
}

TEST(CollectiveRuleTest, ReduceScatterOfOneSequenceGathersItsGradWithoutStaging) {
  auto run = testing::Simulate(BatchOneBody("reduce_scatter"), Opts("cuda"));
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t full = 4 * 8 * 4;
  EXPECT_EQ(Allocated(run, "staging"), full);  // only the forward's cat on dim 0
  EXPECT_EQ(Allocated(run, "x.grad"), full);
}

TEST(CollectiveRuleTest, ReduceScatterOnTheSequence) {
  auto run = testing::Simulate(Body("reduce_scatter", 4, R"(, "dim": 1)"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t full = 2 * 4 * 8 * 4, shard = full / 2;
  EXPECT_EQ(Allocated(run, "staging"), full + full);  // forward cat on dim 0; backward gathered grad
  EXPECT_EQ(Allocated(run, "x.grad"), full);          // all-gathered
  EXPECT_EQ(Output(run), shard);
  // gloo all-reduces a copy of the whole input, kept by its work until y is first read (the mean)
  EXPECT_EQ(Allocated(run, "gloo reduce-scatter work copy"), full);
  auto cuda = testing::Simulate(Body("reduce_scatter", 4, R"(, "dim": 1)"), Opts("cuda"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_EQ(Allocated(cuda, "gloo reduce-scatter work copy"), 0);
}

TEST(CollectiveRuleTest, ReduceScatterRefusesAnIndivisibleDim) {
  auto run = testing::Simulate(Body("reduce_scatter", 3, R"(, "dim": 1)"), Opts("cpu"));
  ASSERT_FALSE(run.ok);
  EXPECT_NE(run.error.find("not divisible by the 2 ranks"), std::string::npos) << run.error;
}

}  // namespace
}  // namespace memsim
