// bitsandbytes optimizers: 8-bit block-wise state sizes, min_8bit_size, paged states and the
// update's temporaries per backend (Note [bitsandbytes optimizers]).
#include "lib/autodiff/optimizer_bnb.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace memsim {
namespace {

OptimizerRule Rule(std::string_view name) {
  auto r = FindOptimizer(name);
  EXPECT_TRUE(r.has_value()) << name;
  return *r;
}

Profile Cpu() { return *FindProfile("cpu", "2.13"); }
Profile Cuda() { return *FindProfile("cuda", "2.13"); }

OptParam Param(int64_t numel, uint32_t grad = 0) { return OptParam{"w", numel * 4, grad, {numel}, 4}; }

std::vector<int64_t> Bytes(const std::vector<BnbState>& st) {
  std::vector<int64_t> b;
  for (const BnbState& s : st) b.push_back(s.bytes);
  return b;
}

TEST(BnbOptimizerTest, EightBitStatesAreUint8WithAnAbsmaxPerBlockRoundedUp) {
  // 100,000 elements: 391 blocks of 256 (the last one partial).
  EXPECT_EQ(Bytes(BnbStateOf(Rule("adam8bit"), Cpu(), Param(100000))),
            (std::vector<int64_t>{100000, 100000, 391 * 4, 391 * 4}));
  EXPECT_EQ(Bytes(BnbStateOf(Rule("adam8bit"), Cpu(), Param(512))).size(), 2u);  // fp32 below 4096
  EXPECT_EQ(Bytes(BnbStateOf(Rule("adam8bit"), Cpu(), Param(4096))),
            (std::vector<int64_t>{4096, 4096, 16 * 4, 16 * 4}));
  EXPECT_EQ(Bytes(BnbStateOf(Rule("lion8bit"), Cpu(), Param(10000))), (std::vector<int64_t>{10000, 40 * 4}));
}

TEST(BnbOptimizerTest, BelowMin8bitSizeStatesAreFp32) {
  EXPECT_EQ(Bytes(BnbStateOf(Rule("adamw8bit"), Cpu(), Param(4095))), (std::vector<int64_t>{4095 * 4, 4095 * 4}));
  OptimizerRule r = Rule("adamw8bit");
  r.min_8bit_size = 16384;
  EXPECT_EQ(Bytes(BnbStateOf(r, Cpu(), Param(10000))), (std::vector<int64_t>{40000, 40000}));
  // PagedAdamW is the 32-bit optimizer: fp32 states at any size.
  EXPECT_EQ(Bytes(BnbStateOf(Rule("paged_adamw"), Cpu(), Param(100000))), (std::vector<int64_t>{400000, 400000}));
}

TEST(BnbOptimizerTest, PagedStatesOfLargeParametersAreManagedOnCudaOnly) {
  auto big = BnbStateOf(Rule("paged_adamw8bit"), Cuda(), Param(100000));
  ASSERT_EQ(big.size(), 4u);
  EXPECT_TRUE(big[0].managed && big[1].managed);
  EXPECT_FALSE(big[2].managed || big[3].managed);  // absmax: torch.zeros on the device
  EXPECT_FALSE(BnbStateOf(Rule("paged_adamw8bit"), Cuda(), Param(99999))[0].managed);
  EXPECT_FALSE(BnbStateOf(Rule("paged_adamw8bit"), Cpu(), Param(100000))[0].managed);
  EXPECT_FALSE(BnbStateOf(Rule("adamw8bit"), Cuda(), Param(100000))[0].managed);
}

TEST(BnbOptimizerTest, QuantizationMapsExistBeforeTheFirstStep) {
  std::vector<OptParam> ps = {Param(100000)};
  for (auto [name, bytes] : {std::pair{"adam8bit", 2 * kBnbQmapBytes}, std::pair{"paged_adamw", int64_t{0}}}) {
    Ledger l;
    std::vector<Ledger::StorageId> states;
    CreateBnbResidentState(Rule(name), Cpu(), /*first_step=*/true, ps, &l, &states);
    int64_t sum = 0;
    for (auto s : states) sum += l.bytes(s);
    EXPECT_EQ(sum, bytes) << name;
  }
}

TEST(BnbOptimizerTest, OnCudaTheFirst8bitInitStateMovesTheMapsToTheDevice) {
  Ledger l;
  std::vector<Ledger::StorageId> states;
  CreateBnbResidentState(Rule("adam8bit"), Cuda(), /*first_step=*/true, {Param(100)}, &l, &states);
  EXPECT_TRUE(states.empty());  // still host tensors
  RunBnbStep(Rule("adam8bit"), Cuda(), /*first_step=*/true, {Param(100), Param(8192)}, &l, &states);
  // The 100-element parameter's fp32 states, then the maps, then the 8-bit parameter's states.
  ASSERT_EQ(states.size(), 2u + 2u + 4u);
  EXPECT_EQ(l.bytes(states[2]), kBnbQmapBytes);
  EXPECT_EQ(l.bytes(states[3]), kBnbQmapBytes);
  EXPECT_EQ(l.bytes(states[4]), 8192);
}

/// Peak live bytes of a step on one parameter (its grad not counted).
int64_t StepPeak(std::string_view name, const Profile& p, int64_t numel, int64_t* host = nullptr) {
  Ledger l;
  std::vector<Ledger::StorageId> states;
  RunBnbStep(Rule(name), p, /*first_step=*/true, {Param(numel)}, &l, &states);
  EventStream s = std::move(l).Finish();
  int64_t live = 0, peak = 0;
  for (const MemEvent& e : s.events) {
    live += (e.kind == EventKind::kAlloc ? 1 : -1) * s.bytes(e);
    peak = std::max(peak, live);
  }
  if (host) *host = s.host_bytes;
  return peak;
}

TEST(BnbOptimizerTest, CpuUpdateDequantizesWhileCudaUpdatesInPlace) {
  const int64_t n = 100000, states = 2 * n + 2 * 391 * 4;
  // CPU: two dequantized states, the fp32 grad, sqrt and denom (+ the wrapped scalar and its copy).
  EXPECT_EQ(StepPeak("adam8bit", Cpu(), n), states + 5 * 4 * n + 8 + 4);
  EXPECT_EQ(StepPeak("adam8bit", Cuda(), n), states + 2 * kBnbQmapBytes);  // + the maps moved to the device
  // 32-bit (below min_8bit_size): g_float, and two of sqrt / sqrt + eps / update.
  EXPECT_EQ(StepPeak("adam8bit", Cpu(), 1000), 2 * 4000 + 3 * 4000 + 8 + 4);
}

TEST(BnbOptimizerTest, PagedStatesCountAsHostBytesOnCuda) {
  int64_t host = 0;
  EXPECT_EQ(StepPeak("paged_adamw", Cuda(), 100000, &host), 0);
  EXPECT_EQ(host, 2 * 400000);
  EXPECT_EQ(StepPeak("paged_adamw", Cpu(), 100000, &host), 2 * 400000 + 3 * 400000 + 8 + 4);
  EXPECT_EQ(host, 0);
}

}  // namespace
}  // namespace memsim
