// nn.DataParallel's loss on device 0 runs at the whole batch over the gathered outputs, and the
// gathered outputs' grad is scattered back (Note [DataParallel] in docs/op-rules.md).
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SimulateOk;

/// The phase of the first free of a buffer named with |part|.
Phase FreedIn(const EventStream& s, const std::string& part) {
  for (const MemEvent& e : s.events)
    if (e.kind == EventKind::kFree && s.buffers[e.buffer].name.find(part) != std::string::npos) return e.phase;
  return Phase::kSetup;
}

SimOptions DataParallelMlp(int device) {
  SimOptions o;
  o.symbols["batch"] = 64;  // the whole batch: 16 per device
  o.optimizer = "adam";
  o.parallel.data_parallel = true;
  o.parallel.world = 4;
  o.parallel.rank = device;
  return o;
}

TEST(DataParallelLossTest, Device0HoldsTheWholeBatchGradOfTheGatheredOutputs) {
  Graph g = *LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
  SimResult d0 = SimulateOk(g, DataParallelMlp(0));
  // cross_entropy's backward makes the grad of the [16, 10] fp32 logits; device 0's is the
  // whole batch's: the other 48 rows beside it, until the last linear has run backward.
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(d0.events, "DataParallel: whole-batch grad, other devices' part of _8", &n), 48 * 10 * 4);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(FreedIn(d0.events, "DataParallel: whole-batch grad"), Phase::kBackward);
  // The gathered outputs themselves, as before.
  EXPECT_EQ(testing::AllocatedContaining(d0.events, "DataParallel: gathered outputs of the other devices"), 48 * 10 * 4);
  // The other devices compute no loss: nothing of the whole batch there.
  SimResult d1 = SimulateOk(g, DataParallelMlp(1));
  EXPECT_EQ(testing::AllocatedContaining(d1.events, "DataParallel: whole-batch"), 0);
}

}  // namespace
}  // namespace memsim

#include "sim/advise.h"
#include "sim/ranks.h"

namespace memsim {
namespace {

TEST(AdviseRanksTest, RowsAreTheLargestRanksAndShardingRemediesAreSimulated) {
  Graph g = *LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/bert_small.json");
  RunConfig c;
  c.sim.symbols["batch"] = 32;
  c.sim.optimizer = "adam";
  c.sim.parallel.data_parallel = true;
  c.sim.parallel.world = 4;
  auto rep = Advise(g, c, 1, 64);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->world, 4);
  // The baseline is the largest of the distinct devices' peaks.
  int64_t largest = 0;
  auto runs = RunRanks(g, c);
  ASSERT_TRUE(runs.ok());
  for (const RankRun& r : *runs) {
    RunConfig rc = c;
    rc.sim.parallel.rank = r.ranks.front();
    largest = std::max(largest, RunOne(g, rc).peak_reserved_bytes);
  }
  EXPECT_EQ(rep->baseline.peak_reserved_bytes, largest);
  // DDP over 8 ranks: the ZeRO, mixed-precision and FSDP remedies are among the rows, or left out
  // when they need more memory than the baseline (on this small model, some do).
  RunConfig d;
  d.sim.symbols["batch"] = 8;
  d.sim.optimizer = "adam";
  d.sim.parallel.ddp = true;
  d.sim.parallel.world = 8;
  auto dr = Advise(g, d, 1, 64);
  ASSERT_TRUE(dr.ok());
  int sharding = 0;
  for (const AdvisedChange& ch : dr->left_out) {
    EXPECT_GT(ch.row.peak_reserved_bytes, dr->baseline.peak_reserved_bytes) << ch.what;
    sharding += ch.what.find("ZeRO") != std::string::npos || ch.what.find("FSDP") != std::string::npos;
  }
  for (const AdvisedChange& ch : dr->changes) {
    EXPECT_LE(ch.row.peak_reserved_bytes, dr->baseline.peak_reserved_bytes) << ch.what;
    EXPECT_TRUE(ch.row.status.ok()) << ch.what << ": " << ch.row.status.message();
    sharding += ch.what.find("ZeRO") != std::string::npos || ch.what.find("FSDP") != std::string::npos;
    EXPECT_EQ(ch.rank, 0);  // DeepSpeed and FSDP ranks are alike
  }
  EXPECT_EQ(sharding, 9);
}

}  // namespace
}  // namespace memsim
