// The planner: its space, cost model, proven bounds and search (docs/plan.md).
#include <gtest/gtest.h>

#include "lib/ir/module_paths.h"

#include <algorithm>

#include "sim/gpus.h"
#include "sim/options/plan_options.h"
#include "sim/plan/cost.h"
#include "sim/plan/search.h"
#include "sim/plan/space.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ZooGraph;

PlanOptions Reduced(const std::string& gpu, int gpus, int64_t global) {
  PlanOptions o;
  o.request.gpu = gpu;
  o.request.gpus = gpus;
  o.request.global_batch = global;
  o.request.precisions = {Precision::kFp32, Precision::kAmpBf16, Precision::kBf16};
  o.request.shardings = {Sharding::kDdp, Sharding::kZero2, Sharding::kFsdp};
  o.request.checkpoints = {Checkpointing{0, false}, Checkpointing{2, false}, Checkpointing{1, false}, Checkpointing{1, true}};
  o.threads = 2;
  o.configure = cli::RunConfigOfArgs;
  return o;
}

std::vector<size_t> FrontIndices(const PlanResult& r) {
  std::vector<size_t> v;
  for (const PlanRow& row : r.front) v.push_back(row.index);
  return v;
}

TEST(PlanSpace, EnumeratesTheAxesAndSkipsWhatMeansNothing) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  PlanModel m = PlanModelOf(g);
  ASSERT_EQ(m.blocks.size(), 12u);
  PlanRequest r;
  r.gpus = 2;
  r.global_batch = 4;
  r.precisions = {Precision::kFp32};
  r.shardings = {Sharding::kDdp, Sharding::kZero3};
  r.checkpoints = {Checkpointing{0, false}};
  // world 1: ddp only (micro-batch 1, 2, 4); world 2: ddp and zero3 (micro-batch 1, 2).
  std::vector<PlanCandidate> c = EnumerateCandidates(r, m);
  EXPECT_EQ(c.size(), 3u + 2u * 2u);
  for (const PlanCandidate& x : c) EXPECT_EQ(x.micro_batch * x.accumulate * x.world, 4);
  r.world_max = 1;
  EXPECT_EQ(EnumerateCandidates(r, m).size(), 3u);
}

TEST(PlanSpace, ArgsSetUpTheCandidate) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  PlanModel m = PlanModelOf(g);
  PlanRequest r;
  r.gpu = "A100-40GB";
  PlanCandidate c{Precision::kBf16, 4, 1, Sharding::kFsdpOffload, Checkpointing{2, true}, 2, 8};
  std::vector<std::string> a = ArgsOf(c, r, m);
  auto has = [&](const std::string& flag, const std::string& v) {
    for (size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == flag && a[i + 1] == v) return true;
    return false;
  };
  EXPECT_TRUE(has("--fsdp", "full"));
  EXPECT_TRUE(has("--offload", "params"));
  EXPECT_TRUE(has("--fsdp-mixed-precision", "bf16"));
  EXPECT_TRUE(has("--checkpoint", "@blocks%2=0"));  // blocks 0, 2, 4, ... (Note [Block selectors])
  EXPECT_TRUE(has("--wrap", "@blocks"));
  EXPECT_TRUE(has("--sac", "torchtitan"));
  EXPECT_TRUE(has("--accumulate", "8"));
  Result<RunConfig> rc = cli::RunConfigOfArgs(a);
  ASSERT_TRUE(rc.ok()) << rc.status().message();
  EXPECT_EQ(rc->sim.parallel.world, 4);
  EXPECT_EQ(*SelectBlocks(g, rc->sim.checkpoint_globs.at(0)), CheckpointedBlocks(c.checkpoint, m.blocks));
}

TEST(PlanSpace, ParsesAxisValuesWithOneLineErrors) {
  EXPECT_EQ(ParseCheckpointing("every-3")->every, 3);
  EXPECT_TRUE(ParseCheckpointing("sac-all")->sac);
  EXPECT_FALSE(ParseCheckpointing("every-0").ok());
  EXPECT_NE(ParseSharding("fsdb").status().message().find("did you mean fsdp?"), std::string::npos);
  EXPECT_FALSE(ParsePrecision("fp8").ok());
  EXPECT_EQ(cli::ParseGpus("8xH100-80GB")->first, 8);
  EXPECT_EQ(cli::ParseGpus("A100-40GB")->second, "A100-40GB");
}

