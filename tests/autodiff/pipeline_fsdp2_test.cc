// Pipeline parallel × FSDP2 (--mesh pp=P,dp_shard=D): fully_shard on each stage's blocks and
// stage module, its hooks inside the schedule's microbatches, the grads reduced once by
// perform_reduce_grad (Notes [FSDP2] and [Pipeline parallel] in docs/parallel.md).
#include <gtest/gtest.h>

#include <set>

#include "lib/autodiff/setups/fsdp2.h"
#include "lib/autodiff/setups/pipeline.h"
#include "lib/io/graph_json.h"
#include "sim/ranks.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using testing::SimulateOk;
using test_data::TestDataPath;

Graph Cs336() {
  Result<Graph> g = LoadGraph(TestDataPath("traces_2_13/graphs/cs336_small.json"));
  EXPECT_TRUE(g.ok());
  return *std::move(g);
}

SimOptions PpFsdp2(const std::string& schedule, bool reshard, int rank) {
  SimOptions o = testing::PipelineOpts(2, schedule, 4, 4, 64);
  o.parallel.mesh.dp_shard = 2;
  o.parallel.world = 4;
  o.parallel.rank = rank;
  o.parallel.wrap_modules = {"layers.*"};
  o.parallel.fsdp2_reshard_after_forward = reshard;
  return o;
}

/// Allocations whose name contains |part|.
int Count(const EventStream& s, const std::string& part) {
  size_t n = 0;
  testing::AllocatedContaining(s, part, &n);
  return static_cast<int>(n);
}

TEST(PipelineFsdp2GroupsTest, EachStageShardsItsBlocksThenItsOwnRoot) {
  Graph g = Cs336();
  const SimResult r = SimulateOk(g, PpFsdp2("1f1b", false, 0));
  const BoundGraph* b = &r.bound;
  std::vector<std::string> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back("layers." + std::to_string(i));
  Result<PipelineStagePlan> s0 = PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 0, {});
  Result<PipelineStagePlan> s1 = PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 1, {});
  ASSERT_TRUE(s0.ok() && s1.ok());
  const PpStage& a = s0->local[0];
  const PpStage& z = s1->local[0];
  std::vector<Fsdp2Group> first = MakeFsdp2Groups(g, *b, blocks, 2, 0, a.begin, a.end);
  std::vector<Fsdp2Group> last = MakeFsdp2Groups(g, *b, blocks, 2, 0, z.begin, z.end);
  // 12 blocks split 6 / 6 (the embedding and the norm + head weigh one block each).
  ASSERT_EQ(first.size(), 7u);
  ASSERT_EQ(last.size(), 7u);
  EXPECT_EQ(first[0].module, "layers.0");
  EXPECT_EQ(last[0].module, "layers.6");
  // The roots: the embedding on the first stage; the final norm and the head on the last, whose
  // forward ends with the logits (the loss is outside the stage module).
  EXPECT_TRUE(first.back().root);
  EXPECT_EQ(first.back().params.size(), 1u);
  EXPECT_EQ(g.tensors[g.parameters[first.back().params[0]]].name, "token_embeddings.weight");
  EXPECT_EQ(last.back().params.size(), 2u);
  EXPECT_EQ(first.back().first, a.begin);
  EXPECT_LT(last.back().last, z.end - 1);
}

TEST(PipelineFsdp2StepTest, UnshardedOnceAndReducedOnceAfterTheLastMicrobatch) {
  Graph g = Cs336();
  SimResult r = SimulateOk(g, PpFsdp2("1f1b", /*reshard=*/false, 0));
  // reshard_after_forward=False (torchtitan's default with PP) and set_reshard_after_backward(False)
  // inside the schedule: each group all-gathers in microbatch 0's forward only; the grads
  // accumulate unsharded and perform_reduce_grad reduce-scatters each group once.
  EXPECT_EQ(Count(r.events, "all-gather output"), 7);
  EXPECT_EQ(Count(r.events, "reduce-scatter input"), 7);
  // reshard_after_forward=True: every forward of a microbatch whose backward has not yet left the
  // group unsharded gathers again (1F1B, stage 0: F0 F1 B0 F2 B1 F3 B2 B3: F0, F1 and B0).
  SimResult again = SimulateOk(g, PpFsdp2("1f1b", /*reshard=*/true, 0));
  EXPECT_GT(Count(again.events, "all-gather output"), 7);
  EXPECT_EQ(Count(again.events, "reduce-scatter input"), 7);
}

TEST(PipelineFsdp2StepTest, InterleavedUnshardsBothStagesBeforeTheFirstAction) {
  Graph g = Cs336();
  SimOptions o = PpFsdp2("interleaved1f1b", /*reshard=*/false, 0);
  o.optimizer = "sgd";
  o.parallel.pp_stages_per_rank = 2;
  SimResult r = SimulateOk(g, o);
  // Rank 0 holds stages 0 (the embedding and 3 blocks) and 2 (3 blocks): 7 groups, each gathered
  // once by the UNSHARD actions before 0F0 and reduce-scattered once by its stage's REDUCE_GRAD.
  EXPECT_EQ(Count(r.events, "all-gather output"), 7);
  EXPECT_EQ(Count(r.events, "reduce-scatter input"), 7);
  ASSERT_FALSE(r.events.actions.empty());
  EXPECT_EQ(r.events.actions[0].label, "0F0");
  int before = 0;
  for (size_t i = 0; i < r.events.actions[0].event; ++i)
    before += r.events.events[i].kind == EventKind::kAlloc &&
              r.events.buffers[r.events.events[i].buffer].name.find("all-gather output") != std::string::npos;
  EXPECT_EQ(before, 7);
}

TEST(PipelineFsdp2StepTest, OnCudaTheUnshardActionGathersOnTheCurrentStream) {
  Graph g = Cs336();
  auto streams = [&](const std::string& schedule, int per_rank) {
    SimOptions o = PpFsdp2(schedule, /*reshard=*/false, 0);
    o.optimizer = "sgd";
    o.profile = "cuda";
    o.parallel.pp_stages_per_rank = per_rank;
    SimResult r = SimulateOk(g, o);
    std::set<int> out;
    for (const Buffer& b : r.events.buffers)
      if (b.name.find("all-gather output") != std::string::npos) out.insert(b.stream);
    return out;
  };
  // Interleaved1F1B's runtime unshards each stage explicitly (unshard(async_op=True)): the
  // current stream. 1F1B leaves it to the pre-forward hook, an implicit unshard: the side stream.
  EXPECT_EQ(streams("interleaved1f1b", 2), (std::set<int>{0}));
  EXPECT_EQ(streams("1f1b", 1), (std::set<int>{kFsdp2AllGatherStream}));
}

TEST(PipelineFsdp2StepTest, RanksStandInForTheirStageAndDpShardCoordinate) {
  Graph g = Cs336();
  RunConfig c;
  c.sim = PpFsdp2("gpipe", false, 0);
  Result<std::vector<RankRun>> runs = RunRanks(g, c);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  // Even dims 0: the two dp_shard ranks of a stage are identical.
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ(runs->at(0).ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(runs->at(1).ranks, (std::vector<int>{2, 3}));
}

}  // namespace
}  // namespace memsim
