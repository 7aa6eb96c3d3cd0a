// Context parallelism's ring attention (lib/ops/ring_attention.h, Note [Context parallel]): the
// ring's branches per rank, the shard shapes at seq/cp, and the chunk buffers each rank holds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/ops/ring_attention.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using ::testing::ElementsAre;

std::string Steps(int world, int rank, bool causal, bool lb) {
  std::string out;
  for (const RingStep& s : RingSteps(world, rank, causal, lb))
    out += s.skip ? "- " : std::string(s.q_halves == 1 ? "q" : "Q") + (s.kv_halves == 1 ? "k" : "K") + (s.partial ? "p" : "") + " ";
  return out;
}

TEST(RingStepsTest, HeadTailLoadBalancingHalvesKvBelowTheRankAndQAbove) {
  // _templated_ring_attention: step 0 whole; i <= rank: k, v chunk(2)[0]; i > rank: q chunk(2)[1], partial
  EXPECT_EQ(Steps(2, 0, true, true), "QK qKp ");
  EXPECT_EQ(Steps(2, 1, true, true), "QK Qk ");
  EXPECT_EQ(Steps(4, 2, true, true), "QK Qk Qk qKp ");
}

TEST(RingStepsTest, WithoutLoadBalancingLaterRanksChunksAreSkipped) {
  // _is_causal_behavior: source rank (rank - i) % world below rank: whole, else SKIP
  EXPECT_EQ(Steps(4, 0, true, false), "QK - - - ");
  EXPECT_EQ(Steps(4, 2, true, false), "QK QK QK - ");
  EXPECT_EQ(Steps(3, 1, false, false), "QK QK QK ");  // not causal: every step whole
}

// q, k, v [2, 4, seq, 16] fp32 (k, v with 2 heads), a CP buffer ids [2, seq], causal attention.
std::string RingBody() {
  return R"("symbols": {"seq": 64},
    "inputs": [{"name": "ids", "shape": [2, "seq"], "dtype": "int64"}],
    "parameters": [{"name": "q", "shape": [2, 4, "seq", 16]}, {"name": "k", "shape": [2, 2, "seq", 16]},
                   {"name": "v", "shape": [2, 2, "seq", 16]}],
    "ops": [{"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"], "outputs": ["y"], "attrs": {"is_causal": true}},
            {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

testing::Run RingRun(int cp, int rank, int64_t seq = 64) {
  SimOptions o = testing::Opts("cpu");
  o.parallel.mesh.cp = cp;
  o.parallel.world = cp;
  o.parallel.rank = rank;
  o.symbols["seq"] = seq;
  return testing::Simulate(RingBody(), o);
}

std::vector<int64_t> Bytes(const testing::Run& run, const std::string& label) {
  std::vector<int64_t> out;
  for (auto b : testing::BuffersContaining(run.r.events, label)) out.push_back(run.r.events.buffers[b].bytes);
  return out;
}

TEST(RingAttentionTest, EveryActivationIsTheRanksShardOfTheSequence) {
  auto run = RingRun(2, 0);
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t kv = (2 * 2 * 32 * 16) * 2 * 4;  // cat(k, v) of the local chunk, fp32
  // one all-gather of cp chunks for every step, in forward and again in backward
  EXPECT_THAT(Bytes(run, "ring all-gathered k, v"), ElementsAre(2 * kv, 2 * kv));
  // the batch stays whole (resize_ keeps the storage): 2 x 64 int64
  EXPECT_THAT(Bytes(run, "ids"), ElementsAre(2 * 64 * 8));
  // the shards the context keeps (one per buffer) and the last clone: 2 x 32 int64 each
  EXPECT_THAT(Bytes(run, "cp shard clone"), ElementsAre(2 * 32 * 8));
}

TEST(RingAttentionTest, BlocksFollowTheRanksBranches) {
  // rank 0 of 2: step 0 on the whole q (32 rows), step 1 on its second half (16 rows)
  auto r0 = RingRun(2, 0);
  ASSERT_TRUE(r0.ok) << r0.error;
  EXPECT_THAT(Bytes(r0, "ring block out"), ElementsAre(2 * 4 * 32 * 16 * 4, 2 * 4 * 16 * 16 * 4));
  EXPECT_EQ(Bytes(r0, "merged out (cat)").size(), 0u);  // the last merge's cat is the op's output
  // rank 1: both steps on the whole q (step 1 with half the K/V chunk)
  auto r1 = RingRun(2, 1);
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_THAT(Bytes(r1, "ring block out"), ElementsAre(2 * 4 * 32 * 16 * 4, 2 * 4 * 32 * 16 * 4));
  // backward: the dK/dV all-to-all (one received buffer before the last, which is the grads)
  EXPECT_THAT(Bytes(r1, "ring received dk, dv"), ElementsAre((2 * 2 * 32 * 16) * 2 * 4));
}

TEST(RingAttentionTest, CpMustDivideTheSequence) {
  auto run = RingRun(3, 0, 64);
  EXPECT_FALSE(run.ok);
  EXPECT_THAT(run.error, ::testing::HasSubstr("--mesh cp=3 does not divide seq 64"));
}

}  // namespace
}  // namespace memsim