TEST(PlanCost, EveryCatalogGpuHasRates) {
  for (const GpuPerf& p : GpuPerfTable()) {
    EXPECT_TRUE(FindGpu(p.gpu).has_value()) << p.gpu;
    EXPECT_GT(p.fp32_tflops, 0);
    EXPECT_GE(p.bf16_tflops, p.fp32_tflops);
    EXPECT_GT(p.hbm_gbps, 0);
    EXPECT_FALSE(p.source.empty());
  }
  for (std::string_view n : {"T4", "V100-16GB", "A10G", "L4", "RTX3090", "RTX4090", "A100-80GB", "H100-80GB"})
    EXPECT_TRUE(FindGpuPerf(n).has_value()) << n;
}

TEST(PlanCost, TermsMoveAsTheSetupSays) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  PlanModel m = PlanModelOf(g);
  PlanRequest r;
  r.gpus = 8;
  r.global_batch = 64;
  CostModel cost(g, r, m, *FindGpuPerf("A100-80GB"));
  PlanCandidate base{Precision::kFp32, 8, 1, Sharding::kDdp, {}, 4, 2};
  StepTime t0 = *cost.TimeOf(base);
  EXPECT_EQ(t0.recompute_s, 0);
  PlanCandidate ck = base;
  ck.checkpoint = {1, false};
  PlanCandidate sac = base;
  sac.checkpoint = {1, true};
  PlanCandidate half = base;
  half.checkpoint = {2, false};
  const double full = cost.TimeOf(ck)->recompute_s;
  EXPECT_GT(full, 0);
  EXPECT_LT(cost.TimeOf(sac)->recompute_s, full);
  EXPECT_NEAR(cost.TimeOf(half)->recompute_s, full / 2, full * 0.01);
  // bf16 autocast runs the matrix products on tensor cores.
  PlanCandidate amp = base;
  amp.precision = Precision::kAmpBf16;
  EXPECT_LT(cost.TimeOf(amp)->compute_s, t0.compute_s);
  // ZeRO-3 gathers the parameters twice per micro-batch: more traffic than DDP's all-reduce.
  PlanCandidate z3 = base;
  z3.sharding = Sharding::kZero3;
  EXPECT_GT(cost.TimeOf(z3)->comm_s, t0.comm_s);
  PlanCandidate off = z3;
  off.sharding = Sharding::kZero3Offload;
  EXPECT_GT(cost.TimeOf(off)->offload_s, 0);
  // One rank: no communication.
  PlanCandidate one{Precision::kFp32, 1, 1, Sharding::kDdp, {}, 8, 8};
  EXPECT_EQ(cost.TimeOf(one)->comm_s, 0);
}

// Note [Planner bounds]: the floor never exceeds what the simulator finds, and a candidate whose
// floor exceeds the allocator's share of the GPU does not fit.
TEST(PlanBounds, FloorIsALowerBoundOfTheSimulatedPeak) {
  for (auto [name, gpu] : {std::pair{"nanogpt_gpt2_small", "T4"}, std::pair{"bert_small", "T4"}, std::pair{"resnet18", "A100-40GB"}}) {
    Graph g = ZooGraph(name);
    {
      PlanOptions o = Reduced(gpu, 2, 32);
      o.request.precisions = {Precision::kFp32, Precision::kAmpBf16, Precision::kAmpFp16, Precision::kBf16};
      o.request.shardings = {Sharding::kDdp, Sharding::kZero1, Sharding::kZero3, Sharding::kFsdp, Sharding::kFsdpOffload};
      o.exhaustive = true;
      Result<PlanResult> r = Plan(g, o);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->simulated, r->candidates) << name;
      size_t checked = 0;
      for (const PlanRow& row : r->all) {
        if (!row.fits) continue;
        EXPECT_LE(row.floor_bytes, row.row.peak_live_bytes) << name << " " << CandidateLabel(row.candidate);
        ++checked;
      }
      EXPECT_GT(checked, 10u) << name << " " << gpu;
    }
  }
}

