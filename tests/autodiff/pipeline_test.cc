// Pipeline parallel (--mesh pp=N): the stage split, the schedules' order and what they hold,
// and one stage rank's step (Note [Pipeline parallel] in docs/parallel.md).
#include <gtest/gtest.h>

#include <set>

#include "lib/autodiff/pipeline.h"
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

TEST(PipelineScheduleTest, GPipeRunsEveryForwardThenEveryBackward) {
  EXPECT_EQ(ScheduleOrder(PpSchedule::kGPipe, 2, 1, 0, 4), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(ScheduleOrder(PpSchedule::kGPipe, 2, 1, 1, 4), "F0 F1 F2 F3 B0 B1 B2 B3");
}

TEST(PipelineScheduleTest, OneFOneBWarmsUpStagesMinusRankForwards) {
  // Schedule1F1B: stage r runs min(M, stages - r) forwards before its first backward.
  EXPECT_EQ(ScheduleOrder(PpSchedule::k1F1B, 2, 1, 0, 4), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(ScheduleOrder(PpSchedule::k1F1B, 2, 1, 1, 4), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(ScheduleOrder(PpSchedule::k1F1B, 4, 1, 0, 8), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(ScheduleOrder(PpSchedule::k1F1B, 4, 1, 2, 4), "F0 F1 B0 F2 B1 F3 B2 B3");
}

/// Records what each Python name of the schedule holds after every statement.
struct Holds : PpRuntime {
  std::vector<PpSend> names[kNames];
  std::string log;
  void Forward(int, int, const std::string& label) override { log += label + Held() + " "; }
  void Backward(int, int, const std::string& label) override { log += label + Held() + " "; }
  void Bind(Name n, std::vector<PpSend> s) override { names[n] = std::move(s); }
  void Append(Name n, PpSend s) override { names[n].push_back(s); }
  std::string Held() const {
    std::string h;
    for (const auto& v : names)
      for (const PpSend& x : v) h += std::string(x.grad ? "g" : "a") + std::to_string(x.mb);
    return h.empty() ? "" : "[" + h + "]";
  }
};

TEST(PipelineScheduleTest, GPipeKeepsEverySendWorkUntilItReturns) {
  Holds h;
  RunSchedule(PpSchedule::kGPipe, 2, 1, 0, 3, &h);
  // fwd_sends_to_wait keeps each activation send's Work (and so the activation) to the end.
  EXPECT_EQ(h.log, "F0 F1[a0] F2[a0a1] B0[a0a1a2] B1[a0a1a2] B2[a0a1a2] ");
  EXPECT_EQ(h.Held(), "");  // every name unbound on return
  Holds last;
  RunSchedule(PpSchedule::kGPipe, 2, 1, 1, 3, &last);
  EXPECT_EQ(last.log, "F0 F1 F2 B0 B1[g0] B2[g0g1] ");
}

TEST(PipelineScheduleTest, OneFOneBHoldsTheWarmupSendWorkThroughTheSteadyState) {
  Holds h;
  RunSchedule(PpSchedule::k1F1B, 2, 1, 0, 4, &h);
  // send_work keeps microbatch 0's activation until the cooldown rebinds it; fwd_sends the last
  // forward's until the schedule returns.
  EXPECT_EQ(h.log, "F0 F1[a0a0] B0[a1a0] F2[a1a0] B1[a2a0] F3[a2a0] B2[a3a0] B3[a3] ");
  Holds last;
  RunSchedule(PpSchedule::k1F1B, 2, 1, 1, 4, &last);
  // bwd_sends holds the previous input grad while the next backward runs.
  EXPECT_EQ(last.log, "F0 B0 F1[g0] B1[g0] F2[g1] B2[g1] F3[g2] B3[g2] ");
}

TEST(PipelineScheduleTest, Interleaved1F1BRunsTheRuntimesActionList) {
  // Loop-style: rank 0 holds stages 0 and 2 of 4; warmup (V − 1)·M/rounds + 2·(N − 1 − r) = 4
  // forwards, then 1F1B, the last stage's backwards before the first's.
  EXPECT_EQ(ScheduleOrder(PpSchedule::kInterleaved1F1B, 2, 2, 0, 4),
            "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
  EXPECT_EQ(ScheduleOrder(PpSchedule::kInterleaved1F1B, 2, 2, 1, 4),
            "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3");
  // Every send's Work stays in send_ops to the end of the step, popped last first.
  Holds h;
  RunSchedule(PpSchedule::kInterleaved1F1B, 2, 2, 1, 4, &h);
  EXPECT_EQ(h.log.substr(0, 35), "1F0 1F1[a0] 3F0[a0a1] 3B0[a0a1] 3F1");
  EXPECT_EQ(h.Held(), "");
}

TEST(PipelineScheduleTest, ZeroBubbleSchedulesSplitTheBackwardIntoInputAndWeight) {
  // The compute actions of the lowered lists (tests/data/pp_actions_2_13.txt), in the order the
  // runtime performs them; DualPipeV's OVERLAP_F_B runs its forward, then its full backward.
  EXPECT_EQ(ScheduleOrder(PpSchedule::kInterleavedZeroBubble, 2, 2, 1, 4),
            "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 1I2 3W3 1I3 1W2 1W3");
  EXPECT_EQ(ScheduleOrder(PpSchedule::kZBVZeroBubble, 2, 2, 0, 4),
            "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 0I3 0W3");
  EXPECT_EQ(ScheduleOrder(PpSchedule::kDualPipeV, 2, 2, 0, 4),
            "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 0W3");
  EXPECT_EQ(ScheduleOrder(PpSchedule::kDualPipeV, 2, 2, 1, 4),
            "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 2W3 1W3");
}

/// Records the V's same-rank hand-overs: ">" set_local_fwd_input, "<" set_local_bwd_input.
struct Hands : PpRuntime {
  std::string log;
  void Forward(int j, int mb, const std::string&) override { log += "F" + std::to_string(j) + std::to_string(mb) + " "; }
  void Backward(int j, int mb, const std::string&) override { log += "B" + std::to_string(j) + std::to_string(mb) + " "; }
  void BackwardInput(int j, int mb, const std::string&) override { log += "I" + std::to_string(j) + std::to_string(mb) + " "; }
  void BackwardWeight(int j, int mb, const std::string&) override { log += "W" + std::to_string(j) + std::to_string(mb) + " "; }
  void PassForward(int j, int next, int mb) override { log += ">" + std::to_string(j) + std::to_string(next) + std::to_string(mb) + " "; }
  void PassBackward(int j, int prev, int mb) override { log += "<" + std::to_string(j) + std::to_string(prev) + std::to_string(mb) + " "; }
  void Bind(Name, std::vector<PpSend>) override {}
  void Append(Name, PpSend) override {}
};

TEST(PipelineScheduleTest, TheVsMiddleStagesHandOverOnTheirRank) {
  // ZBV, 2 ranks: rank 1 holds stages 1 (local 0) and 2 (local 1); each forward of stage 1 sets
  // stage 2's input, each I of stage 2 sets stage 1's output grad. Rank 0 (stages 0 and 3) has
  // no adjacent pair: no hand-over.
  Hands r1;
  RunSchedule(PpSchedule::kZBVZeroBubble, 2, 2, 1, 4, &r1);
  EXPECT_EQ(r1.log.substr(0, 39), "F00 >010 F10 F01 >011 F11 I10 <100 W10 ");
  Hands r0;
  RunSchedule(PpSchedule::kZBVZeroBubble, 2, 2, 0, 4, &r0);
  EXPECT_EQ(r0.log.find_first_of("<>"), std::string::npos);
  // DualPipeV's full backwards hand over too.
  Hands d1;
  RunSchedule(PpSchedule::kDualPipeV, 2, 2, 1, 4, &d1);
  EXPECT_NE(d1.log.find("B10 <100 "), std::string::npos);
}

TEST(PipelineSplitTest, TorchtitanWeighsEmbeddingAndHeadAsOneBlockEach) {
  EXPECT_EQ(TorchtitanSplit(12, 2), (std::vector<int>{6, 6}));
  EXPECT_EQ(TorchtitanSplit(12, 4), (std::vector<int>{3, 4, 3, 2}));
  EXPECT_EQ(TorchtitanSplit(32, 4), (std::vector<int>{8, 9, 8, 7}));
  EXPECT_EQ(TorchtitanSplit(2, 2), (std::vector<int>{1, 1}));
}

Graph Cs336() {
  Result<Graph> g = LoadGraph(TestDataPath("traces_2_13/graphs/cs336_small.json"));
  EXPECT_TRUE(g.ok());
  return *std::move(g);
}

TEST(PipelineSplitTest, StagesCutAtBlocksWithTheEmbeddingFirstAndTheLossLast) {
  Graph g = Cs336();
  Result<PipelineStagePlan> s0 = PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 0, {});
  Result<PipelineStagePlan> s1 = PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 1, {});
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(s0->local[0].begin, 0u);
  EXPECT_EQ(s0->local[0].end, s1->local[0].begin);
  EXPECT_EQ(s1->local[0].end, g.ops.size());
  EXPECT_EQ(g.ops[s0->local[0].begin].module, "token_embeddings");
  EXPECT_EQ(g.ops[s1->local[0].begin].module.rfind("layers.6", 0), 0u);
  EXPECT_EQ(s0->local[0].recv, kNone);
  EXPECT_EQ(s1->local[0].send, kNone);
  EXPECT_EQ(s0->local[0].send, s1->local[0].recv);  // layers.5's output, the one activation crossing
  EXPECT_TRUE(s0->params[0]);     // token_embeddings.weight
  EXPECT_FALSE(s1->params[0]);
  EXPECT_TRUE(s1->params.back());  // lm_head.weight
  EXPECT_TRUE(s0->inputs[g.FindTensor("ids")]);
  EXPECT_FALSE(s0->inputs[g.FindTensor("target")]);
  EXPECT_TRUE(s1->inputs[g.FindTensor("target")]);
  // A split that does not cover the blocks, or leaves a stage without ops, is refused.
  EXPECT_FALSE(PlanPipelineStage(g, PpSchedule::k1F1B, 2, 1, 0, {5, 5}).ok());
  EXPECT_FALSE(PlanPipelineStage(testing::ZooGraph("mlp"), PpSchedule::k1F1B, 2, 1, 0, {}).ok());
}

TEST(PipelineSplitTest, TheRootsBuffersStayOnEveryStageAndEachParameterHasItsStage) {
  Result<Graph> g = LoadGraph(TestDataPath("traces_moe_2_13/graphs/moe_decoder_tiny.json"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  // ZBV over 2 ranks of a 2-layer decoder: rank 0 holds stage 0 (the embedding alone) and stage 3
  // (norm and head alone); neither reads the rotary cos/sin, which pipeline_llm keeps all the same.
  Result<PipelineStagePlan> r0 = PlanPipelineStage(*g, PpSchedule::kZBVZeroBubble, 2, 2, 0, {});
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  ASSERT_EQ(r0->local.size(), 2u);
  EXPECT_EQ(r0->local[1].index, 3);
  EXPECT_TRUE(r0->buffers[g->FindTensor("cos")]);
  EXPECT_TRUE(r0->buffers[g->FindTensor("sin")]);
  auto stage_of = [&](const PipelineStagePlan& p, const std::string& name) {
    for (size_t k = 0; k < g->parameters.size(); ++k)
      if (g->tensors[g->parameters[k]].name == name) return p.param_stage[k];
    return -2;
  };
  EXPECT_EQ(stage_of(*r0, "embed_tokens.weight"), 0);
  EXPECT_EQ(stage_of(*r0, "lm_head.weight"), 1);  // local stage 1 (stage 3)
  EXPECT_EQ(stage_of(*r0, "layers.0.moe.experts.w1"), -1);
  Result<PipelineStagePlan> r1 = PlanPipelineStage(*g, PpSchedule::kZBVZeroBubble, 2, 2, 1, {});
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(stage_of(*r1, "layers.0.moe.experts.w1"), 0);  // stage 1
  EXPECT_EQ(stage_of(*r1, "layers.1.moe.experts.w1"), 1);  // stage 2
}

SimOptions PpCs336(const std::string& schedule) { return testing::PipelineOpts(2, schedule, 4, 4, 64); }

TEST(PipelineStepTest, FirstStageOfOneFOneBHoldsFewerMicrobatchesThanGPipe) {
  Graph g = Cs336();
  SimResult gpipe = SimulateOk(g, PpCs336("gpipe"));
  SimResult one = SimulateOk(g, PpCs336("1f1b"));
  // The same parameters, grads and optimizer state: only the activations in flight differ.
  EXPECT_EQ(gpipe.peak.phase_peaks[int(Phase::kOptimizer)], one.peak.phase_peaks[int(Phase::kOptimizer)]);
  // When the first backward starts, GPipe holds all four microbatches' graphs, 1F1B two.
  auto live_at_b0 = [](const EventStream& s) {
    size_t b0 = 0;
    for (const EventStream::Action& a : s.actions)
      if (a.label == "B0") b0 = a.event;
    int64_t live = 0;
    for (size_t i = 0; i < b0; ++i) live += s.events[i].kind == EventKind::kAlloc ? s.bytes(s.events[i]) : -s.bytes(s.events[i]);
    return live;
  };
  const int64_t per_mb = (live_at_b0(gpipe.events) - live_at_b0(one.events)) / 2;
  EXPECT_GT(per_mb, 30'000'000);  // ~38 MB of saved activations per microbatch of 6 blocks
  EXPECT_EQ(gpipe.peak.phase_peaks[int(Phase::kForward)], 410'560'704);  // the trace's, byte for byte
  EXPECT_EQ(one.peak.phase_peaks[int(Phase::kBackward)], 601'780'320);
  // Eight actions, one mark each.
  ASSERT_EQ(one.events.actions.size(), 8u);
  EXPECT_EQ(one.events.actions[2].label, "B0");
  // The recv-grad buffers of the first stage: one per microbatch, an output's size.
  int grads = 0;
  for (const Buffer& b : one.events.buffers) grads += b.name.rfind("recv_grad_for_0_from_1", 0) == 0;
  EXPECT_EQ(grads, 4);
}

TEST(PipelineStepTest, InterleavedRanksHoldTwoStagesLoopStyle) {
  Graph g = Cs336();
  Result<PipelineStagePlan> r0 = PlanPipelineStage(g, PpSchedule::kInterleaved1F1B, 2, 2, 0, {});
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  ASSERT_EQ(r0->local.size(), 2u);
  EXPECT_EQ(r0->local[0].index, 0);
  EXPECT_EQ(r0->local[1].index, 2);
  EXPECT_EQ(r0->blocks, (std::vector<int>{3, 4, 3, 2}));  // 12 blocks over 4 stages
  EXPECT_TRUE(r0->inputs[g.FindTensor("ids")]);
  EXPECT_FALSE(r0->inputs[g.FindTensor("target")]);
  SimOptions o = PpCs336("interleaved1f1b");
  o.optimizer = "sgd";
  o.parallel.pp_stages_per_rank = 2;
  SimResult one = SimulateOk(g, o);
  // Stage 2 receives activations, stages 0 and 2 grads: 4 + 8 recv buffers.
  int acts = 0, grads = 0;
  for (const Buffer& b : one.events.buffers) {
    acts += b.name.rfind("recv_for_2_from_1", 0) == 0;
    grads += b.name.rfind("recv_grad_for_", 0) == 0;
  }
  EXPECT_EQ(acts, 4);
  EXPECT_EQ(grads, 8);
  ASSERT_EQ(one.events.actions.size(), 16u);
  EXPECT_EQ(one.events.actions[2].label, "2F0");
}

TEST(PipelineStepTest, OnCudaASentActivationDiesWithItsLastHolderNotWithTheRuntimesSendOps) {
  Graph g = Cs336();
  // Rank 0 of Interleaved1F1B holds stages 0 and 2, whose outputs (add_17, add_59: each stage's
  // last block's residual add) it sends to rank 1. Which of them are alive when the last action
  // (0B3) starts: gloo's SendWork holds each sent output in send_ops to the end of the step; NCCL's
  // coalesced Work releases it once sent, so only fwd_cache's microbatch 3 of stage 0 is left
  // (Note [Pipeline sends on CUDA]).
  auto live_outputs = [&](const std::string& profile) {
    SimOptions o = PpCs336("interleaved1f1b");
    o.optimizer = "sgd";
    o.profile = profile;
    o.parallel.pp_stages_per_rank = 2;
    SimResult r = SimulateOk(g, o);
    EXPECT_EQ(r.events.actions.back().label, "0B3");
    std::vector<int> live(r.events.buffers.size(), 0);
    for (size_t i = 0; i < r.events.actions.back().event; ++i) {
      const MemEvent& e = r.events.events[i];
      live[e.buffer] = e.kind == EventKind::kAlloc;
    }
    std::pair<int, int> n{0, 0};
    for (size_t b = 0; b < live.size(); ++b) {
      n.first += live[b] && r.events.buffers[b].name == "add_17";
      n.second += live[b] && r.events.buffers[b].name == "add_59";
    }
    return n;
  };
  EXPECT_EQ(live_outputs("cpu"), std::make_pair(4, 4));
  EXPECT_EQ(live_outputs("cuda"), std::make_pair(1, 0));
}

TEST(PipelineStepTest, SplitBackwardKeepsTheGraphUntilW) {
  Graph g = Cs336();
  SimOptions o = PpCs336("zbv");
  o.optimizer = "sgd";
  o.parallel.pp_stages_per_rank = 2;
  SimResult zbv = SimulateOk(g, o);
  o.parallel.pp_schedule = "dualpipev";
  SimResult dual = SimulateOk(g, o);
  // Rank 0 (stages 0 and 3) against its trace, byte for byte (traces_pp_2_13).
  EXPECT_EQ(zbv.peak.phase_peaks[int(Phase::kForward)], 578'079'592);
  EXPECT_EQ(zbv.peak.phase_peaks[int(Phase::kBackward)], 602'703'716);
  EXPECT_EQ(dual.peak.phase_peaks[int(Phase::kBackward)], 608'996'200);
  // stage_backward_input sets the recv buffer's .grad and nothing resets it: ZBV's four I on
  // stage 3 leave four input grads held to the end of the step, DualPipeV's one I (its other
  // backwards are full: val.grad = None) one; 3 × a 1 × 64 × 768 fp32 activation.
  EXPECT_EQ(zbv.peak.phase_peaks[int(Phase::kOptimizer)] - dual.peak.phase_peaks[int(Phase::kOptimizer)], 3 * 196'608);
  // Actions as the source names them: stage 0's I (its input needs no grad) does nothing, its W
  // runs the whole backward.
  ASSERT_EQ(zbv.events.actions.size(), 24u);
  EXPECT_EQ(zbv.events.actions[4].label, "3I0");
}

TEST(PipelineStepTest, SplitBackwardRecomputesACheckpointOncePerGraphTask) {
  Graph g = Cs336();
  SimOptions o = PpCs336("zbv");
  o.parallel.pp_stages_per_rank = 2;
  SimResult plain = SimulateOk(g, o);
  o.checkpoint_globs = {"layers.*"};
  SimResult ac = SimulateOk(g, o);
  // Rank 0 (stages 0 and 3) against its trace (traces_pp_2_13, --ac full): the forward byte for
  // byte, the backward 144 bytes over the trace's 617'208'484. Its peak holds the copies each W
  // group pass's recomputation leaves with the nodes still waiting (a copy for the nodes whose
  // holders are gone too would make it 1.9 % higher).
  EXPECT_EQ(ac.peak.phase_peaks[int(Phase::kForward)], 510'939'816);
  EXPECT_EQ(ac.peak.phase_peaks[int(Phase::kBackward)], 617'208'628);
  EXPECT_LT(ac.peak.phase_peaks[int(Phase::kForward)], plain.peak.phase_peaks[int(Phase::kForward)]);
  // The reentrant checkpoint and SAC are refused with a split backward.
  o.checkpoint_impl = "reentrant";
  EXPECT_FALSE(Simulate(g, o).ok());
}

TEST(PipelineStepTest, EveryStageIsItsOwnRank) {
  Graph g = Cs336();
  RunConfig c;
  c.sim = PpCs336("1f1b");
  Result<std::vector<RankRun>> runs = RunRanks(g, c);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ(runs->at(1).ranks, std::vector<int>{1});
}

}  // namespace
}  // namespace memsim
