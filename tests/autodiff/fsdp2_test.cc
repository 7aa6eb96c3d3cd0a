// FSDP2 (fully_shard, --mesh dp_shard=N): per-parameter dim-0 shards and padding, the groups,
// the buffers of one rank's step, and the 2-D mesh with tensor parallelism (Note [FSDP2] in
// docs/parallel.md).
#include <gtest/gtest.h>

#include "lib/autodiff/setups/fsdp2.h"
#include "lib/io/graph_json.h"
#include "lib/ir/expert_parallel.h"
#include "lib/ir/fp8.h"
#include "lib/ir/tensor_parallel.h"
#include "sim/ranks.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

TEST(Fsdp2GroupsTest, ExpertsWrappedApartArePrefetchedWithTheirBlock) {
  // torch 2.11's EP flow: fully_shard(layers.i.moe.experts) then fully_shard(layers.i), in that
  // order per layer, then the root; each block's explicit prefetch is [next block, its experts].
  std::vector<Fsdp2Group> g;
  auto add = [&](const std::string& m, OpId first, bool root = false) {
    g.push_back(Fsdp2Group{});
    g.back().module = m;
    g.back().first = first;
    g.back().root = root;
    g.back().call = static_cast<int>(g.size() - 1);
  };
  add("layers.0.moe.experts", 5);
  add("layers.0", 1);
  add("layers.1.moe.experts", 15);
  add("layers.1", 11);
  add("", 0, /*root=*/true);
  const std::vector<bool> nested = NestedGroups(g);
  EXPECT_EQ(nested, (std::vector<bool>{true, false, true, false, false}));
  EXPECT_EQ(NeighbourBlock(g, nested, 1, /*next=*/true), (std::vector<size_t>{3, 2}));
  EXPECT_EQ(NeighbourBlock(g, nested, 3, /*next=*/false), (std::vector<size_t>{1, 0}));
  EXPECT_TRUE(NeighbourBlock(g, nested, 3, /*next=*/true).empty());  // the root is no block
}

using testing::SimulateOk;
using testing::ZooGraph;

TEST(Fsdp2ShardTest, ChunksDimZeroAsTorchChunkAndPadsEveryRankToChunkZero) {
  // 100 rows over 3 ranks: torch.chunk gives 34, 34, 32; every rank keeps 34 rows (padded).
  for (int r = 0; r < 3; ++r) {
    Fsdp2Shard s = ShardDim0({100, 1000}, 3, r);
    EXPECT_EQ(s.padded_rows, 34);
    EXPECT_EQ(s.padded_numel(), 34'000);
    EXPECT_EQ(s.local_rows, r < 2 ? 34 : 32);
  }
  // 10 rows over 4 ranks: 3, 3, 3, 1; 5 rows over 4: 2, 2, 1, 0 (an empty chunk, still padded).
  EXPECT_EQ(ShardDim0({10}, 4, 3).local_rows, 1);
  EXPECT_EQ(ShardDim0({5, 7}, 4, 2).local_numel(), 7);
  EXPECT_EQ(ShardDim0({5, 7}, 4, 3).local_rows, 0);
  EXPECT_EQ(ShardDim0({5, 7}, 4, 3).padded_numel(), 14);
  // A 0-d parameter is one row.
  EXPECT_EQ(ShardDim0({}, 2, 0).padded_numel(), 1);
  EXPECT_EQ(ShardDim0({}, 2, 1).local_rows, 0);
}

TEST(Fsdp2ShardTest, ShardsDimOneEvenly) {
  // shard_placement_fn's Shard(1): a [2, 256, 128] expert weight over 4 ranks keeps [2, 64, 128].
  Fsdp2Shard s = ShardDim({2, 256, 128}, 1, 4, 3);
  EXPECT_EQ(s.dim, 1);
  EXPECT_EQ(s.rows, 256);
  EXPECT_EQ(s.padded_numel(), 2 * 64 * 128);
  EXPECT_EQ(s.local_numel(), 2 * 64 * 128);
}

SimOptions Fsdp2Mlp(int world, int rank) {
  SimOptions o;
  o.symbols["batch"] = 64;
  o.optimizer = "adam";
  o.profile = "cpu";
  o.torch = "2.13";
  o.parallel.mesh.dp_shard = world;
  o.parallel.world = world;
  o.parallel.rank = rank;
  o.parallel.wrap_modules = {"0", "2", "4", "6", "8"};
  return o;
}

TEST(Fsdp2GroupsTest, OneGroupPerWrappedModuleThenTheRoot) {
  Graph g = ZooGraph("mlp");
  SimResult r = SimulateOk(g, Fsdp2Mlp(3, 0));
  auto groups = MakeFsdp2Groups(g, r.bound, {"0", "2"}, 3, 0);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].module, "0");
  EXPECT_EQ(groups[1].module, "2");
  EXPECT_EQ(groups[2].module, "");  // the root: Linear 4, 6, 8
  EXPECT_EQ(groups[2].params.size(), 6u);
  // "0" = Linear(1000, 100): weight 34 × 1000 and bias 34 padded rows per rank.
  EXPECT_EQ(groups[0].shard_numel, 34 * 1000 + 34);
  EXPECT_EQ(groups[2].first, 0u);  // the root spans the model's forward, not the loss
  EXPECT_LT(groups[2].last, g.ops.size() - 1);
}

