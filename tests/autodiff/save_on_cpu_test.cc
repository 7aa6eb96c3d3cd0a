// Activation offloading: --save-on-cpu on|pin (Note [Activation offloading] in docs/op-rules.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ZooGraph;

using testing::SimulateOk;


SimOptions Gpt2(const std::string& profile, const std::string& save_on_cpu) {
  SimOptions opt;
  opt.symbols = {{"batch", 2}, {"seq", 128}};
  opt.optimizer = "adamw";
  opt.profile = profile;
  opt.save_on_cpu = save_on_cpu;
  return opt;
}

int64_t ForwardPeak(const SimResult& r) { return r.peak.phase_peaks[int(Phase::kForward)]; }

/// Allocations in |phase| of buffers whose name ends with |suffix|, and their bytes.
std::pair<size_t, int64_t> Allocs(const SimResult& r, Phase phase, const std::string& suffix) {
  size_t n = 0;
  int64_t bytes = 0;
  for (const MemEvent& e : r.events.events) {
    const Buffer& b = r.events.buffers[e.buffer];
    if (e.kind != EventKind::kAlloc || e.phase != phase || b.name.size() < suffix.size() ||
        b.name.compare(b.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    ++n;
    bytes += b.bytes;
  }
  return {n, bytes};
}

TEST(SaveOnCpuTest, OnAGpuSavedTensorsMoveToTheHostAndComeBackPerNode) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimResult plain = SimulateOk(g, Gpt2("cuda", "off"));
  SimResult offload = SimulateOk(g, Gpt2("cuda", "on"));
  EXPECT_EQ(plain.events.host_bytes, 0);
  EXPECT_GT(offload.events.host_bytes, 0);
  // the forward keeps nothing for backward on the device: what it adds to the parameters and
  // the batch (the setup) at its peak is less than half (the loss's logits remain)
  const int64_t setup = plain.peak.setup_bytes;
  EXPECT_EQ(offload.peak.setup_bytes, setup);
  EXPECT_LT((ForwardPeak(offload) - setup) * 2, ForwardPeak(plain) - setup);
  // nothing is copied on the device in forward; backward copies every saved tensor back
  EXPECT_EQ(Allocs(offload, Phase::kForward, ":saved (packed)").first, 0u);
  auto [unpacked, unpacked_bytes] = Allocs(offload, Phase::kBackward, ":saved (unpacked)");
  EXPECT_GT(unpacked, 0u);
  EXPECT_GE(unpacked_bytes, offload.events.host_bytes);  // the host holds them at once, at most
  // pinned: a transposed Wᵀ goes through a contiguous device copy on its way out
  SimResult pinned = SimulateOk(g, Gpt2("cuda", "pin"));
  EXPECT_GT(Allocs(pinned, Phase::kForward, ":contiguous copy for the host").first, 0u);
  EXPECT_EQ(Allocs(offload, Phase::kForward, ":contiguous copy for the host").first, 0u);
}

TEST(SaveOnCpuTest, OnTheCpuOnlyPinnedMemoryMakesCopies) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimResult plain = SimulateOk(g, Gpt2("cpu", "off"));
  SimResult on = SimulateOk(g, Gpt2("cpu", "on"));
  SimResult pin = SimulateOk(g, Gpt2("cpu", "pin"));
  // tensor.cpu() of a CPU tensor is the tensor: the same stream
  ASSERT_EQ(on.events.events.size(), plain.events.events.size());
  EXPECT_EQ(on.peak.peak_live_bytes, plain.peak.peak_live_bytes);
  EXPECT_EQ(on.events.host_bytes, 0);
  // pin_memory=True: torch.empty(size).copy_(t), a copy of every saved tensor, weights included
  EXPECT_GT(ForwardPeak(pin), ForwardPeak(plain));
  EXPECT_GT(Allocs(pin, Phase::kForward, ":saved (packed)").first, 0u);
  EXPECT_GT(Allocs(pin, Phase::kForward, ":transpose copy block").first, 0u);
  EXPECT_EQ(Allocs(pin, Phase::kBackward, ":saved (unpacked)").first, 0u);
}

TEST(SaveOnCpuTest, CheckpointedModulesKeepTheirOwnHooks) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimOptions all = Gpt2("cuda", "on");
  SimOptions ckpt = all;
  ckpt.checkpoint_globs = {"transformer.h.*"};
  SimResult offload = SimulateOk(g, all);
  SimResult both = SimulateOk(g, ckpt);
  // only what the blocks' boundaries, the head and the loss save leaves the device
  EXPECT_GT(both.events.host_bytes, 0);
  EXPECT_LT(both.events.host_bytes * 2, offload.events.host_bytes);
}

TEST(SaveOnCpuTest, BadValueIsRefused) {
  Graph g = ZooGraph("mlp");
  SimOptions opt;
  opt.save_on_cpu = "yes";
  auto r = Simulate(g, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("expected off, on or pin"));
}

}  // namespace
}  // namespace memsim
