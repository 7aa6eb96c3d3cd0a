// Mixed-precision ZeRO (DeepSpeed fp16/bf16: --zero N --dtype fp16) and FSDP MixedPrecision
// (--fsdp-mixed-precision): the bytes per rank, rule by rule (Notes [ZeRO mixed precision],
// [FSDP mixed precision] in docs/op-rules.md).
#include <gtest/gtest.h>

#include "lib/autodiff/setups/sharded.h"
#include "lib/autodiff/setups/zero.h"
#include "lib/io/graph_json.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ZooGraph;

using testing::SimulateOk;


SimOptions MlpFp16(int zero_stage) {
  SimOptions o;
  o.symbols["batch"] = 64;
  o.optimizer = "adam";
  o.first_step = false;
  o.dtype = "fp16";
  o.parallel.world = 4;
  o.parallel.zero_stage = zero_stage;
  return o;
}

int64_t Numel(const Graph& g, const SimResult& r) {
  int64_t n = 0;
  for (TensorId t : g.parameters) n += r.bound.metas[t].numel();
  return n;
}

TEST(ZeroMixedPrecisionTest, Stage2KeepsFp16ParamsAndGradsAndAnFp32MasterPartition) {
  Graph g = ZooGraph("mlp");
  SimResult r = SimulateOk(g, MlpFp16(2));
  const int64_t psi = Numel(g, r);
  const int64_t part = FlatPartitionNumel(psi, 4);
  // Between steps: the fp16 parameters (2Ψ), the fp32 master partition and Adam's two fp32
  // states of it (12 per partition element); the gradient partition was freed by the step.
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kParameter), 2 * psi);
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kOptimizerState), 12 * part);
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kGradient), 0);
  // Backward: the fp16 ipg bucket (reduce_bucket_size elements) and the fp16 gradient partition.
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO reduce bucket"), int64_t{500'000'000} * 2);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO gradient partition"), 2 * part);
  // The step: flatten (fp16), .to(fp32) for the master's grad.
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO flat gradient partition"), 2 * part);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO fp32 gradient partition"), 4 * part);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO fp32 partition (master)"), 4 * part);  // made at setup
}

TEST(ZeroMixedPrecisionTest, FirstStepMakesTheMasterAndStatesAtSetup) {
  Graph g = ZooGraph("mlp");
  SimOptions o = MlpFp16(1);
  o.first_step = true;
  SimResult r = SimulateOk(g, o);
  const int64_t part = FlatPartitionNumel(Numel(g, r), 4);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO fp32 partition (master)"), 4 * part);
  // Stage 1: the whole fp16 grads until the step, which frees them around the fp32 partition grad.
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kGradient), 0);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO fp32 gradient partition"), 4 * part);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO reduce bucket"), 0);
}

TEST(ZeroMixedPrecisionTest, Stage3GathersFp16ModulesAndKeepsFp16GradPartitions) {
  Graph g = ZooGraph("bert_small");  // mlp's parameters are all below the persistence threshold
  SimOptions o = MlpFp16(3);
  o.symbols["batch"] = 4;
  SimResult r = SimulateOk(g, o);
  int64_t shards = 0, whole = 0, part = 0;
  for (TensorId t : g.parameters) {
    const int64_t n = r.bound.metas[t].numel();
    part += (n + 3) / 4;
    if (n > 100'000)
      shards += (n + 3) / 4 * 2;
    else
      whole += n * 2;
  }
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO-3 shard"), shards);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "low-precision shard"), 0);  // the module itself is fp16
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kParameter), shards + whole);
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kOptimizerState), 12 * part);
  // The fp16 ipg bucket and gradient partition live for the run; the fp32 grad only in the step.
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kGradient), 2 * part + int64_t{500'000'000} * 2);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "ZeRO fp32 gradient partition"), 4 * part);
  // Each module is gathered in fp16: the first gather (forward's first module) is its shards × 4.
  size_t gathers = 0;
  EXPECT_GT(testing::AllocatedContaining(r.events, "ZeRO-3 gathered", &gathers), 0);
  EXPECT_GT(gathers, 0u);
  ShardPolicy p;
  p.world = 4;
  p.persistence_threshold = 100'000;
  auto units = MakeShardUnits(g, r.bound, p, {});
  ASSERT_FALSE(units.empty());
  for (const MemEvent& e : r.events.events)
    if (e.kind == EventKind::kAlloc && r.events.buffers[e.buffer].name.find("ZeRO-3 gathered") != std::string::npos) {
      EXPECT_EQ(r.events.bytes(e), units[0].full_bytes);
      EXPECT_EQ(units[0].full_bytes, units[0].shard_bytes * 4);
      break;
    }
}

