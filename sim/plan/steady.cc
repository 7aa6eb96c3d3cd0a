#include "sim/plan/steady.h"

#include <algorithm>
#include <memory>

#include "sim/allocator/alloc_config.h"
#include "sim/allocator/caching_allocator.h"
#include "sim/compiled.h"
#include "sim/figures.h"

namespace memsim {
namespace {

constexpr BlockId kNotLive = kNoBlock;
constexpr BlockId kZeroBytes = kNoBlock - 1;  // allocated, but never reached the allocator

/// The canonical state of |a| with |held| (buffer -> block): what its future behaviour depends
/// on in the plain caching model (no garbage collection, no expandable segments).
std::vector<int64_t> StateOf(const CachingAllocator& a, const std::vector<BlockId>& held) {
  std::vector<int64_t> s;
  const DeviceStats& st = a.stats();
  s.insert(s.end(), {st.num_device_alloc, st.num_device_free, st.num_alloc_retries, st.num_ooms});
  for (const SegmentView& seg : a.Snapshot()) {
    s.insert(s.end(), {-1, static_cast<int64_t>(seg.address), seg.total_size, static_cast<int64_t>(seg.pool),
                       static_cast<int64_t>(seg.stream), seg.expandable ? 1 : 0});
    for (const BlockView& b : seg.blocks)
      s.insert(s.end(), {static_cast<int64_t>(b.address), b.size, b.allocated ? b.requested_size : -1});
  }
  s.push_back(-2);
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i] == kNotLive) continue;
    s.insert(s.end(), {static_cast<int64_t>(i), held[i] == kZeroBytes ? -1 : static_cast<int64_t>(a.BlockAddress(held[i]))});
  }
  return s;
}

/// |c|'s row from its compiled step and evaluated run (RowOf's figures).
SweepRow RowOfRun(const CompiledStep& cs, const RunResult& r, const RunConfig& c) {
  SweepRow row;
  const PeakPoint peak{r.sim.peak.peak_live_bytes, r.sim.peak.peak_event, r.sim.peak.peak_phase, r.sim.peak.peak_op};
  static_cast<MemoryFigures&>(row) = FiguresOf(cs.graph, peak, r.alloc, r.device, c.alloc.capacity_bytes);
  if (r.alloc.oom) row.oom_message = r.alloc.oom->info.message;
  return row;
}

/// Whether the allocator with |options| does the same over the K-pass stream as over |es|
/// (Note [Steady accumulation]): it fails before the optimizer (|end|), in the events both
/// streams share, or its states at two consecutive pass starts are equal. |oom|: where it
/// fails in |es| before the last start (-1: not there).
bool Proven(const EventStream& es, const AllocatorOptions& options, const std::vector<size_t>& starts, size_t end,
            int64_t* oom) {
  const std::vector<std::vector<int64_t>> st = AllocatorStatesAt(es, options, starts, oom);
  if (*oom >= 0) return *oom < static_cast<int64_t>(end);
  for (size_t j = 0; j + 1 < st.size(); ++j)
    if (!st[j].empty() && st[j] == st[j + 1]) return true;
  return false;
}

/// The row of |c| from a run of kSteadyPasses passes, or nullopt when that run does not prove
/// it the same as the K-pass one (Note [Steady accumulation]).
std::optional<SweepRow> ShortRow(const Graph& g, const RunConfig& c) {
  if (c.sim.steps > 1 || c.sim.loop_holds != "none" || !c.alloc.alloc_conf.empty() ||
      c.alloc.model != AllocatorModel::kCaching)
    return std::nullopt;
  RunConfig m = c;
  m.sim.accumulate = kSteadyPasses;
  m.alloc.compute_ideal = false;
  Result<std::shared_ptr<const CompiledStep>> cs = CompileStep(g, m);
  if (!cs.ok()) return std::nullopt;
  Result<RunResult> r = EvaluateStep(**cs, m, EvalOptions{/*names=*/false});
  if (!r.ok()) return std::nullopt;
  const EventStream& es = r->sim.events;
  const PassMarks marks = PassMarksOf(es);
  if (marks.pass_starts.size() != kSteadyPasses - 1) return std::nullopt;
  const std::vector<size_t>& starts = marks.pass_starts;  // passes 2..m
  for (size_t j = 0; j + 2 < starts.size(); ++j)
    if (!SamePass(es, starts[j], starts[j + 1], starts[j + 2])) return std::nullopt;
  // The cuDNN workspace bounds are runs of their own, over streams not checked here.
  if (m.workspace_range && r->device.overhead.uses_cudnn_conv) return std::nullopt;
  // Every allocator run the row reads (Allocate, DeviceOf): the capacity-limited one; after an
  // OOM, the device-used range's low end with the smallest context, and when that fails too,
  // the run without a capacity whose peaks it reports.
  AllocatorOptions ao = m.alloc;
  ao.capacity_bytes = AllocatorCapacity(**cs, m);
  int64_t oom = -1;
  if (!Proven(es, ao, starts, marks.optimizer_start, &oom)) return std::nullopt;
  if (r->alloc.oom && m.need_after_oom) return std::nullopt;
  if (r->alloc.oom && m.workspace_range && r->device.overhead.low < r->device.overhead.bytes) {
    ao = m.alloc;  // as sim/pipeline.cc's LeftForAllocator
    if (ao.capacity_bytes > 0) ao.capacity_bytes = std::max<int64_t>(ao.capacity_bytes - r->device.overhead.low, 1);
    if (!Proven(es, ao, starts, marks.optimizer_start, &oom)) return std::nullopt;
    ao.capacity_bytes = 0;
    if (!Proven(es, ao, starts, marks.optimizer_start, &oom)) return std::nullopt;
  }
  return RowOfRun(**cs, *r, m);
}

}  // namespace

