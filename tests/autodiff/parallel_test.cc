// Data parallelism: DDP bucket assignment, ZeRO partitions, and the per-rank streams
// (Notes [DDP], [ZeRO] in docs/op-rules.md).
#include <gtest/gtest.h>

#include <limits>

#include "lib/autodiff/setups/ddp.h"
#include "lib/autodiff/setups/sharded.h"
#include "lib/autodiff/setups/zero.h"
#include "lib/io/graph_json.h"
#include "sim/ranks.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/invariants.h"

namespace memsim {
namespace {

using testing::ZooGraph;


using testing::SimulateOk;

int64_t BytesNamed(const EventStream& s, EventKind kind, const std::string& part, size_t* count = nullptr) {
  int64_t bytes = 0;
  size_t n = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == kind && s.buffers[e.buffer].name.find(part) != std::string::npos) {
      bytes += s.bytes(e);
      ++n;
    }
  if (count) *count = n;
  return bytes;
}

TEST(BucketAssignmentTest, ClosesABucketWhenItReachesTheLimitThenAdvancesTheLimit) {
  // 1 MiB first, then 4 MiB: items of 0.6 MiB each.
  const int64_t mib = int64_t{1} << 20;
  std::vector<BucketItem> items(8, BucketItem{mib * 6 / 10, 0});
  auto b = ComputeBucketAssignmentBySize(items, {kDefaultFirstBucketBytes, 4 * mib}, false);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{0, 1}));           // 1.2 MiB >= 1 MiB
  EXPECT_EQ(b[1], (std::vector<size_t>{2, 3, 4, 5, 6, 7}));  // 3.6 MiB < 4 MiB: closed at the end
}

TEST(BucketAssignmentTest, OneBucketPerKeySortedByTheSmallestIndex) {
  std::vector<BucketItem> items = {{100, 1}, {8, 2}, {100, 1}, {8, 2}};
  auto b = ComputeBucketAssignmentBySize(items, {std::numeric_limits<int64_t>::max()}, true);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{0, 2}));
  EXPECT_EQ(b[1], (std::vector<size_t>{1, 3}));
}

TEST(ZeroPartitionTest, GreedyGivesTheLargestFirstToTheLeastLoadedRank) {
  // ZeroRedundancyOptimizer on mnist_cnn's parameter sizes (the traces: rank 0 holds fc1 alone).
  std::vector<int64_t> numels = {800, 32, 51200, 64, 1048576, 1024, 10240, 10};
  auto parts = GreedyPartition(numels, 2);
  EXPECT_EQ(parts[0], (std::vector<size_t>{4}));
  EXPECT_EQ(parts[1], (std::vector<size_t>{2, 6, 5, 0, 3, 1, 7}));
  // Ties go to the lowest rank; equal sizes keep registration order.
  auto even = GreedyPartition({5, 5, 5, 5}, 2);
  EXPECT_EQ(even[0], (std::vector<size_t>{0, 2}));
  EXPECT_EQ(even[1], (std::vector<size_t>{1, 3}));
}