TEST(ZeroMixedPrecisionTest, OffloadLeavesFp16ParamsAndTheStage3BucketOnTheGpu) {
  Graph g = ZooGraph("mlp");
  SimOptions o = MlpFp16(3);
  o.parallel.offload = "optimizer";
  SimResult r = SimulateOk(g, o);
  int64_t part = 0;
  for (TensorId t : g.parameters) part += (r.bound.metas[t].numel() + 3) / 4;
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kOptimizerState), 0);
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kGradient), int64_t{500'000'000} * 2);
  // Host: fp32 partition, its fp32 grad, Adam's two states (16 B) and the fp16 grad partition.
  EXPECT_EQ(r.events.host_bytes, 16 * part + 2 * part);
}

TEST(FsdpMixedPrecisionTest, ShardsStayFp32AndUnitsAreGatheredInTheLowDtype) {
  Graph g = ZooGraph("mlp");
  SimOptions o;
  o.symbols["batch"] = 64;
  o.optimizer = "adam";
  o.first_step = false;
  o.parallel.world = 3;
  o.parallel.fsdp = "full";
  o.parallel.wrap_modules = {"0", "2"};
  o.dtype = "bf16";
  o.parallel.fsdp_mixed_precision = "bf16";
  SimResult mp = SimulateOk(g, o);
  ShardPolicy p;
  p.world = 3;
  p.flat = true;
  p.mixed_precision = true;
  auto units = MakeShardUnits(g, mp.bound, p, {"0", "2"});
  ASSERT_EQ(units.size(), 3u);
  int64_t shard = 0, low = 0, full = 0;
  for (const ShardUnit& u : units) {
    int64_t numel = 0;
    for (uint32_t k : u.params) numel += mp.bound.metas[g.parameters[k]].numel();
    EXPECT_EQ(u.full_bytes, (numel + 2) / 3 * 3 * 2);        // bf16, padded to a multiple of 3
    EXPECT_EQ(u.shard_bytes, (numel + 2) / 3 * 4);           // fp32 shard
    EXPECT_EQ(u.low_shard_bytes, (numel + 2) / 3 * 2);       // the bf16 _mp_shard
    shard += u.shard_bytes, low += u.low_shard_bytes, full += u.full_bytes;
  }
  EXPECT_EQ(testing::AllocatedContaining(mp.events, "FSDP shard "), shard);  // fp32 shards, made at setup
  EXPECT_EQ(testing::LiveAtEnd(mp.events, Category::kOptimizerState), 2 * shard);  // Adam, fp32
  // Every gather casts the shard first; every reduce-scatter output is cast to fp32.
  size_t gathers = 0, casts = 0;
  testing::AllocatedContaining(mp.events, "FSDP gathered", &gathers);
  testing::AllocatedContaining(mp.events, "FSDP low-precision shard", &casts);
  EXPECT_EQ(gathers, casts);
  EXPECT_EQ(testing::AllocatedContaining(mp.events, "FSDP unsharded grad"), full);
  EXPECT_EQ(testing::AllocatedContaining(mp.events, "FSDP sharded grad"), low + shard);
  // Without MixedPrecision the bf16 model (--dtype bf16) keeps bf16 shards and optimizer state.
  o.parallel.fsdp_mixed_precision.clear();
  SimResult pure = SimulateOk(g, o);
  EXPECT_EQ(testing::LiveAtEnd(pure.events, Category::kOptimizerState), low * 2);
  EXPECT_EQ(testing::AllocatedContaining(pure.events, "FSDP low-precision shard"), 0);
  EXPECT_EQ(testing::AllocatedContaining(pure.events, "FSDP sharded grad"), low);
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

// The precision combinations the CLI refuses are refused by the simulator too, for a caller that
// builds SimOptions itself (Notes [ZeRO mixed precision], [FSDP mixed precision]).
TEST(ParallelPrecisionTest, RefusedCombinationsAreRefusedBelowTheCli) {
  Graph g = ZooGraph("mlp");
  SimOptions zero_amp = MlpFp16(2);
  zero_amp.amp = "fp16";
  auto r = Simulate(g, zero_amp);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("does not combine with --amp"), std::string::npos);

  SimOptions mp;
  mp.symbols["batch"] = 8;
  mp.parallel.world = 2;
  mp.parallel.fsdp_mixed_precision = "bf16";
  mp.dtype = "bf16";
  r = Simulate(g, mp);
  ASSERT_FALSE(r.ok()) << "FSDP mixed precision without FSDP";
  EXPECT_NE(std::string(r.status().message()).find("needs FSDP"), std::string::npos);
  mp.parallel.fsdp = "full";
  mp.dtype = "";
  r = Simulate(g, mp);
  ASSERT_FALSE(r.ok()) << "the compute dtype left fp32";
  EXPECT_NE(std::string(r.status().message()).find("model dtype must be bf16"), std::string::npos);
  mp.dtype = "bf16";
  EXPECT_TRUE(Simulate(g, mp).ok());
}

}  // namespace
}  // namespace memsim
