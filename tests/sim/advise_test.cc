#include "sim/advise.h"

#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

#include <algorithm>

#include "lib/io/graph_json.h"
#include "lib/ir/lora.h"

namespace memsim {
namespace {

using testing::ZooGraph;


const Change* Find(const std::vector<Change>& changes, const std::string& prefix) {
  auto it = std::find_if(changes.begin(), changes.end(), [&](const Change& c) { return c.what.starts_with(prefix); });
  return it == changes.end() ? nullptr : &*it;
}

TEST(AdviseTest, BlockGlobsSelectTheBlocksAndNothingNestedInThem) {
  std::vector<std::string> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back("transformer.h." + std::to_string(i));
  EXPECT_EQ(BlockGlobs(blocks), (std::vector<std::string>{"transformer.h.[0-9]", "transformer.h.[0-9][0-9]"}));
  EXPECT_EQ(BlockGlobs({"layer1.0", "layer1.1", "layer2.0"}), (std::vector<std::string>{"layer1.[0-9]", "layer2.[0-9]"}));
}

TEST(AdviseTest, ShellJoinQuotesWhatAShellWouldRead) {
  EXPECT_EQ(ShellJoin({"--checkpoint", "h.[0-9]", "--lora", "r=16,alpha=32,targets=c_attn"}),
            "--checkpoint 'h.[0-9]' --lora r=16,alpha=32,targets=c_attn");
  EXPECT_EQ(ShellJoin({"--freeze", "a b's", ""}), "--freeze 'a b'\\''s' ''");
}

TEST(AdviseTest, CheckpointChangeGivesPastableGlobs) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  const std::vector<Change> changes = CandidateChanges(g);
  const Change* c = Find(changes, "checkpoint the 12 repeated blocks");
  ASSERT_NE(c, nullptr);
  RunConfig base, changed = base;
  std::vector<std::string> args;
  ASSERT_TRUE(c->apply(base, &changed, &args));
  EXPECT_EQ(args, (std::vector<std::string>{"--checkpoint", "transformer.h.[0-9]", "--checkpoint", "transformer.h.[0-9][0-9]"}));
  EXPECT_EQ(changed.sim.checkpoint_globs.size(), 12u);
  base.sim.checkpoint_globs = {"transformer.h.0"};
  EXPECT_FALSE(c->apply(base, &changed, &args));  // checkpointing chosen already
}

TEST(AdviseTest, LoraChangeTargetsTheBlocksLinearsAndNotAGraphWithAdapters) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  const std::vector<Change> changes = CandidateChanges(g);
  const Change* c = Find(changes, "LoRA adapters");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->changes_training);
  RunConfig base, changed = base;
  std::vector<std::string> args;
  ASSERT_TRUE(c->apply(base, &changed, &args));
  EXPECT_EQ(args, (std::vector<std::string>{"--lora", "r=16,alpha=32,targets=c_attn,c_proj,c_fc"}));
  ASSERT_TRUE(c->rewrite);
  auto lora = c->rewrite(g);
  ASSERT_TRUE(lora.ok()) << lora.status().message();
  EXPECT_EQ(lora->lora_adapters, 48u);  // 12 blocks × (c_attn, attn.c_proj, c_fc, mlp.c_proj)
  EXPECT_EQ(Find(CandidateChanges(*lora), "LoRA adapters"), nullptr);
}

TEST(AdviseTest, QloraAndEightBitAdamAreProposedAsFlagsThatMakeThem) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  const std::vector<Change> changes = CandidateChanges(g);
  const Change* q = Find(changes, "QLoRA");
  ASSERT_NE(q, nullptr);
  RunConfig base, changed = base;
  std::vector<std::string> args;
  ASSERT_TRUE(q->apply(base, &changed, &args));
  EXPECT_EQ(args, (std::vector<std::string>{"--lora", "r=16,alpha=32,targets=c_attn,c_proj,c_fc", "--quantize-base",
                                            "nf4,double_quant=on,compute=bf16"}));
  auto rewritten = q->rewrite(g);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
  EXPECT_TRUE(rewritten->lora && rewritten->quantized_base);
  EXPECT_EQ(Find(CandidateChanges(*rewritten), "QLoRA"), nullptr);

  const Change* eight = Find(changes, "bitsandbytes' 8-bit AdamW");
  ASSERT_NE(eight, nullptr);
  base.sim.optimizer = "adam";
  ASSERT_TRUE(eight->apply(base, &changed, &args));
  EXPECT_EQ(args, (std::vector<std::string>{"--optimizer", "adam8bit"}));
  base.sim.optimizer = "sgd";
  EXPECT_FALSE(eight->apply(base, &changed, &args));

  const Change* bwd = Find(changes, "step the optimizer in backward");
  ASSERT_NE(bwd, nullptr);
  base.sim.accumulate = 2;  // torchtune refuses optimizer_in_bwd with accumulation
  EXPECT_FALSE(bwd->apply(base, &changed, &args));
}

TEST(AdviseTest, SavedActivationsOffloadOnlyOnAGpu) {
  const std::vector<Change> changes = CandidateChanges(ZooGraph("mlp"));
  const Change* c = Find(changes, "offload the saved activations");
  ASSERT_NE(c, nullptr);
  RunConfig base, changed = base;
  std::vector<std::string> args;
  EXPECT_TRUE(c->apply(base, &changed, &args));
  EXPECT_EQ(changed.sim.save_on_cpu, "pin");
  const Change* tt = Find(changes, "offload the saved activations with torchtune's OffloadActivations");
  ASSERT_NE(tt, nullptr);
  RunConfig changed_tt = base;
  EXPECT_TRUE(tt->apply(base, &changed_tt, &args));
  EXPECT_EQ(changed_tt.sim.offload_activations, "on");
  EXPECT_EQ(args, (std::vector<std::string>{"--offload-activations", "on"}));
  RunConfig offloading = base;
  offloading.sim.offload_activations = "on";  // one saved-tensor hook at a time
  EXPECT_FALSE(c->apply(offloading, &changed, &args));
  EXPECT_FALSE(tt->apply(offloading, &changed, &args));
  base.sim.profile = "cpu";
  EXPECT_FALSE(c->apply(base, &changed, &args));
  EXPECT_FALSE(tt->apply(base, &changed, &args));
}

}  // namespace
}  // namespace memsim