// The pruned search finds the same front and plan as simulating every candidate, whatever the
// thread count.
TEST(PlanSearch, PrunedEqualsExhaustiveOnAReducedSpace) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  for (const char* gpu : {"T4", "A100-40GB"}) {
    PlanOptions o = Reduced(gpu, 2, 16);
    o.request.micro_batches = {1, 2, 4, 8};
    o.front_span = 0;  // the whole front
    PlanOptions all = o;
    all.exhaustive = true;
    Result<PlanResult> pruned = Plan(g, o), every = Plan(g, all);
    ASSERT_TRUE(pruned.ok() && every.ok());
    EXPECT_EQ(FrontIndices(*pruned), FrontIndices(*every)) << gpu;
    EXPECT_EQ(pruned->chosen, every->chosen) << gpu;
    EXPECT_LT(pruned->simulated, every->simulated) << gpu;
    ASSERT_TRUE(pruned->chosen.has_value());
    EXPECT_FALSE(pruned->front[*pruned->chosen].row.oom);
    o.threads = 1;
    EXPECT_EQ(FrontIndices(*Plan(g, o)), FrontIndices(*pruned)) << gpu;
    // No fitting plan is both faster and smaller than a front plan.
    for (const PlanRow& f : every->front)
      for (const PlanRow& x : every->front)
        if (x.index != f.index) EXPECT_FALSE(x.time.total() <= f.time.total() && x.row.used_bytes() < f.row.used_bytes());
  }
}

// Stopping once the objective is settled keeps the front exact below the step time it reports, and
// the chosen plan is the exhaustive search's.
TEST(PlanSearch, SettledSearchKeepsTheFrontBelowItsHorizon) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  for (PlanObjective obj : {PlanObjective::kTime, PlanObjective::kBalanced}) {
    PlanOptions o = Reduced("T4", 2, 16);
    o.objective = obj;
    o.front_span = 1.2;
    PlanOptions all = o;
    all.exhaustive = true;
    Result<PlanResult> fast = Plan(g, o), every = Plan(g, all);
    ASSERT_TRUE(fast.ok() && every.ok() && fast->chosen && every->chosen);
    EXPECT_EQ(fast->front[*fast->chosen].index, every->front[*every->chosen].index) << ObjectiveName(obj);
    EXPECT_GT(fast->beyond_horizon, 0u) << ObjectiveName(obj);
    std::vector<size_t> below;
    for (const PlanRow& r : every->front)
      if (r.time.total() < fast->front_exact_below_s) below.push_back(r.index);
    EXPECT_EQ(FrontIndices(*fast), below) << ObjectiveName(obj);
  }
}

TEST(PlanSearch, ObjectivesPickFromTheFront) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  PlanOptions o = Reduced("T4", 2, 16);
  o.front_span = 0;
  Result<PlanResult> t = Plan(g, o);
  o.objective = PlanObjective::kMemory;
  Result<PlanResult> mem = Plan(g, o);
  ASSERT_TRUE(t.ok() && mem.ok() && t->chosen && mem->chosen);
  EXPECT_EQ(*t->chosen, 0u);
  EXPECT_EQ(*mem->chosen, mem->front.size() - 1);
  EXPECT_LE(mem->front[*mem->chosen].row.used_bytes(), t->front[*t->chosen].row.used_bytes());
}

TEST(PlanSearch, BadInputNamesTheOption) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  PlanOptions o = Reduced("H100-80G", 8, 64);
  Result<PlanResult> r = Plan(g, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--gpus: unknown GPU \"H100-80G\": did you mean H100-80GB?"), std::string::npos)
      << r.status().message();
  o = Reduced("T4", 8, 0);
  EXPECT_NE(Plan(g, o).status().message().find("--global-batch"), std::string::npos);
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