TEST(Fsdp2GroupsTest, ExpertWeightsMakeASecondGroupOfTheCallOnTheirOwnMesh) {
  // torchtitan's EP borrowing dp_shard (Note [Expert parallel]): moe.0's router stays on the dense
  // mesh, its experts (EP-local, 2 of 4) go to efsdp = 8 / 2 ranks on dim 1 (8 ranks > 4 experts).
  Result<Graph> loaded = LoadGraph(test_data::TestDataPath("traces_moe_2_13/graphs/moe_mlp.json"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Result<Graph> g = ApplyExpertParallel(*loaded, 2);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  SimOptions o = Fsdp2Mlp(8, 5);
  o.symbols["batch"] = 32;
  o.parallel.mesh.ep = 2;
  o.parallel.wrap_modules = {"moe.0"};
  SimResult r = SimulateOk(*g, o);
  Fsdp2Experts ex{g->ep_shards, 4, 2, 1};
  auto groups = MakeFsdp2Groups(*g, r.bound, {"moe.0"}, 8, 5, 0, kNone, &ex);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].module, "moe.0");
  EXPECT_EQ(groups[0].world, 8);
  EXPECT_EQ(groups[1].module, "moe.0");  // the same call, after the router's group
  EXPECT_EQ(groups[1].call, groups[0].call);
  EXPECT_EQ(groups[1].world, 4);
  ASSERT_EQ(groups[1].params.size(), 3u);  // w1, w2, w3
  EXPECT_EQ(groups[1].shards[0].dim, 1);
  EXPECT_EQ(groups[1].shards[0].padded_numel(), 2 * 256 * 128 / 4);
  EXPECT_EQ(groups[0].first, groups[1].first);
  EXPECT_TRUE(groups[2].root);
  EXPECT_NE(groups[2].call, groups[1].call);
}

int64_t Bytes(const EventStream& s, EventKind kind, const std::string& part, size_t* count = nullptr) {
  int64_t bytes = 0;
  size_t n = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == kind && s.buffers[e.buffer].name.find(part) != std::string::npos) bytes += s.bytes(e), ++n;
  if (count) *count = n;
  return bytes;
}

/// The bytes of the parameter shards fully_shard allocates.
int64_t ShardBytes(const EventStream& s) {
  int64_t bytes = 0;
  for (const MemEvent& e : s.events) {
    const Buffer& b = s.buffers[e.buffer];
    if (e.kind == EventKind::kAlloc && b.category == Category::kParameter && b.name.ends_with(" (shard)")) bytes += s.bytes(e);
  }
  return bytes;
}

