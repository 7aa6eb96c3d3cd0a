// Long accumulation from its first passes (sim/plan/steady.h, Note [Steady accumulation]): the
// shortened row is the row of every pass, for every setup the planner searches.
#include "sim/plan/steady.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/options/plan_options.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ZooGraph;

void ExpectSameRow(const SweepRow& a, const SweepRow& b, const std::string& what) {
  ASSERT_TRUE(a.status.ok()) << what << ": " << a.status.message();
  ASSERT_TRUE(b.status.ok()) << what << ": " << b.status.message();
  EXPECT_EQ(a.oom, b.oom) << what;
  EXPECT_EQ(a.oom_op, b.oom_op) << what;
  EXPECT_EQ(a.verdict, b.verdict) << what;
  EXPECT_EQ(a.peak_live_bytes, b.peak_live_bytes) << what;
  EXPECT_EQ(a.peak_phase, b.peak_phase) << what;
  EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes) << what;
  EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes) << what;
  EXPECT_EQ(a.peak_device_used_bytes, b.peak_device_used_bytes) << what;
  EXPECT_EQ(a.device_low_bytes, b.device_low_bytes) << what;
  EXPECT_EQ(a.device_high_bytes, b.device_high_bytes) << what;
}

TEST(SteadyAccumulation, ShortenedRowsAreTheRowsOfEveryPass) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  const std::vector<std::vector<std::string>> setups = {
      {},
      {"--amp", "bf16"},
      {"--amp", "fp16"},
      {"--dtype", "bf16"},
      {"--checkpoint", "@blocks"},
      {"--checkpoint", "@blocks%2=0", "--amp", "bf16"},
      {"--checkpoint", "@blocks", "--sac", "torchtitan"},
      {"--ddp", "2"},
      {"--world", "2", "--zero", "1"},
      {"--world", "2", "--zero", "2", "--amp", "bf16"},
      {"--world", "2", "--zero", "3"},
      {"--world", "2", "--zero", "3", "--offload", "optimizer"},
      {"--world", "2", "--fsdp", "full", "--wrap", "@blocks"},
      {"--world", "2", "--fsdp", "grad-op", "--wrap", "@blocks", "--fsdp-mixed-precision", "bf16"},
      {"--world", "2", "--fsdp", "full", "--wrap", "@blocks", "--offload", "params"},
      {"--mesh", "dp_shard=2", "--wrap", "@blocks"},
      {"--mesh", "dp_shard=2", "--wrap", "@blocks", "--reshard-after-forward", "false", "--fsdp2-mp", "param=bf16,reduce=fp32"},
  };
  size_t shortened = 0, rows = 0, ooms = 0;
  for (const std::vector<std::string>& setup : setups) {
    for (const char* batch : {"2", "24"}) {  // a T4 holds the first, not the second
      std::vector<std::string> args = {"--gpu", "T4", "--optimizer", "adamw", "--batch", batch, "--accumulate", "8"};
      args.insert(args.end(), setup.begin(), setup.end());
      Result<RunConfig> c = cli::RunConfigOfArgs(args);
      ASSERT_TRUE(c.ok()) << c.status().message();
      c->need_after_oom = false;  // as the planner runs them
      std::string what;
      for (const std::string& a : args) what += a + " ";
      bool few = false;
      const SweepRow steady = SteadyRow(g, *c, &few);
      ExpectSameRow(steady, RunOne(g, *c), what);
      shortened += few;
      ooms += steady.oom;
      ++rows;
    }
  }
  // The shortcut is taken for most of them (else this test checks nothing), fitting or not.
  EXPECT_GE(shortened, rows * 3 / 4);
  EXPECT_GT(ooms, 0u);
  EXPECT_LT(ooms, rows);
}

TEST(SteadyAccumulation, TensorParallelRanks) {
  Graph g = ZooGraph("llama_1b");
  for (int rank : {0, 1}) {
    Result<RunConfig> c = cli::RunConfigOfArgs({"--gpu", "T4", "--optimizer", "adamw", "--batch", "1", "--accumulate",
                                                "8", "--dtype", "bf16", "--mesh", "tp=2", "--tp-plan", "layers"});
    ASSERT_TRUE(c.ok()) << c.status().message();
    c->need_after_oom = false;
    c->sim.parallel.rank = rank;
    bool few = false;
    const SweepRow steady = SteadyRow(g, *c, &few);
    EXPECT_TRUE(few);
    ExpectSameRow(steady, RunOne(g, *c), "tp=2 rank " + std::to_string(rank));
  }
}

TEST(SteadyAccumulation, ShortOrUncheckableRunsTakeEveryPass) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  // Five passes or fewer, several steps, an alloc_conf: simulated whole.
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"--accumulate", "5"}, {"--accumulate", "8", "--steps", "2"},
           {"--accumulate", "8", "--alloc-conf", "expandable_segments:True"}}) {
    std::vector<std::string> args = {"--gpu", "T4", "--batch", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    Result<RunConfig> c = cli::RunConfigOfArgs(args);
    ASSERT_TRUE(c.ok()) << c.status().message();
    bool few = true;
    const SweepRow steady = SteadyRow(g, *c, &few);
    EXPECT_FALSE(few);
    ExpectSameRow(steady, RunOne(g, *c), args.back());
  }
}

TEST(SteadyAccumulation, PassesRepeatModuloTheirOwnBuffers) {
  EventStream es;
  // Buffer 0 lives across the passes; each pass makes and frees one buffer of 16 bytes.
  es.buffers = {{"w", 8, Category::kParameter, kNoOp, ""}, {"a1", 16, Category::kActivation, 0, ""},
                {"a2", 16, Category::kActivation, 0, ""}, {"a3", 32, Category::kActivation, 0, ""}};
  es.events = {{EventKind::kAlloc, Phase::kSetup, 0, kNoOp},
               {EventKind::kAlloc, Phase::kForward, 1, 0}, {EventKind::kFree, Phase::kBackward, 1, 0},
               {EventKind::kAlloc, Phase::kForward, 2, 0}, {EventKind::kFree, Phase::kBackward, 2, 0},
               {EventKind::kAlloc, Phase::kForward, 3, 0}, {EventKind::kFree, Phase::kBackward, 3, 0}};
  const PassMarks m = PassMarksOf(es);
  ASSERT_EQ(m.pass_starts, (std::vector<size_t>{3, 5}));
  EXPECT_EQ(m.optimizer_start, es.events.size());
  EXPECT_TRUE(SamePass(es, 1, 3, 5));
  EXPECT_FALSE(SamePass(es, 3, 5, 7));  // 32 bytes, not 16
  AllocatorOptions ao;
  const std::vector<std::vector<int64_t>> st = AllocatorStatesAt(es, ao, {3, 5});
  ASSERT_EQ(st.size(), 2u);
  EXPECT_FALSE(st[0].empty());
  EXPECT_EQ(st[0], st[1]);  // the pass's block went back to the cache where it came from
}

}  // namespace
}  // namespace memsim
