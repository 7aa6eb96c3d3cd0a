// Peak analysis of an event stream: peak live bytes (sum of requested bytes of live buffers),
// when it happens, the peak inside each phase, the breakdown by category at the peak and the
// buffers alive then. Pure function; safe to call concurrently.
#ifndef MEMSIM_LIB_ANALYSIS_PEAK_H_
#define MEMSIM_LIB_ANALYSIS_PEAK_H_

#include <array>
#include <cstdint>
#include <vector>

#include "lib/stream/events.h"

namespace memsim {

struct PeakReport {
  int64_t setup_bytes = 0;       ///< live before the step (parameters, buffers, inputs, ...)
  int64_t peak_live_bytes = 0;
  size_t peak_event = 0;         ///< index of the event right after which the peak is reached
  Phase peak_phase = Phase::kSetup;
  uint32_t peak_op = kNoOp;
  int64_t final_bytes = 0;       ///< live after the step
  /// Per phase: max of the live bytes at its start and after each of its events.
  std::array<int64_t, kNumPhases> phase_peaks{};
  std::array<int64_t, kNumCategories> breakdown_at_peak{};
  std::vector<uint32_t> live_at_peak;  ///< buffer ids, largest first (ties: lower id first)
  /// With several steps (EventStream::step_starts): per step, the peak live bytes (including
  /// those live at its start) and the live bytes at its end.
  std::vector<int64_t> step_peaks, step_end_bytes;
};

PeakReport AnalyzePeak(const EventStream& s);

/// The peak alone (what a sweep row needs): the first event after which the live bytes are
/// largest. AnalyzePeak's peak_live_bytes, peak_event, peak_phase and peak_op are these.
struct PeakPoint {
  int64_t live_bytes = 0;
  size_t event = 0;
  Phase phase = Phase::kSetup;
  uint32_t op = kNoOp;
};
PeakPoint FindPeak(const EventStream& s);

}  // namespace memsim

#endif  // MEMSIM_LIB_ANALYSIS_PEAK_H_
