#include "lib/analysis/peak.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

EventStream Stream(std::vector<std::tuple<EventKind, Phase, int64_t, Category>> evs) {
  EventStream s;
  std::vector<uint32_t> open;
  for (auto& [kind, phase, bytes, cat] : evs) {
    if (kind == EventKind::kAlloc) {
      s.buffers.push_back(Buffer{"b" + std::to_string(s.buffers.size()), bytes, cat, kNoOp, ""});
      s.events.push_back({kind, phase, uint32_t(s.buffers.size() - 1), kNoOp});
    } else {
      // Frees the most recent live buffer of that size.
      for (size_t i = s.buffers.size(); i-- > 0;)
        if (s.buffers[i].bytes == bytes) {
          s.events.push_back({kind, phase, uint32_t(i), kNoOp});
          break;
        }
    }
  }
  return s;
}

constexpr auto A = EventKind::kAlloc;
constexpr auto F = EventKind::kFree;

TEST(PeakTest, PeakBreakdownAndTensorsAtPeak) {
  auto s = Stream({{A, Phase::kSetup, 100, Category::kParameter},
                   {A, Phase::kForward, 30, Category::kActivation},
                   {A, Phase::kForward, 50, Category::kActivation},
                   {F, Phase::kForward, 30, Category::kActivation},
                   {A, Phase::kBackward, 20, Category::kGradient},
                   {F, Phase::kBackward, 50, Category::kActivation}});
  PeakReport r = AnalyzePeak(s);
  EXPECT_EQ(r.setup_bytes, 100);
  EXPECT_EQ(r.peak_live_bytes, 180);
  EXPECT_EQ(r.peak_phase, Phase::kForward);
  EXPECT_EQ(r.phase_peaks[int(Phase::kForward)], 180);
  EXPECT_EQ(r.phase_peaks[int(Phase::kBackward)], 170);  // 150 at its start, 170 after the grad
  EXPECT_EQ(r.breakdown_at_peak[int(Category::kActivation)], 80);
  EXPECT_EQ(r.breakdown_at_peak[int(Category::kParameter)], 100);
  ASSERT_EQ(r.live_at_peak.size(), 3u);
  EXPECT_EQ(s.buffers[r.live_at_peak[0]].bytes, 100);  // largest first
  EXPECT_EQ(s.buffers[r.live_at_peak[1]].bytes, 50);
  EXPECT_EQ(r.final_bytes, 120);
}

TEST(PeakTest, APhaseWithoutEventsHoldsTheLiveBytesOfItsTurn) {
  auto s = Stream({{A, Phase::kSetup, 100, Category::kParameter},
                   {A, Phase::kForward, 40, Category::kActivation},
                   {A, Phase::kBackward, 10, Category::kGradient},
                   {F, Phase::kBackward, 40, Category::kActivation}});
  PeakReport r = AnalyzePeak(s);
  EXPECT_EQ(r.phase_peaks[int(Phase::kOptimizer)], 110);  // no optimizer: what backward left
}

}  // namespace
}  // namespace memsim
