#include "sim/replay/replay.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "sim/allocator/caching_allocator.h"
#include "sim/allocator/simulate.h"
#include "sim/replay/fragmentation.h"

namespace memsim {
namespace {

std::string Hex(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(a));
  return buf;
}

Status TraceError(size_t i, const std::string& what) {
  return Status::InvalidArgument("trace[" + std::to_string(i) + "]: " + what);
}

// A block alive when recording began.
struct LiveInit {
  int64_t size = -1;  // -1 until inferred
  int64_t requested = 0;
  StreamId stream = 0;
  bool exact = false;      // size known from the dump
  bool ambiguous = false;  // large block followed by a free gap > 1 MiB (may hide slack)
  int64_t event = -1;      // trace index of the free that revealed the block, if any
};
struct SegInit {
  int64_t size = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
};

// The allocator state at the start of recording. See Note [Warm-start reconstruction].
struct InitialState {
  std::map<uint64_t, SegInit> segs;
  std::map<uint64_t, LiveInit> live;
};

Result<InitialState> Undo(const MemorySnapshot& snap) {
  InitialState st;
  for (const SnapshotSegment& s : snap.segments) {
    if (s.expandable)
      return Status::Unsupported(
          "segment " + Hex(s.address) +
          " is expandable; replaying expandable recordings is not supported");
    st.segs[s.address] = SegInit{s.total_size, s.stream, s.pool};
    for (const SnapshotBlock& b : s.blocks) {
      if (b.state == BlockState::kInactive) continue;
      st.live[b.address] = LiveInit{b.size, b.requested_size, s.stream, true, false};
    }
  }
  for (size_t k = snap.trace.size(); k-- > 0;) {
    const TraceEvent& e = snap.trace[k];
    switch (e.action) {
      case TraceAction::kAlloc: {
        auto it = st.live.find(e.addr);
        if (it == st.live.end())
          return TraceError(
              k, "alloc at " + Hex(e.addr) + " is neither alive at the end nor freed later");
        st.live.erase(it);
        break;
      }
      case TraceAction::kFreeCompleted:
        if (st.live.count(e.addr))
          return TraceError(
              k, "free at " + Hex(e.addr) + " of a block that is alive again before its alloc");
        st.live[e.addr] = LiveInit{-1, e.size, e.stream, false, false, static_cast<int64_t>(k)};
        break;
      case TraceAction::kSegmentAlloc:
        if (!st.segs.erase(e.addr))
          return TraceError(k,
                            "segment_alloc at " + Hex(e.addr) + " of a segment missing at the end");
        break;
      case TraceAction::kSegmentFree:
        st.segs[e.addr] =
            SegInit{e.size, e.stream, e.size == kSmallBuffer ? PoolKind::kSmall : PoolKind::kLarge};
        break;
      case TraceAction::kSegmentMap:
      case TraceAction::kSegmentUnmap:
        return Status::Unsupported(
            "trace holds segment_map/unmap (expandable segments); not supported");
      default:
        break;
    }
  }
  return st;
}

// Finds the segment holding |addr|.
const std::pair<const uint64_t, SegInit>* SegmentOf(const InitialState& st, uint64_t addr) {
  auto it = st.segs.upper_bound(addr);
  if (it == st.segs.begin()) return nullptr;
  --it;
  if (addr >= it->first + static_cast<uint64_t>(it->second.size)) return nullptr;
  return &*it;
}

// Infers unknown block sizes (round_size + the "gap <= 1 MiB is unsplit slack" rule), applying
// |slack| found by earlier restarts.
Status InferSizes(InitialState* st, const AllocatorConfig& cfg,
                  const std::map<uint64_t, int64_t>& slack) {
  for (auto it = st->live.begin(); it != st->live.end(); ++it) {
    LiveInit& b = it->second;
    const auto* seg = SegmentOf(*st, it->first);
    if (seg == nullptr) {
      if (b.event >= 0)
        return TraceError(static_cast<size_t>(b.event),
                          "free at " + Hex(it->first) +
                              " of an address that was never allocated and lies in no segment");
      return Status::InvalidArgument("block " + Hex(it->first) + " lies in no segment");
    }
    const uint64_t seg_end = seg->first + static_cast<uint64_t>(seg->second.size);
    auto next = std::next(it);
    const uint64_t next_start =
        (next != st->live.end() && next->first < seg_end) ? next->first : seg_end;
    if (b.exact) {
      if (it->first + static_cast<uint64_t>(b.size) > next_start)
        return Status::InvalidArgument("block " + Hex(it->first) + " overlaps the next block");
      continue;
    }
    int64_t size = RoundSize(std::max<int64_t>(b.requested, 1), cfg);
    if (it->first + static_cast<uint64_t>(size) > next_start)
      return Status::InvalidArgument("block " + Hex(it->first) + " (inferred " +
                                     std::to_string(size) + " bytes) overlaps the next block");
    const int64_t gap = static_cast<int64_t>(next_start - it->first) - size;
    if (seg->second.pool == PoolKind::kLarge) {
      if (gap > 0 && gap <= kSmallSize) {
        size += gap;  // every free large-pool block is > 1 MiB: the gap is unsplit slack
      } else if (gap > kSmallSize) {
        b.ambiguous = true;
        if (auto s = slack.find(it->first); s != slack.end()) size += s->second;
      }
    }
    b.size = size;
  }
  return Status::OK();
}

struct Counters {
  int64_t rec_reserved = 0, rec_peak_reserved = 0;
  int64_t rec_alloc = 0, rec_peak_alloc = 0;
  int64_t rec_segs = 0, sim_segs = 0, matched_segs = 0;
  int64_t allocs = 0, matched_decisions = 0;
  std::optional<int64_t> first_mismatch;
  uint64_t first_mismatch_addr = 0;
  // Note [Replay fragmentation]: the allocation after which reserved is at its peak with the
  // most allocated (-1: the start of recording).
  int64_t sample_event = -1;
  int64_t sample_reserved = -1, sample_allocated = -1;
};

// One forward run of the trace from the allocator state at the start of recording.
struct Pass {
  explicit Pass(const AllocatorConfig& cfg) : alloc(cfg, DeviceOptions{0, AddressOrder::kDecreasing, 0}) {}
  CachingAllocator alloc;
  std::unordered_map<uint64_t, BlockId> by_addr;  // recorded address of a live block -> block
  std::unordered_map<uint64_t, int64_t> origin;   // simulated address -> trace index of its alloc
  Counters c;