TEST(ZeroPartitionTest, FlatPartitionPadsToAMultipleOfTwiceTheWorld) {
  EXPECT_EQ(FlatPartitionNumel(100, 8), 14);  // 100 -> 112 = 7 * 16, / 8
  EXPECT_EQ(FlatPartitionNumel(96, 8), 12);
  EXPECT_EQ(FlatPartitionNumel(1, 1), 2);
  EXPECT_EQ(FlatPartitionNumel(7'000'000'000, 8), 875'000'000);
}

SimOptions Mlp(const std::string& profile) {
  SimOptions o;
  o.symbols["batch"] = 64;
  o.optimizer = "adam";
  o.profile = profile;
  return o;
}

TEST(DdpTest, BucketsHoldEveryTrainableParameterAndBucketViewsFreeTheGrads) {
  Graph g = ZooGraph("mlp");
  SimOptions o = Mlp("cpu");
  SimResult plain = SimulateOk(g, o);
  o.parallel.ddp = true;
  o.parallel.world = 2;
  SimResult ddp = SimulateOk(g, o);
  int64_t params = 0;
  for (TensorId t : g.parameters) params += ddp.bound.metas[t].bytes();
  size_t buckets = 0;
  EXPECT_EQ(BytesNamed(ddp.events, EventKind::kAlloc, "DDP bucket", &buckets), params);
  EXPECT_EQ(buckets, 1u);  // first iteration: one bucket
  EXPECT_EQ(BytesNamed(ddp.events, EventKind::kFree, "DDP bucket"), 0);
  // The module states broadcast: one flat copy, freed in the setup phase.
  EXPECT_EQ(BytesNamed(ddp.events, EventKind::kAlloc, "module states broadcast"), params);
  EXPECT_EQ(ddp.peak.peak_live_bytes - plain.peak.peak_live_bytes, params);
  o.parallel.gradient_as_bucket_view = true;
  SimResult view = SimulateOk(g, o);
  // .grad is the bucket view: the optimizer-phase peak no longer holds separate grads.
  EXPECT_EQ(view.peak.phase_peaks[int(Phase::kOptimizer)],
            ddp.peak.phase_peaks[int(Phase::kOptimizer)] - params);
}

TEST(DdpTest, SteadyStepUsesRebuiltBucketsOfTheCap) {
  Graph g = ZooGraph("resnet18");
  SimOptions o;
  o.symbols["batch"] = 2;
  o.first_step = false;
  o.parallel.ddp = true;
  o.parallel.world = 4;
  o.parallel.bucket_cap_mb = 25;
  SimResult r = SimulateOk(g, o);
  size_t buckets = 0;
  int64_t bytes = BytesNamed(r.events, EventKind::kAlloc, "DDP bucket", &buckets);
  EXPECT_GE(buckets, 3u);  // 1 MiB first, then 25 MiB ones over 44.6 MiB
  int64_t params = 0;
  for (TensorId t : g.parameters) params += r.bound.metas[t].bytes();
  EXPECT_EQ(bytes, params);
}

TEST(RanksTest, ZeroRedundancyOptimizerRanksDifferAndDdpRanksAreOne) {
  Graph g = ZooGraph("mnist_cnn");
  RunConfig c;
  c.sim.symbols["batch"] = 32;
  c.sim.optimizer = "adam";
  c.sim.profile = "cpu";
  c.sim.torch = "1.13";
  c.sim.parallel.world = 2;
  c.sim.parallel.ddp = true;
  auto ddp = RunRanks(g, c);
  ASSERT_TRUE(ddp.ok()) << ddp.status().message();
  ASSERT_EQ(ddp->size(), 1u);
  EXPECT_EQ((*ddp)[0].ranks, (std::vector<int>{0, 1}));
  c.sim.parallel.ddp = false;
  c.sim.parallel.zero_stage = 1;
  auto zero = RunRanks(g, c);
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  ASSERT_EQ(zero->size(), 2u);
  // Rank 0 holds Adam's state of fc1 (1,048,576 elements × 2 states), rank 1 of the rest.
  const PeakReport& r0 = (*zero)[0].result.sim.peak;
  const PeakReport& r1 = (*zero)[1].result.sim.peak;
  EXPECT_GT(r0.phase_peaks[int(Phase::kOptimizer)], r1.phase_peaks[int(Phase::kOptimizer)]);
  EXPECT_EQ(r0.phase_peaks[int(Phase::kBackward)], r1.phase_peaks[int(Phase::kBackward)]);
}

TEST(ZeroTest, DeepSpeedStagesShrinkStateThenGradients) {
  Graph g = ZooGraph("bert_small");
  SimOptions o;
  o.symbols["batch"] = 4;
  o.optimizer = "adam";
  o.first_step = false;
  SimResult one_gpu = SimulateOk(g, o);
  o.parallel.world = 4;
  o.parallel.zero_stage = 1;
  SimResult z1 = SimulateOk(g, o);
  o.parallel.zero_stage = 2;
  SimResult z2 = SimulateOk(g, o);
  int64_t params = 0;
  for (TensorId t : g.parameters) params += z1.bound.metas[t].bytes();
  const int64_t part = FlatPartitionNumel(params / 4, 4) * 4;
  // Stage 1, before the batch: parameters + master partition + 2 Adam states of the partition.
  EXPECT_EQ(BytesNamed(z1.events, EventKind::kAlloc, "ZeRO fp32 partition (master)"), part);
  EXPECT_LT(z1.peak.peak_live_bytes, one_gpu.peak.peak_live_bytes);
  // Stage 2: no whole gradients at the step, but the 5e8-element reduce bucket in backward.
  EXPECT_LT(z2.peak.phase_peaks[int(Phase::kOptimizer)], z1.peak.phase_peaks[int(Phase::kOptimizer)]);
  EXPECT_EQ(BytesNamed(z2.events, EventKind::kAlloc, "ZeRO reduce bucket"), int64_t{500'000'000} * 4);
  EXPECT_EQ(BytesNamed(z2.events, EventKind::kAlloc, "ZeRO gradient partition"), part);
}

TEST(ZeroTest, BucketSizeAndOverlapCommSizeTheIpgBuffers) {
  Graph g = ZooGraph("bert_small");
  SimOptions o;
  o.symbols["batch"] = 4;
  o.optimizer = "adam";
  o.parallel.world = 4;
  o.parallel.zero_stage = 2;
  o.parallel.zero_bucket_elements = 1'000'000;
  SimResult one = SimulateOk(g, o);
  size_t n = 0;
  EXPECT_EQ(BytesNamed(one.events, EventKind::kAlloc, "ZeRO reduce bucket", &n), int64_t{1'000'000} * 4);
  EXPECT_EQ(n, 1u);
  // overlap_comm: backward() makes a second buffer (stage_1_and_2.py, "double buffers").
  o.parallel.zero_overlap_comm = true;
  SimResult two = SimulateOk(g, o);
  EXPECT_EQ(BytesNamed(two.events, EventKind::kAlloc, "ZeRO reduce bucket", &n), int64_t{2'000'000} * 4);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(two.peak.peak_live_bytes - one.peak.peak_live_bytes, int64_t{1'000'000} * 4);
  // Stage 3 keeps one flat ipg buffer whatever overlap_comm says.
  o.parallel.zero_stage = 3;
  EXPECT_EQ(BytesNamed(SimulateOk(g, o).events, EventKind::kAlloc, "ZeRO reduce bucket", &n), int64_t{1'000'000} * 4);
}

TEST(ParallelOptionsTest, BadOptionsAreErrors) {
  Graph g = ZooGraph("mlp");
  SimOptions o = Mlp("cpu");
  o.parallel.zero_stage = 2;
  o.parallel.world = 2;
  EXPECT_FALSE(Simulate(g, o).ok());  // ZeroRedundancyOptimizer is ZeRO-1 only
  o = Mlp("cuda");
  o.parallel.zero_stage = 1;
  o.parallel.world = 2;
  o.parallel.offload = "params";
  EXPECT_FALSE(Simulate(g, o).ok());  // parameter offload needs stage 3
  o.parallel.offload.clear();
  o.parallel.fsdp = "full";
  EXPECT_FALSE(Simulate(g, o).ok());  // FSDP and ZeRO together
  o.parallel.fsdp.clear();
  o.parallel.rank = 2;
  EXPECT_FALSE(Simulate(g, o).ok());
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

std::vector<std::string> Named(const EventStream& s, EventKind kind, const std::string& part) {
  std::vector<std::string> names;
  for (const MemEvent& e : s.events)
    if (e.kind == kind && s.buffers[e.buffer].name.find(part) != std::string::npos)
      names.push_back(s.buffers[e.buffer].name);
  return names;
}

TEST(ShardUnitsTest, FsdpFlatParametersPadToAMultipleOfTheWorld) {
  Graph g = ZooGraph("mlp");
  SimResult r = SimulateOk(g, Mlp("cuda"));
  ShardPolicy p;
  p.world = 3;
  p.flat = true;
  auto units = MakeShardUnits(g, r.bound, p, {"0", "2"});
  ASSERT_EQ(units.size(), 3u);  // the root (4, 6, 8) first: it is entered first; then "0", "2"
  EXPECT_EQ(units[0].module, "");
  EXPECT_EQ(units[1].module, "0");
  EXPECT_EQ(units[2].module, "2");
  for (const ShardUnit& u : units) {
    int64_t numel = 0;
    for (uint32_t k : u.params) numel += r.bound.metas[g.parameters[k]].numel();
    EXPECT_EQ(u.full_bytes, (numel + 2) / 3 * 3 * 4);
    EXPECT_EQ(u.shard_bytes * 3, u.full_bytes);
  }
}

TEST(ShardUnitsTest, Zero3PartitionsEachParameterAndKeepsSmallOnesWhole) {
  Graph g = ZooGraph("mlp");
  SimResult r = SimulateOk(g, Mlp("cuda"));
  ShardPolicy p;
  p.world = 4;
  p.persistence_threshold = 1000;  // the biases (100 or 10 elements) stay whole
  auto units = MakeShardUnits(g, r.bound, p, {});
  for (const ShardUnit& u : units)
    for (uint32_t k : u.params) EXPECT_GT(r.bound.metas[g.parameters[k]].numel(), 1000);
}

TEST(FsdpTest, FullShardGathersEachUnitBeforeItsForwardAndFreesItAfter) {
  Graph g = ZooGraph("mlp");
  SimOptions o = Mlp("cuda");
  o.parallel.world = 2;
  o.parallel.fsdp = "full";
  o.parallel.wrap_modules = {"0", "2", "4"};
  SimResult r = SimulateOk(g, o);
  // Forward: root, then 0, 2, 4 in order, each freed before the next (FULL_SHARD), the root kept.
  std::vector<std::string> fwd;
  for (const MemEvent& e : r.events.events) {
    const std::string& n = r.events.buffers[e.buffer].name;
    if (e.phase == Phase::kForward && n.find("FSDP gathered") != std::string::npos)
      fwd.push_back((e.kind == EventKind::kAlloc ? "+" : "-") + n.substr(n.rfind(' ') + 1));
  }
  EXPECT_EQ(fwd, (std::vector<std::string>{"+(root)", "+0", "-0", "+2", "-2", "+4", "-4"}));
  // Backward gathers each wrapped unit again, prefetching the one before it (BACKWARD_PRE).
  auto bwd = Named(r.events, EventKind::kAlloc, "FSDP gathered");
  EXPECT_EQ(bwd.size(), 7u);
  // Each unit's grads are reduce-scattered into one sharded grad, freed by zero_grad.
  EXPECT_EQ(Named(r.events, EventKind::kAlloc, "FSDP sharded grad").size(), 4u);
  o.parallel.fsdp = "grad-op";
  SimResult op = SimulateOk(g, o);
  EXPECT_GT(op.peak.phase_peaks[int(Phase::kForward)], r.peak.phase_peaks[int(Phase::kForward)]);
}

TEST(Zero3Test, ParametersAreGatheredPerModuleAndOffloadMovesStateToTheHost) {
  Graph g = ZooGraph("bert_small");
  SimOptions o;
  o.symbols["batch"] = 4;
  o.optimizer = "adam";
  o.parallel.world = 8;
  o.parallel.zero_stage = 2;
  SimResult z2 = SimulateOk(g, o);
  o.parallel.zero_stage = 3;
  SimResult z3 = SimulateOk(g, o);
  int64_t params = 0;
  for (TensorId t : g.parameters) params += z3.bound.metas[t].bytes();
  const int64_t shards = BytesNamed(z3.events, EventKind::kAlloc, "ZeRO-3 shard");
  EXPECT_GT(shards, params / 8 / 2);  // the large parameters, one eighth each
  EXPECT_LE(shards, params / 8 + 8 * 4 * static_cast<int64_t>(g.parameters.size()));
  // Stage 2 keeps the whole parameters.
  EXPECT_EQ(BytesNamed(z2.events, EventKind::kAlloc, "ZeRO-3"), 0);
  auto gathered = Named(z3.events, EventKind::kAlloc, "ZeRO-3 gathered");
  auto freed = Named(z3.events, EventKind::kFree, "ZeRO-3 gathered");
  EXPECT_FALSE(gathered.empty());
  EXPECT_EQ(gathered.size(), freed.size());
  EXPECT_EQ(z3.events.host_bytes, 0);
  o.parallel.offload = "optimizer";
  SimResult off = SimulateOk(g, o);
  EXPECT_GT(off.events.host_bytes, 0);
  EXPECT_LT(off.peak.peak_live_bytes, z3.peak.peak_live_bytes);
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

TEST(ZeroTest, SteadyModelStatesAreTheParametersPlusSixteenBytesPerPartitionElement) {
  // DeepSpeed's accounting (estimate_zero2_model_states_mem_needs: 4·Ψ + 16·Ψ/N, there for fp16
  // parameters and gradients): here fp32 parameters (4·Ψ) and, per element of the padded
  // partition, the fp32 master copy, Adam's two states and the gradient partition (16 B).
  Graph g = ZooGraph("mlp");
  SimOptions o = Mlp("cuda");
  o.first_step = false;
  o.parallel.world = 4;
  o.parallel.zero_stage = 2;
  SimResult r = SimulateOk(g, o);
  int64_t numel = 0;
  for (TensorId t : g.parameters) numel += r.bound.metas[t].numel();
  const int64_t part = FlatPartitionNumel(numel, 4);
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kParameter), 4 * numel);
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kOptimizerState), 12 * part);
  // The step frees the gradient partition (free_grad_in_param_list): none is kept across steps.
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kGradient), 0);
  EXPECT_EQ(BytesNamed(r.events, EventKind::kAlloc, "ZeRO gradient partition"), 4 * part);
  // Stage 3: parameters above 1e5 elements are partitioned one by one, the others stay whole.
  o.parallel.zero_stage = 3;
  SimResult z3 = SimulateOk(g, o);
  int64_t shards = 0, whole = 0, part3 = 0;
  for (TensorId t : g.parameters) {
    const int64_t n = z3.bound.metas[t].numel();
    part3 += (n + 3) / 4;
    (n > 100'000 ? shards : whole) += n > 100'000 ? (n + 3) / 4 * 4 : n * 4;
  }
  EXPECT_EQ(testing::LiveAtEnd(z3.events, Category::kParameter), shards + whole);
  EXPECT_EQ(testing::LiveAtEnd(z3.events, Category::kOptimizerState), 12 * part3);
  // The gradient partition and DeepSpeed's 5e8-element ipg bucket, kept across steps.
  EXPECT_EQ(testing::LiveAtEnd(z3.events, Category::kGradient), 4 * part3 + int64_t{500'000'000} * 4);
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

TEST(RanksTest, DataParallelDevicesGroupByTheirChunkOfTheBatch) {
  // torch.chunk of 10 over 4 devices: 3, 3, 3, 1.
  EXPECT_EQ(DataParallelChunk(10, 4, 0), 3);
  EXPECT_EQ(DataParallelChunk(10, 4, 3), 1);
  EXPECT_EQ(DataParallelChunk(2, 4, 3), 0);
  Graph g = ZooGraph("mlp");
  RunConfig c;
  c.sim.symbols["batch"] = 10;
  c.sim.optimizer = "adam";
  c.sim.parallel.world = 4;
  c.sim.parallel.data_parallel = true;
  auto runs = RunRanks(g, c);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].ranks, (std::vector<int>{0}));
  EXPECT_EQ((*runs)[1].ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ((*runs)[2].ranks, (std::vector<int>{3}));
  // Device 0 holds the optimizer state; the others none.
  auto state = [](const RankRun& r) {
    int64_t b = 0;
    for (const Buffer& buf : r.result.sim.events.buffers)
      if (buf.category == Category::kOptimizerState) b += buf.bytes;
    return b;
  };
  EXPECT_GT(state((*runs)[0]), 0);
  EXPECT_EQ(state((*runs)[1]), 0);
}

TEST(RanksTest, ZeroRedundancyOptimizerRanksBeyondTheParametersShareOneEmptyPartition) {
  Graph g = ZooGraph("mlp");  // 10 parameter tensors
  RunConfig c;
  c.sim.symbols["batch"] = 8;
  c.sim.optimizer = "adam";
  c.sim.profile = "cpu";
  c.sim.torch = "1.13";
  c.sim.parallel.world = 64;
  c.sim.parallel.zero_stage = 1;
  auto runs = RunRanks(g, c);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  size_t listed = 0;
  for (const RankRun& r : *runs) listed += r.ranks.size();
  EXPECT_EQ(listed, 64u);
  EXPECT_LE(runs->size(), 11u);
  EXPECT_EQ(runs->back().ranks.back(), 63);
}

}  // namespace
}  // namespace memsim
