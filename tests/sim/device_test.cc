// sim/device and the device level of sim/pipeline: the CUDA context table, --cudnn-workspace
// parsing, device used = reserved + overhead, the range and the three verdicts.
#include "sim/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

#include "lib/io/graph_json.h"
#include "sim/pipeline.h"
#include "sim/fit.h"
#include "sim/sweep.h"

namespace memsim {
namespace {

using testing::ZooGraph;

using ::testing::HasSubstr;
constexpr int64_t kMiB = int64_t{1} << 20;


TEST(ContextTableTest, EveryRowIsSourcedAndEachArchitectureHasOneDefault) {
  const auto& rows = ContextTable();
  ASSERT_GE(rows.size(), 3u);
  std::map<std::string, int> defaults;
  for (const ContextRow& r : rows) {
    EXPECT_FALSE(r.source.empty()) << r.arch;
    EXPECT_GT(r.context_bytes, 100 * kMiB) << r.arch << " " << r.torch;
    EXPECT_GE(r.cudnn_conv_bytes, 0);
    defaults[r.arch] += r.is_default;
  }
  for (const auto& [arch, n] : defaults) EXPECT_EQ(n, 1) << arch;
}

TEST(ContextTableTest, ArchitectureRowsGiveThePointAndTheRange) {
  Graph mlp = ZooGraph("mlp");
  ContextOptions ampere{"ampere", std::nullopt};
  auto o = EstimateOverhead(mlp, ampere);
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->uses_cudnn_conv);
  EXPECT_LE(o->low, o->bytes);
  EXPECT_GE(o->high, o->bytes);
  EXPECT_LT(o->low, o->high) << "two ampere rows, two sizes";
  // Convolutions add cuDNN's modules.
  auto conv = EstimateOverhead(ZooGraph("resnet18"), ampere);
  ASSERT_TRUE(conv.ok());
  EXPECT_TRUE(conv->uses_cudnn_conv);
  EXPECT_GE(conv->bytes, o->bytes);
  // An unknown GPU: every row, so at least as wide as one architecture's.
  auto unknown = EstimateOverhead(mlp, ContextOptions{});
  ASSERT_TRUE(unknown.ok());
  EXPECT_LE(unknown->low, o->low);
  EXPECT_GE(unknown->high, o->high);
  EXPECT_THAT(unknown->source, HasSubstr("no data for this GPU"));
}

TEST(ContextTableTest, ContextBytesReplacesTheTable) {
  auto o = EstimateOverhead(ZooGraph("mlp"), ContextOptions{"ampere", 500 * kMiB});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->bytes, 500 * kMiB);
  EXPECT_EQ(o->low, o->high);
  EXPECT_EQ(o->source, "--context-bytes");
  auto bad = EstimateOverhead(ZooGraph("mlp"), ContextOptions{"ampere", -1});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("non-negative"));
}

TEST(CudnnWorkspaceOptionTest, ParsesPoliciesAndBytes) {
  EXPECT_EQ(ParseCudnnWorkspace("max")->policy, ConvWorkspacePolicy::kMax);
  EXPECT_EQ(ParseCudnnWorkspace("none")->policy, ConvWorkspacePolicy::kNone);
  auto fixed = ParseCudnnWorkspace("1048576");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->policy, ConvWorkspacePolicy::kFixed);
  EXPECT_EQ(fixed->bytes, 1048576);
  EXPECT_THAT(ParseCudnnWorkspace("-5").status().message(), HasSubstr("non-negative"));
  EXPECT_THAT(ParseCudnnWorkspace("huge").status().message(), HasSubstr("none, typical, max"));
}

class DeviceLevelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_ = ZooGraph("resnet18");
    c_.sim.symbols["batch"] = 8;
    ASSERT_TRUE(ApplyGpu("A100-40GB", &c_).ok());
    c_.workspace_range = true;
  }
  Result<RunResult> Run(int64_t capacity) {
    RunConfig c = c_;
    c.alloc.capacity_bytes = capacity;
    return RunPipeline(g_, c);
  }
  Graph g_;
  RunConfig c_;
};