// The mesh shardings (FSDP2, without resharding, HSDP) and tensor parallel: the floor stays a
// lower bound, tp runs the rewritten graph, and the pruned search finds the exhaustive front.
TEST(PlanMesh, Fsdp2HsdpAndTpCandidates) {
  Graph g = testing::ZooGraph("llama_1b");
  PlanOptions o = Reduced("A100-80GB", 4, 4);
  o.request.precisions = {Precision::kBf16};
  o.request.shardings = {Sharding::kDdp, Sharding::kFsdp2, Sharding::kFsdp2NoReshard, Sharding::kHsdp};
  o.request.checkpoints = {Checkpointing{0, false}, Checkpointing{1, false}};
  o.request.micro_batches = {1};
  o.request.tp_degrees = {1, 2};
  o.exhaustive = true;
  Result<PlanResult> all = Plan(g, o);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->invalid, 0u) << all->first_error;
  size_t tp = 0, hsdp = 0, mesh2d = 0;
  for (const PlanRow& row : all->all) {
    ASSERT_TRUE(row.row.status.ok()) << CandidateLabel(row.candidate);
    if (row.fits) EXPECT_LE(row.floor_bytes, row.row.peak_live_bytes) << CandidateLabel(row.candidate);
    tp += row.candidate.tp > 1;
    hsdp += row.candidate.sharding == Sharding::kHsdp;
    // with tp, more than one data-parallel rank is FSDP2's 2-D mesh (HSDP with tp: not simulated)
    if (row.candidate.tp > 1 && row.candidate.world > 1) {
      ++mesh2d;
      EXPECT_TRUE(row.candidate.sharding == Sharding::kFsdp2 || row.candidate.sharding == Sharding::kFsdp2NoReshard);
    }
  }
  EXPECT_EQ(tp, 6u);  // world 1 (DDP) and world 2 (FSDP2, without resharding), two checkpointings each
  EXPECT_EQ(mesh2d, 4u);
  EXPECT_EQ(hsdp, 2u);
  // tp=2 holds half of the decoder layers' weights: less than one rank of DDP.
  auto peak_of = [&](int t, Sharding s, int w) {
    for (const PlanRow& row : all->all)
      if (row.candidate.tp == t && row.candidate.sharding == s && row.candidate.world == w && row.candidate.checkpoint.every == 0)
        return row.row.peak_live_bytes;
    return int64_t{-1};
  };
  EXPECT_LT(peak_of(2, Sharding::kDdp, 1), peak_of(1, Sharding::kDdp, 1));
  EXPECT_LT(peak_of(1, Sharding::kFsdp2, 4), peak_of(1, Sharding::kFsdp2, 2));
  EXPECT_LT(peak_of(2, Sharding::kFsdp2, 2), peak_of(1, Sharding::kFsdp2, 2));  // FSDP2 × TP: the tp half sharded
  o.exhaustive = false;
  o.front_span = 0;
  Result<PlanResult> pruned = Plan(g, o);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(FrontIndices(*pruned), FrontIndices(*all));
  // The snippets name the mesh.
  PlanCandidate c{Precision::kBf16, 4, 1, Sharding::kHsdp, {}, 1, 1};
  const std::vector<std::string> args = ArgsOf(c, o.request, PlanModelOf(g));
  EXPECT_NE(std::find(args.begin(), args.end(), "dp_replicate=2,dp_shard=2"), args.end());
}

// The answer moves as it should: more GPUs give a faster plan, a larger global batch a slower
// step, a faster GPU a faster plan, and the plan needs no more than the GPU has.
TEST(PlanSearch, AnswerMovesWithBudgetGpuAndBatch) {
  Graph g = testing::ZooGraph("nanogpt_gpt2_small");
  auto chosen = [&](const std::string& gpu, int gpus, int64_t global) {
    PlanOptions o = Reduced(gpu, gpus, global);
    o.request.micro_batches = {1, 2, 4, 8};
    Result<PlanResult> r = Plan(g, o);
    EXPECT_TRUE(r.ok() && r->chosen);
    return r->front[*r->chosen];
  };
  const PlanRow one = chosen("T4", 1, 16), two = chosen("T4", 2, 16);
  EXPECT_EQ(two.candidate.world, 2);
  EXPECT_LT(two.time.total(), one.time.total());
  const PlanRow more = chosen("T4", 2, 32);
  EXPECT_GT(more.time.total(), two.time.total());
  const PlanRow big = chosen("A100-40GB", 2, 16);
  EXPECT_LT(big.time.total(), two.time.total());
  EXPECT_LE(two.row.used_bytes(), FindGpu("T4")->memory_bytes);
}

}  // namespace
}  // namespace memsim
