// torchtune's activation offloading: --offload-activations (Note [Activation offloading] in
// docs/op-rules.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/autodiff/setups/setups.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SimulateOk;
using testing::ZooGraph;

SimOptions Gpt2(const std::string& profile, const std::string& offload) {
  SimOptions opt;
  opt.symbols = {{"batch", 2}, {"seq", 128}};
  opt.optimizer = "adamw";
  opt.profile = profile;
  opt.offload_activations = offload;
  return opt;
}

int64_t ForwardPeak(const SimResult& r) { return r.peak.phase_peaks[int(Phase::kForward)]; }

/// Allocations in |phase| of buffers whose name ends with |suffix|: their number and the
/// smallest one's bytes.
std::pair<size_t, int64_t> Allocs(const SimResult& r, Phase phase, const std::string& suffix) {
  size_t n = 0;
  int64_t smallest = INT64_MAX;
  for (const MemEvent& e : r.events.events) {
    const Buffer& b = r.events.buffers[e.buffer];
    if (e.kind != EventKind::kAlloc || e.phase != phase || b.name.size() < suffix.size() ||
        b.name.compare(b.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    ++n;
    smallest = std::min(smallest, b.bytes);
  }
  return {n, smallest};
}

TEST(OffloadActivationsTest, OnTheCpuTensorsFromMinSizeUpAreCopiedWithTheirStrides) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimResult plain = SimulateOk(g, Gpt2("cpu", "off"));
  SimResult all = SimulateOk(g, Gpt2("cpu", "min_size=0"));
  SimResult large = SimulateOk(g, Gpt2("cpu", "min_size=1MiB"));
  SimResult none = SimulateOk(g, Gpt2("cpu", "min_size=1TiB"));
  EXPECT_EQ(none.events.events.size(), plain.events.events.size());
  auto [n_all, smallest_all] = Allocs(all, Phase::kForward, ":saved (packed)");
  auto [n_large, smallest_large] = Allocs(large, Phase::kForward, ":saved (packed)");
  EXPECT_GT(n_all, n_large);
  EXPECT_GT(n_large, 0u);
  EXPECT_GE(smallest_large, int64_t{1} << 20);
  EXPECT_LT(smallest_all, int64_t{1} << 20);
  // torch.empty_like keeps Wᵀ's strides: no transpose block (save_on_cpu(pin)'s torch.empty has one)
  EXPECT_EQ(Allocs(all, Phase::kForward, ":transpose copy block").first, 0u);
  EXPECT_GT(ForwardPeak(all), ForwardPeak(large));
  EXPECT_EQ(all.events.host_bytes, 0);
}

TEST(OffloadActivationsTest, ParametersThemselvesStayAndTheirViewsAreTaken) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimOptions soc = Gpt2("cpu", "off");
  soc.save_on_cpu = "pin";
  // save_on_cpu(pin) packs every saved tensor, the layer norms' weights too; OffloadActivations
  // with no threshold leaves those nn.Parameters, and takes the linears' Wᵀ views
  auto [n_soc, s0] = Allocs(SimulateOk(g, soc), Phase::kForward, ":saved (packed)");
  SimResult tto = SimulateOk(g, Gpt2("cpu", "min_size=0"));
  auto [n_tto, s1] = Allocs(tto, Phase::kForward, ":saved (packed)");
  EXPECT_LT(n_tto, n_soc);
  bool weight_view = false;  // c_fc's Wᵀ [768, 3072], float32
  for (const Buffer& b : tto.events.buffers)
    weight_view |= b.module == "transformer.h.0.mlp.c_fc" && b.name.ends_with(":saved (packed)") && b.bytes == 768 * 3072 * 4;
  EXPECT_TRUE(weight_view);
}

TEST(OffloadActivationsTest, OnAGpuPinnedHostBlocksArePowersOfTwo) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimResult pinned = SimulateOk(g, Gpt2("cuda", "streams=off"));
  SimResult pageable = SimulateOk(g, Gpt2("cuda", "streams=off,pin=off"));
  EXPECT_GT(pageable.events.host_bytes, 0);
  EXPECT_GE(pinned.events.host_bytes, pageable.events.host_bytes);
  EXPECT_LT(pinned.events.host_bytes, 2 * pageable.events.host_bytes);
  // the same device stream: the host copies' rounding is the host's
  EXPECT_EQ(pinned.peak.peak_live_bytes, pageable.peak.peak_live_bytes);
  EXPECT_GT(Allocs(pinned, Phase::kBackward, ":saved (unpacked)").first, 0u);
}

TEST(OffloadActivationsTest, StreamsKeepTheForwardStashAndTheUnpackedTensorsLonger) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimResult single = SimulateOk(g, Gpt2("cuda", "streams=off"));
  SimResult streams = SimulateOk(g, Gpt2("cuda", "on"));
  SimResult stash1 = SimulateOk(g, Gpt2("cuda", "stash=1"));
  SimResult stash50 = SimulateOk(g, Gpt2("cuda", "stash=50"));
  EXPECT_GE(ForwardPeak(streams), ForwardPeak(single));
  EXPECT_GE(ForwardPeak(stash50), ForwardPeak(streams));
  EXPECT_GE(ForwardPeak(streams), ForwardPeak(stash1));
  EXPECT_GT(ForwardPeak(stash50), ForwardPeak(stash1));
  // the tensors still stashed when backward starts come back without a copy
  EXPECT_LT(Allocs(streams, Phase::kBackward, ":saved (unpacked)").first,
            Allocs(single, Phase::kBackward, ":saved (unpacked)").first);
  EXPECT_GE(streams.peak.phase_peaks[int(Phase::kBackward)], single.peak.phase_peaks[int(Phase::kBackward)]);
}

TEST(OffloadActivationsTest, CheckpointedModulesKeepTheirOwnHooks) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SimOptions ckpt = Gpt2("cuda", "on");
  ckpt.checkpoint_globs = {"transformer.h.*"};
  SimResult all = SimulateOk(g, Gpt2("cuda", "on"));
  SimResult both = SimulateOk(g, ckpt);
  EXPECT_GT(both.events.host_bytes, 0);
  EXPECT_LT(both.events.host_bytes * 2, all.events.host_bytes);
}

TEST(OffloadActivationsTest, SpecsAndConflicts) {
  auto o = ParseOffloadActivations("min_size=4KiB,streams=off,pin=off,stash=3");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->min_bytes, 4096);
  EXPECT_FALSE(o->streams);
  EXPECT_FALSE(o->pin_memory);
  EXPECT_EQ(o->max_fwd_stash, 3);
  auto d = ParseOffloadActivations("on");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->min_bytes, 1024);
  EXPECT_TRUE(d->streams && d->pin_memory);
  EXPECT_EQ(d->max_fwd_stash, 5);
  EXPECT_THAT(ParseOffloadActivations("size=1").status().message(), ::testing::HasSubstr("unknown key \"size\""));
  EXPECT_THAT(ParseOffloadActivations("stash=0").status().message(), ::testing::HasSubstr("stash"));
  Graph g = ZooGraph("mlp");
  SimOptions both;
  both.save_on_cpu = "on";
  both.offload_activations = "on";
  auto r = Simulate(g, both);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("--offload-activations with --save-on-cpu"));
}

}  // namespace
}  // namespace memsim
