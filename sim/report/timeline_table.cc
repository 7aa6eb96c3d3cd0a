#include "sim/report/timeline_table.h"

#include "sim/allocator/caching_allocator.h"

namespace memsim {
namespace {

// Runs the caching model over |s| as SimulateAllocator does (zero-byte tensors never reach it; a
// failed Malloc is the simulated OOM and ends the step), recording allocated and reserved bytes
// after each event. See the handoff: SimulateAllocator has no per-event series to reuse.
Status FillAllocatorColumns(const EventStream& s, const AllocatorOptions& opt, TimelineTable* t) {
  MEMSIM_ASSIGN_OR_RETURN(AllocatorConfig cfg, ParseAllocConf(opt.alloc_conf));
  if (opt.model == AllocatorModel::kExpandable) cfg.expandable_segments = true;
  CachingAllocator alloc(cfg, DeviceOptions{opt.capacity_bytes, opt.address_order, 0});
  std::vector<BlockId> block(s.buffers.size(), kNoBlock);
  const DeviceStats& st = alloc.stats();
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    const int64_t bytes = s.buffers[e.buffer].bytes;
    if (e.kind == EventKind::kAlloc && bytes > 0) {
      block[e.buffer] = alloc.Malloc(bytes, s.buffers[e.buffer].stream);
      if (block[e.buffer] == kNoBlock) break;
    } else if (e.kind == EventKind::kFree && block[e.buffer] != kNoBlock) {
      alloc.Free(block[e.buffer]);
      block[e.buffer] = kNoBlock;
    }
    t->allocated[i] = st.allocated_bytes.all().current;
    t->reserved[i] = st.reserved_bytes.all().current;
    t->allocator_rows = i + 1;
  }
  return Status::OK();
}

}  // namespace

Result<TimelineTable> MakeTimelineTable(const Graph& g, const EventStream& s, const AllocatorOptions& opt) {
  TimelineTable t;
  const size_t n = s.events.size();
  t.kind.reserve(n);
  t.phase.reserve(n);
  t.category.reserve(n);
  t.tensor.reserve(n);
  t.op.reserve(n);
  t.module.reserve(n);
  t.bytes.reserve(n);
  t.live.reserve(n);
  int64_t live = 0;
  for (const MemEvent& e : s.events) {
    const Buffer& b = s.buffers[e.buffer];
    const bool has_op = e.op != kNoOp && e.op < g.ops.size();
    live += e.kind == EventKind::kAlloc ? b.bytes : -b.bytes;
    t.kind.push_back(e.kind);
    t.phase.push_back(e.phase);
    t.category.push_back(b.category);
    t.tensor.push_back(b.name);
    t.op.push_back(has_op ? g.ops[e.op].name : "");
    t.module.push_back(has_op ? g.ops[e.op].module : "");
    t.bytes.push_back(b.bytes);
    t.live.push_back(live);
  }
  t.allocated.assign(n, 0);
  t.reserved.assign(n, 0);
  if (opt.model != AllocatorModel::kIdeal) MEMSIM_RETURN_IF_ERROR(FillAllocatorColumns(s, opt, &t));
  return t;
}

}  // namespace memsim