  // Takes the sample if the state now is a later peak (Note [Replay fragmentation]).
  void Sample(int64_t event) {
    const int64_t r = alloc.stats().reserved_bytes.all().current, a = alloc.stats().allocated_bytes.all().current;
    if (r > c.sample_reserved || (r == c.sample_reserved && a > c.sample_allocated)) {
      c.sample_event = event;
      c.sample_reserved = r;
      c.sample_allocated = a;
    }
  }
};

// Runs the trace forward through |p|'s allocator, up to and including event |last| (all: -2;
// none: -1).
Status Forward(const MemorySnapshot& snap, bool use_addresses, Pass* p, int64_t last = -2) {
  CachingAllocator& alloc = p->alloc;
  std::unordered_map<uint64_t, BlockId>& by_addr = p->by_addr;
  Counters* c = &p->c;
  bool pending = false;  // a recorded segment_alloc waits for the alloc it serves
  TraceEvent pending_segment;
  p->Sample(-1);
  const size_t end = last == -2 ? snap.trace.size() : static_cast<size_t>(last + 1);
  for (size_t i = 0; i < end && i < snap.trace.size(); ++i) {
    const TraceEvent& e = snap.trace[i];
    switch (e.action) {
      case TraceAction::kSegmentAlloc:
        pending = true;
        pending_segment = e;
        ++c->rec_segs;
        c->rec_reserved += e.size;
        c->rec_peak_reserved = std::max(c->rec_peak_reserved, c->rec_reserved);
        break;
      case TraceAction::kSegmentFree:
        c->rec_reserved -= e.size;
        // A run of segment_free events is one empty_cache() (or an OOM-ladder flush).
        if (i == 0 || snap.trace[i - 1].action != TraceAction::kSegmentFree) alloc.EmptyCache();
        break;
      case TraceAction::kAlloc: {
        c->rec_alloc += e.size;
        c->rec_peak_alloc = std::max(c->rec_peak_alloc, c->rec_alloc);
        if (by_addr.count(e.addr))
          return TraceError(i, "alloc at " + Hex(e.addr) + " which is still allocated");
        if (e.size <= 0) {
          by_addr[e.addr] = kNoBlock;
          break;
        }
        if (pending && use_addresses)
          alloc.SetNextSegmentHint(pending_segment.addr, pending_segment.size);
        const BlockId b = alloc.Malloc(e.size, e.stream);
        if (b == kNoBlock) return Status::Internal("simulated OOM without a capacity");
        const int64_t dev = alloc.last_malloc_device_bytes();
        if (dev > 0) ++c->sim_segs;
        if (pending && dev == pending_segment.size) ++c->matched_segs;
        pending = false;
        ++c->allocs;
        if (alloc.BlockAddress(b) == e.addr) {
          ++c->matched_decisions;
        } else if (!c->first_mismatch) {
          c->first_mismatch = static_cast<int64_t>(i);
          c->first_mismatch_addr = e.addr;
        }
        by_addr[e.addr] = b;
        p->origin[alloc.BlockAddress(b)] = static_cast<int64_t>(i);
        p->Sample(static_cast<int64_t>(i));
        break;
      }
      case TraceAction::kFreeCompleted: {
        auto it = by_addr.find(e.addr);
        if (it == by_addr.end())
          return TraceError(i, "free at " + Hex(e.addr) + " of no live block");
        c->rec_alloc -= e.size;
        if (it->second != kNoBlock) {
          p->origin.erase(alloc.BlockAddress(it->second));
          alloc.Free(it->second);
        }
        by_addr.erase(it);
        break;
      }
      default:
        break;
    }
  }
  return Status::OK();
}

// Every size of the recording fits the byte budget, so no sum of the replay can overflow.
Status CheckSnapshotBytes(const MemorySnapshot& snap, const AllocatorConfig& cfg) {
  ByteBudget budget(cfg);
  for (const SnapshotSegment& s : snap.segments)
    MEMSIM_RETURN_IF_ERROR(
        budget.AddNamed(s.total_size, [&] { return "segment " + Hex(s.address); }));
  for (const std::pair<uint64_t, int64_t>& a : snap.initially_allocated)
    MEMSIM_RETURN_IF_ERROR(
        budget.AddNamed(a.second, [&] { return "initially allocated " + Hex(a.first); }));
  for (size_t i = 0; i < snap.trace.size(); ++i) {
    const TraceEvent& e = snap.trace[i];
    if (e.action != TraceAction::kAlloc && e.action != TraceAction::kSegmentAlloc &&
        e.action != TraceAction::kSegmentFree)
      continue;
    MEMSIM_RETURN_IF_ERROR(
        budget.AddNamed(e.size, [&] { return "trace[" + std::to_string(i) + "]"; }));
  }
  return Status::OK();
}

bool LayoutMatches(const MemorySnapshot& snap, const CachingAllocator& alloc) {
  const std::vector<SegmentView> sim = alloc.Snapshot();
  if (sim.size() != snap.segments.size()) return false;
  for (size_t k = 0; k < sim.size(); ++k) {
    const SegmentView& a = sim[k];
    const SnapshotSegment& b = snap.segments[k];
    if (a.address != b.address || a.total_size != b.total_size ||
        a.blocks.size() != b.blocks.size())
      return false;
    for (size_t j = 0; j < a.blocks.size(); ++j) {
      if (a.blocks[j].address != b.blocks[j].address || a.blocks[j].size != b.blocks[j].size ||
          a.blocks[j].allocated != (b.blocks[j].state != BlockState::kInactive))
        return false;
    }
  }
  return true;
}

// Puts |p|'s allocator in the state at the start of recording: |st|'s segments and blocks as they
// were (|warm|), or its live blocks allocated in address order into an empty allocator; for
// alloc_data (|st| null) the allocations alive when recording began.
Status Start(const MemorySnapshot& snap, const InitialState* st, bool warm, Pass* p) {
  if (st == nullptr) {
    for (const auto& [addr, bytes] : snap.initially_allocated) {
      p->by_addr[addr] = bytes > 0 ? p->alloc.Malloc(bytes) : kNoBlock;
      p->c.rec_alloc += bytes;
    }
    p->c.rec_peak_alloc = p->c.rec_alloc;
    p->alloc.ResetPeakStats();
    return Status::OK();
  }
  for (const auto& [addr, s] : st->segs) p->c.rec_reserved += s.size;
  for (const auto& [addr, b] : st->live) p->c.rec_alloc += b.requested;
  p->c.rec_peak_reserved = p->c.rec_reserved;
  p->c.rec_peak_alloc = p->c.rec_alloc;
  if (warm) {
    // Warm start: install every segment with its live blocks and free gaps.
    for (const auto& [saddr, s] : st->segs) {
      ImportedSegment seg{saddr, s.size, s.stream, s.pool, {}};
      const uint64_t end = saddr + static_cast<uint64_t>(s.size);
      uint64_t at = saddr;
      for (auto it = st->live.lower_bound(saddr); it != st->live.end() && it->first < end; ++it) {
        if (it->first > at) seg.blocks.push_back({at, static_cast<int64_t>(it->first - at), 0, false});
        seg.blocks.push_back({it->first, it->second.size, it->second.requested, true});
        at = it->first + static_cast<uint64_t>(it->second.size);
      }
      if (at < end) seg.blocks.push_back({at, static_cast<int64_t>(end - at), 0, false});
      MEMSIM_ASSIGN_OR_RETURN(std::vector<BlockId> ids, p->alloc.ImportSegment(seg));
      size_t k = 0;
      for (const BlockView& v : seg.blocks) {
        if (v.allocated) p->by_addr[v.address] = ids[k++];
      }
    }
  } else {
    // Cold start with the live blocks, in address order, under the other settings.
    for (const auto& [addr, b] : st->live)
      p->by_addr[addr] = b.requested > 0 ? p->alloc.Malloc(b.requested, b.stream) : kNoBlock;
  }
  p->alloc.ResetPeakStats();
  return Status::OK();
}

// The allocator state at the peak (Note [Replay fragmentation]): the trace replayed again up to
// the sampled event.
Result<PeakFragmentation> AtPeak(const MemorySnapshot& snap, const InitialState* st, const AllocatorConfig& cfg,
                                 bool warm, int64_t event) {
  Pass p(cfg);
  MEMSIM_RETURN_IF_ERROR(Start(snap, st, warm, &p));
  MEMSIM_RETURN_IF_ERROR(Forward(snap, warm, &p, event));
  auto where = [&](int64_t i) -> std::string {
    if (i < 0 || static_cast<size_t>(i) >= snap.trace.size()) return "";
    const uint32_t w = snap.trace[static_cast<size_t>(i)].where;
    return w < snap.frames.size() ? snap.frames[w] : "";
  };
  return DescribeFragmentation(p.alloc, event, where(event), [&](uint64_t addr) -> std::pair<int64_t, std::string> {
    auto it = p.origin.find(addr);
    if (it == p.origin.end()) return {-1, ""};
    return {it->second, where(it->second)};
  });
}

void Fill(const Pass& p, ReplayReport* rep) {
  rep->allocs = p.c.allocs;
  rep->recorded_peak_allocated_bytes = p.c.rec_peak_alloc;
  rep->stats = p.alloc.stats();
  rep->simulated_peak_reserved_bytes = rep->stats.reserved_bytes.all().peak;
  rep->simulated_peak_allocated_bytes = rep->stats.allocated_bytes.all().peak;
  rep->simulated_peak_requested_bytes = rep->stats.requested_bytes.all().peak;
}

std::vector<std::string> Warnings(const MemorySnapshot& snap) {
  std::vector<std::string> w;
  if (snap.trace.empty())
    w.push_back("the snapshot has no trace history (torch.cuda.memory._record_memory_history() was not on "
                "before the step): nothing is replayed, the figures are the final segments'");
  else if (snap.has_segments && snap.frames.size() <= 1)
    w.push_back("the trace has no stack frames (record with _record_memory_history(stacks=\"python\")): "
                "allocations are named by address only");
  return w;
}

// The what-ifs (Note [Replay fragmentation]): the same trace from the same live blocks, cold,
// under the recorded settings and under each change.
Result<std::vector<ReplayWhatIf>> WhatIfs(const MemorySnapshot& snap, const ReplayOptions& opt) {
  const AllocatorConfig base = opt.alloc_conf ? ParseAllocConf(*opt.alloc_conf).value() : snap.recorded_config;
  std::vector<std::pair<std::string, AllocatorConfig>> runs = {{"as recorded, cold start", base}};
  if (!base.expandable_segments) {
    AllocatorConfig c = base;
    c.expandable_segments = true;
    runs.push_back({"expandable_segments:True", c});
  }
  for (int64_t mb : {128, 512}) {
    AllocatorConfig c = base;
    if (c.expandable_segments || c.max_split_size == mb * kMiB) continue;
    c.max_split_size = mb * kMiB;
    runs.push_back({"max_split_size_mb:" + std::to_string(mb), c});
  }
  std::vector<ReplayWhatIf> out;
  for (const auto& [change, cfg] : runs) {
    ReplayOptions o;
    o.alloc_conf = cfg.ToString();
    o.max_restarts = opt.max_restarts;
    MEMSIM_ASSIGN_OR_RETURN(ReplayReport r, ReplaySnapshot(snap, o));
    ReplayWhatIf w{change, r.alloc_conf, r.simulated_peak_reserved_bytes, r.simulated_peak_allocated_bytes,
                   r.at_peak ? r.at_peak->free_bytes : 0, 0};
    w.change_bytes = out.empty() ? 0 : w.peak_reserved_bytes - out.front().peak_reserved_bytes;
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

Result<ReplayReport> ReplaySnapshot(const MemorySnapshot& snap, const ReplayOptions& opt) {
  ReplayReport rep;
  rep.format = std::string(FormatName(snap.format));
  rep.trace_events = static_cast<int64_t>(snap.trace.size());
  rep.warnings = Warnings(snap);
  AllocatorConfig cfg = snap.recorded_config;
  if (opt.alloc_conf) {
    MEMSIM_ASSIGN_OR_RETURN(cfg, ParseAllocConf(*opt.alloc_conf));
    rep.override_conf = true;
  }
  rep.alloc_conf = cfg.ToString();
  MEMSIM_RETURN_IF_ERROR(CheckSnapshotBytes(snap, cfg));
  MEMSIM_RETURN_IF_ERROR(CheckSnapshotBytes(snap, snap.recorded_config));
  if (opt.what_if && !snap.trace.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(rep.what_if, WhatIfs(snap, opt));
  }

  if (!snap.has_segments) {
    // alloc_data: a cold allocator plus the allocations alive when recording began.
    Pass p(cfg);
    MEMSIM_RETURN_IF_ERROR(Start(snap, nullptr, false, &p));
    MEMSIM_RETURN_IF_ERROR(Forward(snap, false, &p));
    Fill(p, &rep);
    rep.initial_live_blocks = static_cast<int64_t>(snap.initially_allocated.size());
    MEMSIM_ASSIGN_OR_RETURN(rep.at_peak, AtPeak(snap, nullptr, cfg, false, p.c.sample_event));
    return rep;
  }

  MEMSIM_ASSIGN_OR_RETURN(InitialState base, Undo(snap));
  rep.initial_segments = static_cast<int64_t>(base.segs.size());
  rep.initial_live_blocks = static_cast<int64_t>(base.live.size());
  const bool warm = !rep.override_conf;
  rep.warm_start = warm;
  std::map<uint64_t, int64_t> slack;
  for (int attempt = 0;; ++attempt) {
    InitialState st = base;
    MEMSIM_RETURN_IF_ERROR(InferSizes(&st, snap.recorded_config, slack));
    Pass p(cfg);
    MEMSIM_RETURN_IF_ERROR(Start(snap, &st, warm, &p));
    MEMSIM_RETURN_IF_ERROR(Forward(snap, warm, &p));
    const Counters& c = p.c;

    // Note [Warm-start reconstruction], step 4: a misplaced allocation that starts within 1 MiB
    // after an ambiguous block reveals that block's unsplit slack; add it and start again.
    if (warm && c.first_mismatch && attempt < opt.max_restarts) {
      auto it = st.live.upper_bound(c.first_mismatch_addr);
      if (it != st.live.begin()) {
        --it;
        const uint64_t end = it->first + static_cast<uint64_t>(it->second.size);
        const uint64_t a = c.first_mismatch_addr;
        if (it->second.ambiguous && a > end && a - end <= static_cast<uint64_t>(kSmallSize) &&
            !slack.count(it->first)) {
          slack[it->first] = static_cast<int64_t>(a - end);
          ++rep.restarts;
          continue;
        }
      }
    }

    Fill(p, &rep);
    rep.recorded_peak_reserved_bytes = c.rec_peak_reserved;
    rep.segment_allocs_recorded = c.rec_segs;
    rep.segment_allocs_simulated = c.sim_segs;
    rep.segment_allocs_matched = c.matched_segs;
    if (warm) {
      rep.alloc_decisions_matched = c.matched_decisions;
      rep.first_mismatch_event = c.first_mismatch;
      rep.final_layout_matches = LayoutMatches(snap, p.alloc);
    }
    MEMSIM_ASSIGN_OR_RETURN(rep.at_peak, AtPeak(snap, &st, cfg, warm, c.sample_event));
    return rep;
  }
}

double SegmentMatchRate(const ReplayReport& r) {
  if (!r.segment_allocs_recorded) return 0.0;
  const int64_t denom =
      std::max(*r.segment_allocs_recorded, r.segment_allocs_simulated.value_or(0));
  if (denom == 0) return 1.0;
  return static_cast<double>(r.segment_allocs_matched.value_or(0)) / static_cast<double>(denom);
}

nlohmann::ordered_json ReplayReportToJson(const ReplayReport& r) {
  using nlohmann::ordered_json;
  auto opt = [](const auto& v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
  ordered_json j;
  j["format"] = r.format;
  j["alloc_conf"] = r.alloc_conf;
  j["alloc_conf_override"] = r.override_conf;
  j["warm_start"] = r.warm_start;
  j["trace_events"] = r.trace_events;
  j["allocs"] = r.allocs;
  j["initial_segments"] = r.initial_segments;
  j["initial_live_blocks"] = r.initial_live_blocks;
  j["restarts"] = r.restarts;
  j["recorded_peak_reserved_bytes"] = opt(r.recorded_peak_reserved_bytes);
  j["simulated_peak_reserved_bytes"] = r.simulated_peak_reserved_bytes;
  j["recorded_peak_allocated_bytes"] = r.recorded_peak_allocated_bytes;
  j["simulated_peak_allocated_bytes"] = r.simulated_peak_allocated_bytes;
  j["simulated_peak_requested_bytes"] = r.simulated_peak_requested_bytes;
  j["segment_allocs_recorded"] = opt(r.segment_allocs_recorded);
  j["segment_allocs_simulated"] = opt(r.segment_allocs_simulated);
  j["segment_allocs_matched"] = opt(r.segment_allocs_matched);
  j["segment_match_rate"] =
      r.segment_allocs_recorded ? ordered_json(SegmentMatchRate(r)) : ordered_json(nullptr);
  j["alloc_decisions_matched"] = opt(r.alloc_decisions_matched);
  j["first_mismatch_event"] = opt(r.first_mismatch_event);
  j["final_layout_matches"] = opt(r.final_layout_matches);
  j["stats"] = DeviceStatsToJson(r.stats);
  j["at_peak"] = r.at_peak ? ToJson(*r.at_peak) : ordered_json(nullptr);
  ordered_json what_if = ordered_json::array();
  for (const ReplayWhatIf& w : r.what_if)
    what_if.push_back({{"change", w.change}, {"alloc_conf", w.alloc_conf}, {"peak_reserved_bytes", w.peak_reserved_bytes},
                       {"peak_allocated_bytes", w.peak_allocated_bytes},
                       {"reserved_minus_allocated_bytes", w.reserved_minus_allocated_bytes},
                       {"change_bytes", w.change_bytes}});
  j["what_if"] = what_if;
  j["warnings"] = r.warnings;
  return j;
}

}  // namespace memsim