TEST_F(DeviceLevelTest, DeviceUsedIsReservedPlusTheOverheadWithinItsRange) {
  auto r = Run(40960 * kMiB);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DeviceLevel& d = r->device;
  ASSERT_TRUE(d.modelled);
  EXPECT_EQ(d.peak_device_bytes, r->alloc.peak_reserved_bytes + d.overhead.bytes);
  EXPECT_LT(d.low_bytes, d.peak_device_bytes) << "no workspace, smaller context";
  EXPECT_GT(d.high_bytes, d.peak_device_bytes) << "max workspaces, larger context";
  EXPECT_EQ(d.workspace_policy, "typical");
  EXPECT_EQ(d.verdict, Verdict::kFits);
  EXPECT_EQ(r->alloc.capacity_bytes, 40960 * kMiB - d.overhead.bytes) << "the allocator gets what the context leaves";
}

TEST_F(DeviceLevelTest, TheThreeVerdicts) {
  auto free = Run(0);
  ASSERT_TRUE(free.ok());
  const DeviceLevel& d = free->device;
  EXPECT_EQ(d.verdict, Verdict::kNoCapacity);
  auto over = Run(d.low_bytes / 2);  // below the bottom even after the allocator frees its cache
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->device.verdict, Verdict::kDoesNotFit);
  EXPECT_EQ(VerdictName(over->device.verdict), "does not fit");
  auto inside = Run(d.peak_device_bytes + kMiB);
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(inside->device.verdict, Verdict::kUncertain) << "the top of the range is above the capacity";
  EXPECT_EQ(VerdictName(inside->device.verdict), "within the uncertainty");
  auto plenty = Run(d.high_bytes + 64 * kMiB);
  ASSERT_TRUE(plenty.ok());
  EXPECT_EQ(plenty->device.verdict, Verdict::kFits);
}

TEST_F(DeviceLevelTest, TheCpuProfileHasNoDeviceLevelAndFitUsesTheWholeDevice) {
  RunConfig cpu = c_;
  cpu.sim.profile = "cpu";
  cpu.sim.torch = "1.13";
  auto r = RunPipeline(g_, cpu);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->device.modelled);
  // fit: the device total (reserved + context) stays within the capacity at the largest batch.
  RunConfig small = c_;
  small.alloc.capacity_bytes = 4096 * kMiB;
  auto fit = FitBatch(g_, small, 4096);
  ASSERT_TRUE(fit.ok());
  ASSERT_GT(fit->max_batch, 0);
  EXPECT_LE(fit->at_max.peak_device_used_bytes, 4096 * kMiB);
  EXPECT_TRUE(fit->above.oom);
}

TEST(CudnnBenchmarkTest, TrialWorkspacesPrecedeEachCallInTheFirstStepOnly) {
  Graph g = ZooGraph("resnet18");
  auto trials = [&](bool benchmark, bool first, int64_t* reserved) {
    RunConfig c;
    c.sim.symbols["batch"] = 8;
    c.sim.cudnn_benchmark = benchmark;
    c.sim.first_step = first;
    auto r = RunPipeline(g, c);
    EXPECT_TRUE(r.ok());
    *reserved = r->alloc.peak_reserved_bytes;
    int n = 0;
    for (const MemEvent& e : r->sim.events.events)
      n += e.kind == EventKind::kAlloc && r->sim.events.buffers[e.buffer].name.find("benchmark trial") != std::string::npos;
    return n;
  };
  int64_t plain = 0, bench = 0, steady = 0;
  EXPECT_EQ(trials(false, true, &plain), 0);
  // resnet18: 20 convolutions; forward + backward-filter each, backward-data for all but conv1.
  EXPECT_EQ(trials(true, true, &bench), 20 + 20 + 19);
  EXPECT_GE(bench, plain) << "the trial blocks stay cached";
  EXPECT_EQ(trials(true, false, &steady), 0) << "the benchmark cache is filled after the first step";
}

}  // namespace
}  // namespace memsim
