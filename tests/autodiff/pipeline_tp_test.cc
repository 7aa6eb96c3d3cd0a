// Pipeline parallel × tensor parallel (--mesh pp=P,tp=T, with dp_shard the 3-D mesh): the stage
// split of a Hugging Face decoder (its rotary tables made again on every stage), each stage
// scattering only its own shards, and every distinct rank simulated (Note [Pipeline parallel]).
#include <gtest/gtest.h>

#include "lib/autodiff/setups/pipeline.h"
#include "lib/io/graph_json.h"
#include "lib/ir/tensor_parallel.h"
#include "sim/ranks.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using testing::SimulateOk;
using test_data::TestDataPath;

/// transformers' LlamaForCausalLM, four layers (tests/oracle/record_pp_tp_2_13.sh).
Graph HfLlama() {
  Result<Graph> g = LoadGraph(TestDataPath("traces_pp_tp_2_13/graphs/hf_llama_pp.json"));
  EXPECT_TRUE(g.ok());
  return *std::move(g);
}

SimOptions PpTp(int rank, int dp_shard = 1) {
  SimOptions o = testing::PipelineOpts(2, "1f1b", 4, 4, 64);
  o.parallel.mesh.tp = 2;
  o.parallel.mesh.dp_shard = dp_shard;
  o.parallel.world = 4 * dp_shard;
  o.parallel.rank = rank;
  if (dp_shard > 1) o.parallel.wrap_modules = {"model.layers.*"};
  o.parallel.fsdp2_reshard_after_forward = false;
  return o;
}

int Count(const EventStream& s, const std::string& part) {
  size_t n = 0;
  testing::AllocatedContaining(s, part, &n);
  return static_cast<int>(n);
}

TEST(PipelineSplitTest, LaterStagesMakeTheRotaryTablesAgain) {
  Graph g = HfLlama();
  Result<PipelineStagePlan> s0 = PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 0, {});
  Result<PipelineStagePlan> s1 = PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 1, {});
  ASSERT_TRUE(s0.ok()) << s0.status().message();
  ASSERT_TRUE(s1.ok()) << s1.status().message();
  const PpStage& a = s0->local[0];
  const PpStage& z = s1->local[0];
  EXPECT_TRUE(a.prologue.empty());  // the first stage makes them in its own ops
  ASSERT_FALSE(z.prologue.empty());
  for (OpId o : z.prologue) {
    EXPECT_LT(o, a.end);
    EXPECT_EQ(g.ops[o].module.rfind("model.layers", 0), std::string::npos) << g.ops[o].name;
  }
  // The one activation crossing is the hidden state; the embedding stays on the first stage.
  EXPECT_EQ(z.recv, a.send);
  auto holds = [&](const PipelineStagePlan& p, const std::string& name) {
    for (TensorId t = 0; t < g.tensors.size(); ++t)
      if (g.tensors[t].name == name) return static_cast<bool>(p.buffers[t]);
    return false;
  };
  // Both stages keep the rotary module whole: inv_freq, and original_inv_freq that no op reads.
  EXPECT_TRUE(holds(*s0, "model.rotary_emb.inv_freq"));
  EXPECT_TRUE(holds(*s1, "model.rotary_emb.inv_freq"));
  EXPECT_TRUE(holds(*s0, "model.rotary_emb.original_inv_freq"));
  EXPECT_TRUE(holds(*s1, "model.rotary_emb.original_inv_freq"));
}

TEST(PipelineSplitTest, AnActivationOfTheInputsCrossingBesideTheHiddenStateIsRefused) {
  // A skip from before the blocks to after them: e is made from the input, so no stage can make it
  // again; stage 1 would read it besides the hidden state.
  Graph g = testing::ParseBody(R"(
    "inputs": [{"name": "x", "shape": [4, 8]}],
    "parameters": [{"name": "layers.0.w", "shape": [8, 8]}, {"name": "layers.1.w", "shape": [8, 8]}],
    "ops": [
      {"op": "relu", "module": "embed", "inputs": ["x"], "outputs": ["e"]},
      {"op": "matmul", "module": "layers.0", "inputs": ["e", "layers.0.w"], "outputs": ["a"]},
      {"op": "matmul", "module": "layers.1", "inputs": ["a", "layers.1.w"], "outputs": ["b"]},
      {"op": "add", "module": "head", "inputs": ["b", "e"], "outputs": ["c"]},
      {"op": "mean", "inputs": ["c"], "outputs": ["loss"]}],
    "loss": "loss")");
  Result<PipelineStagePlan> p = PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 1, {1, 1});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("stage 1 of t reads 2 activations of earlier stages"), std::string::npos)
      << p.status().message();
}

TEST(PipelineTpTest, EachStageScattersItsOwnShardsOnly) {
  Result<Graph> g = ApplyTensorParallel(HfLlama(), {2, "layers", false});
  ASSERT_TRUE(g.ok()) << g.status().message();
  // tp rank 0 is its group's scatter source: one staging buffer per sharded weight of its stage's
  // two layers (7 each); tp rank 1 stages none.
  SimResult r0 = SimulateOk(*g, PpTp(0));
  SimResult r1 = SimulateOk(*g, PpTp(1));
  SimResult r2 = SimulateOk(*g, PpTp(2));
  EXPECT_EQ(Count(r0.events, "scatter staging"), 14);
  EXPECT_EQ(Count(r1.events, "scatter staging"), 0);
  EXPECT_EQ(Count(r2.events, "scatter staging"), 14);
  EXPECT_EQ(Count(r0.events, "model.layers.2."), 0);
  EXPECT_EQ(Count(r2.events, "model.layers.0."), 0);
  // The world mesh was made before the model: no DeviceMesh allocation in the traced step.
  EXPECT_EQ(Count(r0.events, "DeviceMesh"), 0);
}

TEST(PipelineTpTest, CheckpointedLayersKeepTheirStatePerMicrobatchInFlight) {
  Result<Graph> g = ApplyTensorParallel(HfLlama(), {2, "layers", false});
  ASSERT_TRUE(g.ok());
  SimOptions o = PpTp(0);
  SimResult plain = SimulateOk(*g, o);
  o.checkpoint_globs = {"model.layers.*"};
  SimResult r = SimulateOk(*g, o);
  // 1F1B on stage 0 holds two microbatches' graphs at once (F0 F1 B0 F2 B1 F3 B2 B3): each of its
  // two layers is entered and recomputed once per microbatch, with its own RNG state and args.
  EXPECT_EQ(Count(r.events, "checkpoint: forward RNG state"), 8);
  EXPECT_EQ(Count(r.events, "checkpoint: fork_rng saved state"), 8);
  EXPECT_LT(r.peak.peak_live_bytes, plain.peak.peak_live_bytes);
}

TEST(PipelineTpTest, RanksStandInForTheirStageAndTpCoordinate) {
  Result<Graph> g = ApplyTensorParallel(HfLlama(), {2, "layers", false});
  ASSERT_TRUE(g.ok());
  RunConfig c;
  c.sim = PpTp(0, /*dp_shard=*/2);
  Result<std::vector<RankRun>> runs = RunRanks(*g, c);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  // pp × dp_shard × tp = 2 × 2 × 2: tp 0 and 1 of each stage; the dp_shard ranks are alike (even dims 0).
  ASSERT_EQ(runs->size(), 4u);
  EXPECT_EQ(runs->at(0).ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(runs->at(1).ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(runs->at(2).ranks, (std::vector<int>{4, 6}));
  EXPECT_EQ(runs->at(3).ranks, (std::vector<int>{5, 7}));
}

}  // namespace
}  // namespace memsim