/// The bytes of the events of |kind| on buffers named |name|.
int64_t Exact(const EventStream& s, EventKind kind, const std::string& name) {
  int64_t bytes = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == kind && s.buffers[e.buffer].name == name) bytes += s.bytes(e);
  return bytes;
}

/// The bytes of the first allocation whose name holds |part|.
int64_t FirstAlloc(const EventStream& s, const std::string& part) {
  for (const MemEvent& e : s.events)
    if (e.kind == EventKind::kAlloc && s.buffers[e.buffer].name.find(part) != std::string::npos) return s.bytes(e);
  return -1;
}

/// The shards to_empty made and reset_sharded_param replaced (freed shards).
int64_t LocalShardBytes(const EventStream& s) {
  int64_t bytes = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == EventKind::kFree && s.buffers[e.buffer].name.ends_with(" (shard)")) bytes += s.bytes(e);
  return bytes;
}

int64_t r_bytes(const SimResult& r, TensorId t) { return r.bound.metas[t].bytes(); }

TEST(Fsdp2StepTest, ShardsAllGatherAndReduceScatterBuffersHaveTheirPaddedSizes) {
  Graph g = ZooGraph("mlp");
  SimResult r = SimulateOk(g, Fsdp2Mlp(2, 0));
  const EventStream& s = r.events;
  // Shards: every parameter's half (all dims 0 even), 542,210 parameters in all.
  int64_t params = 0;
  for (TensorId t : g.parameters) params += r.bound.metas[t].numel();
  EXPECT_EQ(ShardBytes(s), params / 2 * 4);
  // Group "0": all-gather output 2 × (50 × 1000 + 50) floats, in forward and again in backward.
  size_t n = 0;
  EXPECT_EQ(Bytes(s, EventKind::kAlloc, "FSDP2 0 all-gather output", &n), 2 * 2 * 50'050 * 4);
  EXPECT_EQ(n, 2u);
  // Its reduce-scatter: input = the unsharded size, output = the shard.
  EXPECT_EQ(Bytes(s, EventKind::kAlloc, "FSDP2 0 reduce-scatter input"), 100'100 * 4);
  EXPECT_EQ(Bytes(s, EventKind::kAlloc, "FSDP2 0 sharded grads"), 50'050 * 4);
  // gloo's staging copies on the CPU: two per all-gather.
  EXPECT_EQ(Bytes(s, EventKind::kAlloc, "FSDP2 0 all-gather (gloo"), 2 * 2 * 100'100 * 4);
}

TEST(Fsdp2StepTest, KeepingTheUnitsGatheredAllGathersOnce) {
  Graph g = ZooGraph("mlp");
  SimOptions o = Fsdp2Mlp(2, 0);
  o.parallel.fsdp2_reshard_after_forward = false;
  SimResult r = SimulateOk(g, o);
  size_t n = 0;
  Bytes(r.events, EventKind::kAlloc, "FSDP2 0 all-gather output", &n);
  EXPECT_EQ(n, 1u);
}

TEST(Fsdp2StepTest, UnevenDimZeroPadsTheGradsAndLeavesTheLastRankLessOptimizerState) {
  Graph g = ZooGraph("mlp");
  SimResult r0 = SimulateOk(g, Fsdp2Mlp(3, 0));
  SimResult r2 = SimulateOk(g, Fsdp2Mlp(3, 2));
  // Every grad (dims 0 of 100 and 10 rows) is padded by _chunk_cat before the reduce-scatter.
  EXPECT_EQ(Bytes(r0.events, EventKind::kAlloc, "FSDP2 0 reduce-scatter padded grad"), (102 * 1000 + 102) * 4);
  // Shards and buffers are the same size on every rank; Adam's state is not (32 rows, not 34).
  EXPECT_EQ(ShardBytes(r0.events), ShardBytes(r2.events));
  const int step = static_cast<int>(Phase::kOptimizer);
  EXPECT_GT(r0.peak.phase_peaks[step], r2.peak.phase_peaks[step]);
}

TEST(Fsdp2StepTest, MixedPrecisionGathersInParamDtypeAndReducesInReduceDtype) {
  Graph g = ZooGraph("mlp");
  SimOptions o = Fsdp2Mlp(2, 0);
  o.parallel.fsdp2_param_dtype = "bf16";
  o.parallel.fsdp2_reduce_dtype = "fp32";
  o.dtype = "bf16";
  SimResult r = SimulateOk(g, o);
  EXPECT_EQ(Bytes(r.events, EventKind::kAlloc, "FSDP2 0 all-gather input (cast)"), 2 * 50'050 * 2);
  EXPECT_EQ(Bytes(r.events, EventKind::kAlloc, "FSDP2 0 all-gather output"), 2 * 2 * 50'050 * 2);
  EXPECT_EQ(Bytes(r.events, EventKind::kAlloc, "FSDP2 0 reduce-scatter input"), 100'100 * 4);
  EXPECT_EQ(ShardBytes(r.events), ShardBytes(SimulateOk(g, Fsdp2Mlp(2, 0)).events));  // fp32 shards
}

TEST(Fsdp2StepTest, AModelCastByDtypeIsShardedInThatDtype) {
  // --dtype bf16 without MixedPrecisionPolicy: model.to(bfloat16), so the shards are bf16 too
  // (only MixedPrecisionPolicy keeps them in the graph's own dtype: ModelElementSize)
  Graph g = ZooGraph("mlp");
  SimOptions o = Fsdp2Mlp(2, 0);
  o.dtype = "bf16";
  EXPECT_EQ(2 * ShardBytes(SimulateOk(g, o).events), ShardBytes(SimulateOk(g, Fsdp2Mlp(2, 0)).events));
}

// Note [Meta-device init]: built on the meta device, only the shards are ever allocated; a
// shard of uneven rows is materialized unpadded (to_empty), then re-padded into a new buffer.
TEST(Fsdp2MetaInitTest, OnlyTheShardsMaterializeAndUnevenOnesAreRePadded) {
  Graph g = ZooGraph("mlp");
  SimOptions o = Fsdp2Mlp(3, 2);
  o.parallel.meta_init = true;
  SimResult meta = SimulateOk(g, o);
  int64_t whole = 0;
  for (TensorId t : g.parameters) whole += r_bytes(meta, t);
  // No full parameter: the setup holds the padded shards (the same as the device flow's).
  EXPECT_EQ(ShardBytes(SimulateOk(g, Fsdp2Mlp(3, 2)).events), ShardBytes(meta.events) - LocalShardBytes(meta.events));
  EXPECT_LT(meta.peak.phase_peaks[static_cast<int>(Phase::kSetup)], whole);
  // Rank 2 of 3 holds 32 of the 100 rows of Linear(1000, 100): to_empty makes 32 rows, reset_sharded_param 34.
  EXPECT_EQ(FirstAlloc(meta.events, "0.weight (shard)"), 32 * 1000 * 4);
  EXPECT_EQ(Exact(meta.events, EventKind::kAlloc, "0.weight (shard)"), (32 + 34) * 1000 * 4);
  EXPECT_EQ(Exact(meta.events, EventKind::kFree, "0.weight (shard)"), 32 * 1000 * 4);
  // The step after the setup is the device flow's.
  SimResult device = SimulateOk(g, Fsdp2Mlp(3, 2));
  EXPECT_EQ(meta.peak.phase_peaks[static_cast<int>(Phase::kBackward)], device.peak.phase_peaks[static_cast<int>(Phase::kBackward)]);
}

// Note [Side streams]: on CUDA the all-gather's buffers come from its stream's pool and the
// reduce-scatter's output from the reduce_scatter stream's; the CPU has one.
TEST(Fsdp2StepTest, CudaAllocatesTheCollectivesBuffersOnTheirStreams) {
  Graph g = ZooGraph("mlp");
  SimOptions o = Fsdp2Mlp(2, 0);
  o.profile = "cuda";
  SimResult r = SimulateOk(g, o);
  auto stream_of = [&](const std::string& part) {
    for (const Buffer& b : r.events.buffers)
      if (b.name.find(part) != std::string::npos) return static_cast<int>(b.stream);
    return -1;
  };
  EXPECT_EQ(stream_of("FSDP2 0 all-gather output"), kFsdp2AllGatherStream);
  EXPECT_EQ(stream_of("FSDP2 0 sharded grads (reduce-scatter output)"), kFsdp2ReduceScatterStream);
  EXPECT_EQ(stream_of("FSDP2 0 reduce-scatter input"), 0);
  EXPECT_EQ(stream_of("0.weight (unsharded)"), 0);
  // More reserved than one pool would need: the streams do not share cached blocks.
  for (const Buffer& b : SimulateOk(g, Fsdp2Mlp(2, 0)).events.buffers) EXPECT_EQ(b.stream, 0);
}

// One decoder layer (tests/ir/tensor_parallel_test.cc's): q/gate/up ColwiseParallel, o/down RowwiseParallel.
const char* kTpLayer = R"(
  "symbols": {"batch": 2, "seq": 16},
  "inputs": [{"name": "x", "shape": ["batch", "seq", 32]}],
  "parameters": [{"name": "l.attn.q_proj.weight", "shape": [32, 32]}, {"name": "l.attn.o_proj.weight", "shape": [32, 32]},
                 {"name": "l.mlp.gate_proj.weight", "shape": [64, 32]}, {"name": "l.mlp.up_proj.weight", "shape": [64, 32]},
                 {"name": "l.mlp.down_proj.weight", "shape": [32, 64]}],
  "ops": [
    {"op": "linear", "module": "l.attn.q_proj", "inputs": ["x", "l.attn.q_proj.weight"], "outputs": ["q"]},
    {"op": "view", "module": "l.attn", "inputs": ["q"], "outputs": ["qh"], "attrs": {"shape": ["batch", "seq", 4, 8]}},
    {"op": "reshape", "module": "l.attn", "inputs": ["qh"], "outputs": ["a"], "attrs": {"shape": ["batch", "seq", 32]}},
    {"op": "linear", "module": "l.attn.o_proj", "inputs": ["a", "l.attn.o_proj.weight"], "outputs": ["o"]},
    {"op": "add", "module": "l", "inputs": ["x", "o"], "outputs": ["h"]},
    {"op": "linear", "module": "l.mlp.gate_proj", "inputs": ["h", "l.mlp.gate_proj.weight"], "outputs": ["g"]},
    {"op": "silu", "module": "l.mlp.act", "inputs": ["g"], "outputs": ["s"]},
    {"op": "linear", "module": "l.mlp.up_proj", "inputs": ["h", "l.mlp.up_proj.weight"], "outputs": ["u"]},
    {"op": "mul", "module": "l.mlp", "inputs": ["s", "u"], "outputs": ["m"]},
    {"op": "linear", "module": "l.mlp.down_proj", "inputs": ["m", "l.mlp.down_proj.weight"], "outputs": ["d"]},
    {"op": "mean", "inputs": ["d"], "outputs": ["loss"]}],
  "loss": "loss")";

RunConfig Fsdp2TpLayer() {
  RunConfig c;
  c.sim.symbols = {{"batch", 2}, {"seq", 16}};
  c.sim.optimizer = "adam";
  c.sim.profile = "cpu";
  c.sim.torch = "2.13";
  c.sim.parallel.mesh.dp_shard = 2;
  c.sim.parallel.mesh.tp = 2;
  c.sim.parallel.world = 4;
  c.sim.parallel.wrap_modules = {"l"};
  return c;
}

TEST(Fsdp2TpTest, FullyShardShardsTheTensorParallelLocalTensorsOnDimZero) {
  Result<Graph> g = ApplyTensorParallel(testing::ParseBody(kTpLayer), {2, "layers", false});
  ASSERT_TRUE(g.ok()) << g.status().message();
  SimResult r = SimulateOk(*g, Fsdp2TpLayer().sim);
  // parallelize_module first: every rank builds the full layer (8,192 floats), then keeps its tp
  // half (4,096); fully_shard then keeps half of each local tensor: [8, 32] of q's [16, 32], ...
  EXPECT_EQ(Bytes(r.events, EventKind::kAlloc, " (full)"), 8192 * 4);
  EXPECT_EQ(ShardBytes(r.events), 2048 * 4);
  // The all-gather output and the reduce-scatter input: the group's tp-local size (dp_shard × shards).
  EXPECT_EQ(Bytes(r.events, EventKind::kAlloc, "FSDP2 l reduce-scatter input"), 4096 * 4);
  size_t n = 0;
  EXPECT_EQ(Bytes(r.events, EventKind::kAlloc, "FSDP2 l all-gather output", &n), 2 * 4096 * 4);
  EXPECT_EQ(n, 2u);
  // Built on the meta device: no full layer, no tp shard of it; the 2-D shards alone.
  RunConfig c = Fsdp2TpLayer();
  c.sim.parallel.meta_init = true;
  SimResult meta = SimulateOk(*g, c.sim);
  EXPECT_EQ(Bytes(meta.events, EventKind::kAlloc, " (full)"), 0);
  EXPECT_EQ(ShardBytes(meta.events), 2048 * 4);
  EXPECT_EQ(meta.peak.phase_peaks[static_cast<int>(Phase::kBackward)], r.peak.phase_peaks[static_cast<int>(Phase::kBackward)]);
}

TEST(Fsdp2GroupsTest, AWrapGlobWrapsTheOutermostModulesItMatches) {
  // `l*` matches l, l.attn, l.attn.q_proj, ...: fully_shard(l) alone, as the kit's loop does;
  // a glob of their own wraps inner modules too.
  RunConfig c = Fsdp2TpLayer();
  c.sim.parallel.mesh.tp = 1;
  c.sim.parallel.world = 2;
  c.sim.parallel.wrap_modules = {"l*"};
  SimResult r = SimulateOk(testing::ParseBody(kTpLayer), c.sim);
  EXPECT_GT(Bytes(r.events, EventKind::kAlloc, "FSDP2 l all-gather output"), 0);
  EXPECT_EQ(Bytes(r.events, EventKind::kAlloc, "FSDP2 l.attn"), 0);
  c.sim.parallel.wrap_modules = {"l", "l.mlp.*"};
  SimResult inner = SimulateOk(testing::ParseBody(kTpLayer), c.sim);
  EXPECT_GT(Bytes(inner.events, EventKind::kAlloc, "FSDP2 l.mlp.up_proj all-gather output"), 0);
}

TEST(Fsdp2TpTest, RanksDifferByTheirTpGroupsSourceAndStandInForTheirDpShardCoordinate) {
  Result<Graph> g = ApplyTensorParallel(testing::ParseBody(kTpLayer), {2, "layers", false});
  ASSERT_TRUE(g.ok()) << g.status().message();
  RunConfig c = Fsdp2TpLayer();
  auto runs = RunRanks(*g, c);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  // Even dims 0: the dp_shard ranks are identical; the tp group's first rank (the scatter's source) is not.
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ((*runs)[1].ranks, (std::vector<int>{1, 3}));
  // tp = 4 over 8 ranks: tp coordinates 2 and 3 stand with 1, simulated once per dp_shard coordinate.
  Result<Graph> g4 = ApplyTensorParallel(testing::ParseBody(kTpLayer), {4, "layers", false});
  ASSERT_TRUE(g4.ok()) << g4.status().message();
  c.sim.parallel.mesh.tp = 4;
  c.sim.parallel.world = 8;
  auto runs4 = RunRanks(*g4, c);
  ASSERT_TRUE(runs4.ok()) << runs4.status().message();
  ASSERT_EQ(runs4->size(), 2u);
  EXPECT_EQ((*runs4)[0].ranks, (std::vector<int>{0, 4}));
  EXPECT_EQ((*runs4)[1].ranks, (std::vector<int>{1, 2, 3, 5, 6, 7}));
}

// torchao's float8 all-gather (Note [FP8 training]): x [64, 64] -> fc (64 -> 32, bias) -> mean,
// fully_shard(fc) then the root over 2 ranks.
TEST(Fsdp2Float8Test, AllGathersTheWeightInFloat8AfterCastingItsShard) {
  const char* body = R"(
    "symbols": {"batch": 64},
    "inputs": [{"name": "x", "shape": ["batch", 64]}],
    "parameters": [{"name": "fc.weight", "shape": [32, 64]}, {"name": "fc.bias", "shape": [32]}],
    "ops": [{"op": "linear", "module": "fc", "inputs": ["x", "fc.weight", "fc.bias"], "outputs": ["y"]},
            {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}],
    "loss": "loss")";
  SimOptions o;
  o.symbols["batch"] = 64;
  o.profile = "cpu";
  o.torch = "2.13";
  o.parallel.mesh.dp_shard = 2;
  o.parallel.world = 2;
  o.parallel.wrap_modules = {"fc"};
  auto run = [&](const std::string& spec) {
    Result<Graph> g = ApplyFp8(testing::ParseBody(body), *ParseFp8Spec(spec));
    EXPECT_TRUE(g.ok()) << g.status().message();
    return SimulateOk(*g, o);
  };
  SimResult f8 = run("tensorwise,fsdp_float8_all_gather");
  SimResult hp = run("tensorwise");
  const int64_t shard = 16 * 64;  // the weight's shard: 16 of 32 rows
  size_t n = 0;
  // fsdp_pre_all_gather, once in forward and once in backward (resharded after forward): abs,
  // scaled and clamped fp32 copies of the shard, its float8 bits.
  EXPECT_EQ(Bytes(f8.events, EventKind::kAlloc, "float8 all-gather cast: float8 bits", &n), 2 * shard);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(Bytes(f8.events, EventKind::kAlloc, "float8 all-gather cast: scaled"), 2 * 4 * shard);
  EXPECT_EQ(Bytes(hp.events, EventKind::kAlloc, "float8 all-gather cast"), 0);
  // The all-gather moves one byte per weight element and the bias's four: 2 × (16·64 + 16·4).
  EXPECT_EQ(Bytes(f8.events, EventKind::kAlloc, "FSDP2 fc all-gather output"), 2 * 2 * (shard + 16 * 4));
  EXPECT_EQ(Bytes(hp.events, EventKind::kAlloc, "FSDP2 fc all-gather output"), 2 * 2 * (4 * shard + 16 * 4));
  // The unsharded weight is float8; its grad and the reduce-scatter stay fp32.
  EXPECT_EQ(Bytes(f8.events, EventKind::kAlloc, "fc.weight (unsharded)"), 2 * 32 * 64);
  EXPECT_EQ(Bytes(f8.events, EventKind::kAlloc, "FSDP2 fc reduce-scatter input"),
            Bytes(hp.events, EventKind::kAlloc, "FSDP2 fc reduce-scatter input"));
  // The GEMMs take the gathered float8 weight: no cast of it in the op.
  EXPECT_EQ(Bytes(f8.events, EventKind::kAlloc, "max's contiguous copy"), 0);
  EXPECT_GT(Bytes(hp.events, EventKind::kAlloc, "max's contiguous copy"), 0);
  // MixedPrecisionPolicy(bf16): the flat param_dtype copy holds the bias alone (the weight's
  // all-gather input is its float8 bits); the all-gather moves 16·64 + 16·2 bytes per rank.
  o.parallel.fsdp2_param_dtype = "bf16";
  o.parallel.fsdp2_reduce_dtype = "fp32";
  o.dtype = "bf16";
  SimResult mp = run("tensorwise,fsdp_float8_all_gather");
  EXPECT_EQ(Bytes(mp.events, EventKind::kAlloc, "FSDP2 fc all-gather input (cast)"), 2 * 16 * 2);
  EXPECT_EQ(Bytes(mp.events, EventKind::kAlloc, "FSDP2 fc all-gather output"), 2 * 2 * (shard + 16 * 2));
}

}  // namespace
}  // namespace memsim
