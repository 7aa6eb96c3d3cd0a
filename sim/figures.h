// The figures every report gives of one configuration, defined once (Note [Would need] in
// docs/cli.md): `run` (text, JSON, per-rank tables, timelines), sweep rows (JSON, CSV, JSONL),
// `fit`, `advise` and the Python module all read these fields, under the same names.
//
// The peaks are what the step would need: when the capacity-limited allocator runs out of
// memory, the pipeline runs it again without the limit (sim/pipeline.cc), so a peak is never
// one truncated at the OOM. |oom| says whether the step fits; |oom_op| is where the
// capacity-limited allocator first fails.
#ifndef MEMSIM_SIM_FIGURES_H_
#define MEMSIM_SIM_FIGURES_H_

#include <cstdint>
#include <string>

#include "lib/analysis/peak.h"
#include "lib/ir/graph.h"
#include "sim/pipeline.h"

namespace memsim {

struct MemoryFigures {
  int64_t peak_live_bytes = 0;       ///< requested bytes of the tensors alive, at their peak
  Phase peak_phase = Phase::kSetup;  ///< where that peak is
  int64_t peak_allocated_bytes = 0;  ///< max_memory_allocated() the step would need
  int64_t peak_reserved_bytes = 0;   ///< max_memory_reserved() the step would need
  int64_t peak_device_used_bytes = 0;  ///< cuda: reserved + context and libraries (nvidia-smi); 0 on cpu
  int64_t device_low_bytes = 0, device_high_bytes = 0;  ///< cuda: the range of device used
  int64_t capacity_bytes = 0;        ///< the whole device (0: none given)
  bool oom = false;                  ///< the capacity-limited allocator fails (point estimate)
  std::string oom_op;                ///< the op it fails at ("" : none, or outside every op)
  Phase oom_phase = Phase::kSetup;
  int64_t oom_event = -1;            ///< index into the event stream (-1: no OOM)
  Verdict verdict = Verdict::kNoCapacity;  ///< fits / does not fit / within the uncertainty range

  /// The figure compared with the capacity: device used on cuda, else peak reserved.
  int64_t used_bytes() const { return peak_device_used_bytes > 0 ? peak_device_used_bytes : peak_reserved_bytes; }
  /// Whether the top of the device-used range fits too (the verdict "fits").
  bool fits_at_top() const { return verdict == Verdict::kFits; }
};

/// The figures of a step from its live peak, allocator report (the pipeline's: unconstrained
/// peaks after an OOM) and device level, with the capacity |capacity_bytes| (the whole device).
/// |g| names the OOM's op (null: left empty).
MemoryFigures FiguresOf(const Graph* g, const PeakPoint& peak, const AllocatorReport& alloc, const DeviceLevel& device,
                        int64_t capacity_bytes);
/// The figures of a run of |g| (RunPipeline's result) against |capacity_bytes|.
MemoryFigures FiguresOf(const Graph& g, const RunResult& r, int64_t capacity_bytes);

}  // namespace memsim

#endif  // MEMSIM_SIM_FIGURES_H_