PassMarks PassMarksOf(const EventStream& es) {
  PassMarks m;
  m.optimizer_start = es.events.size();
  for (size_t i = 1; i < es.events.size(); ++i) {
    const Phase p = es.events[i].phase, q = es.events[i - 1].phase;
    if (p == Phase::kForward && q == Phase::kBackward) m.pass_starts.push_back(i);
    if (p == Phase::kOptimizer && q != Phase::kOptimizer && m.optimizer_start == es.events.size()) m.optimizer_start = i;
  }
  return m;
}

bool SamePass(const EventStream& es, size_t a, size_t b, size_t c) {
  if (b - a != c - b || c > es.events.size()) return false;
  std::vector<int64_t> made1(es.buffers.size(), -1), made2(es.buffers.size(), -1);
  int64_t open = 0;  // buffers made in the range and not yet freed
  for (size_t i = 0; i < b - a; ++i) {
    const MemEvent& x = es.events[a + i];
    const MemEvent& y = es.events[b + i];
    if (x.kind != y.kind || x.phase != y.phase || x.op != y.op) return false;
    const Buffer& bx = es.buffers[x.buffer];
    const Buffer& by = es.buffers[y.buffer];
    if (bx.bytes != by.bytes || bx.category != by.category) return false;
    if (x.kind == EventKind::kAlloc) {
      made1[x.buffer] = made2[y.buffer] = static_cast<int64_t>(i);
      ++open;
      continue;
    }
    if (made1[x.buffer] != made2[y.buffer]) return false;
    if (made1[x.buffer] < 0 && x.buffer != y.buffer) return false;
    if (made1[x.buffer] >= 0) --open;
  }
  return open == 0;
}

std::vector<std::vector<int64_t>> AllocatorStatesAt(const EventStream& es, const AllocatorOptions& options,
                                                    const std::vector<size_t>& marks, int64_t* oom_event) {
  std::vector<std::vector<int64_t>> states(marks.size());
  if (oom_event) *oom_event = -1;
  Result<AllocatorConfig> cfg = ParseAllocConf(options.alloc_conf);
  if (!cfg.ok() || !options.alloc_conf.empty() || options.model != AllocatorModel::kCaching) return states;
  CachingAllocator alloc(*cfg, DeviceOptions{options.capacity_bytes, options.address_order, 0});
  std::vector<BlockId> held(es.buffers.size(), kNotLive);
  size_t next = 0;
  for (size_t k = 0; k < marks.size(); ++k) {
    for (; next < std::min(marks[k], es.events.size()); ++next) {
      const MemEvent& e = es.events[next];
      BlockId& h = held[e.buffer];
      if (e.kind == EventKind::kFree) {
        if (h != kZeroBytes && h != kNotLive) alloc.Free(h);
        h = kNotLive;
        continue;
      }
      const int64_t bytes = es.buffers[e.buffer].bytes;
      h = bytes == 0 ? kZeroBytes : alloc.Malloc(bytes, es.buffers[e.buffer].stream);
      if (h == kNoBlock) {  // an OOM: no state from here on
        if (oom_event) *oom_event = static_cast<int64_t>(next);
        return states;
      }
    }
    states[k] = StateOf(alloc, held);
  }
  return states;
}

SweepRow SteadyRow(const Graph& g, const RunConfig& c, bool* shortened) {
  if (shortened) *shortened = false;
  if (c.sim.accumulate > kSteadyPasses) {
    if (std::optional<SweepRow> row = ShortRow(g, c)) {
      if (shortened) *shortened = true;
      return *std::move(row);
    }
  }
  return RunOne(g, c);
}

}  // namespace memsim
