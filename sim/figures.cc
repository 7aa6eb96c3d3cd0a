#include "sim/figures.h"

namespace memsim {

MemoryFigures FiguresOf(const Graph* g, const PeakPoint& peak, const AllocatorReport& alloc, const DeviceLevel& device,
                        int64_t capacity_bytes) {
  MemoryFigures f;
  f.peak_live_bytes = peak.live_bytes;
  f.peak_phase = peak.phase;
  f.peak_allocated_bytes = alloc.peak_allocated_bytes;
  f.peak_reserved_bytes = alloc.peak_reserved_bytes;
  f.capacity_bytes = capacity_bytes;
  if (device.modelled) {
    f.peak_device_used_bytes = device.peak_device_bytes;
    f.device_low_bytes = device.low_bytes;
    f.device_high_bytes = device.high_bytes;
    f.verdict = device.verdict;
  } else if (capacity_bytes > 0) {
    f.verdict = alloc.oom ? Verdict::kDoesNotFit : Verdict::kFits;
  }
  if (alloc.oom) {
    f.oom = true;
    f.oom_phase = alloc.oom->phase;
    f.oom_event = alloc.oom->event_index;
    if (g && alloc.oom->op < g->ops.size()) f.oom_op = g->ops[alloc.oom->op].name;
  }
  return f;
}

MemoryFigures FiguresOf(const Graph& g, const RunResult& r, int64_t capacity_bytes) {
  const PeakReport& p = r.sim.peak;
  return FiguresOf(&g, PeakPoint{p.peak_live_bytes, p.peak_event, p.peak_phase, p.peak_op}, r.alloc, r.device,
                   capacity_bytes);
}

}  // namespace memsim
