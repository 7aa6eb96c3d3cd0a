#include "lib/analysis/peak.h"

#include <algorithm>

namespace memsim {

PeakPoint FindPeak(const EventStream& s) {
  PeakPoint p;
  int64_t live = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    live += e.kind == EventKind::kAlloc ? s.bytes(e) : -s.bytes(e);
    if (live > p.live_bytes) p = PeakPoint{live, i, e.phase, e.op};
  }
  return p;
}

PeakReport AnalyzePeak(const EventStream& s) {
  PeakReport r;
  const PeakPoint peak = FindPeak(s);
  r.peak_live_bytes = peak.live_bytes;
  r.peak_event = peak.event;
  r.peak_phase = peak.phase;
  r.peak_op = peak.op;
  int64_t live = 0;
  bool any_phase_seen[kNumPhases] = {};
  std::vector<bool> alive(s.buffers.size(), false);
  // First pass: the phase peaks.
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    int ph = static_cast<int>(e.phase);
    if (!any_phase_seen[ph]) {
      any_phase_seen[ph] = true;
      r.phase_peaks[ph] = std::max(r.phase_peaks[ph], live);
    }
    live += e.kind == EventKind::kAlloc ? s.bytes(e) : -s.bytes(e);
    if (e.phase == Phase::kSetup) r.setup_bytes = live;
    r.phase_peaks[ph] = std::max(r.phase_peaks[ph], live);
  }
  // A phase with no event of its own (no optimizer, say) holds the live bytes at its turn: those
  // at the end of the last earlier phase that had events.
  r.final_bytes = live;
  int64_t carry = 0;
  std::array<int64_t, kNumPhases> end_live{};
  {
    int64_t l = 0;
    for (const MemEvent& e : s.events) {
      l += e.kind == EventKind::kAlloc ? s.bytes(e) : -s.bytes(e);
      end_live[static_cast<int>(e.phase)] = l;
    }
  }
  for (int ph = 0; ph < kNumPhases; ++ph) {
    if (any_phase_seen[ph]) carry = end_live[ph];
    else r.phase_peaks[ph] = carry;
  }
  // Per step: the live bytes at its start and after each of its events.
  if (!s.step_starts.empty()) {
    int64_t l = 0;
    size_t k = 0;
    for (size_t i = 0; i <= s.events.size(); ++i) {
      while (k < s.step_starts.size() && s.step_starts[k] == i) {
        r.step_peaks.push_back(l);
        if (k > 0) r.step_end_bytes.push_back(l);
        ++k;
      }
      if (i == s.events.size()) break;
      const MemEvent& e = s.events[i];
      l += e.kind == EventKind::kAlloc ? s.bytes(e) : -s.bytes(e);
      if (k > 0) r.step_peaks[k - 1] = std::max(r.step_peaks[k - 1], l);
    }
    r.step_end_bytes.push_back(l);
    while (r.step_end_bytes.size() < r.step_peaks.size()) r.step_end_bytes.push_back(l);
  }
  // Second pass: what is alive at the peak.
  for (size_t i = 0; i < s.events.size() && i <= r.peak_event; ++i)
    alive[s.events[i].buffer] = s.events[i].kind == EventKind::kAlloc;
  for (uint32_t b = 0; b < alive.size(); ++b) {
    if (!alive[b]) continue;
    r.live_at_peak.push_back(b);
    r.breakdown_at_peak[static_cast<int>(s.buffers[b].category)] += s.buffers[b].bytes;
  }
  std::stable_sort(r.live_at_peak.begin(), r.live_at_peak.end(),
                   [&](uint32_t a, uint32_t b) { return s.buffers[a].bytes > s.buffers[b].bytes; });
  return r;
}

}  // namespace memsim
