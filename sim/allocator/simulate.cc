#include "sim/allocator/simulate.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "sim/allocator/ideal_packing.h"

namespace memsim {
namespace {

Status BadEvent(size_t i, const std::string& what) {
  return Status::InvalidArgument("events[" + std::to_string(i) + "]: " + what);
}

// The ideal packer over the whole stream: peak arena bytes and peak live bytes.
Result<std::pair<int64_t, int64_t>> RunIdeal(const EventStream& es, size_t limit) {
  IdealPacker packer;
  std::vector<int64_t> offset(es.buffers.size(), -1);
  for (size_t i = 0; i < limit; ++i) {
    const MemEvent& e = es.events[i];
    if (e.buffer >= es.buffers.size()) return BadEvent(i, "buffer index out of range");
    const int64_t bytes = es.buffers[e.buffer].bytes;
    if (e.kind == EventKind::kAlloc) {
      if (offset[e.buffer] >= 0) return BadEvent(i, "buffer allocated twice");
      offset[e.buffer] = bytes > 0 ? packer.Allocate(bytes) : -2;
    } else {
      if (offset[e.buffer] == -1) return BadEvent(i, "free of a buffer that is not allocated");
      if (offset[e.buffer] >= 0) packer.Free(offset[e.buffer], bytes);
      offset[e.buffer] = -1;
    }
  }
  return std::make_pair(packer.peak_arena_bytes(), packer.peak_live_bytes());
}

// Every buffer of events [from, to) that allocates fits |budget| (the budget of the events
// before |from| already added).
Status CheckStreamBytes(const EventStream& es, size_t from, size_t to, ByteBudget* budget) {
  for (size_t i = from; i < to; ++i) {
    const MemEvent& e = es.events[i];
    if (e.kind != EventKind::kAlloc) continue;
    if (e.buffer >= es.buffers.size()) return BadEvent(i, "buffer index out of range");
    const Buffer& b = es.buffers[e.buffer];
    MEMSIM_RETURN_IF_ERROR(budget->AddNamed(b.bytes, [&] { return "tensor \"" + b.name + "\""; }));
  }
  return Status::OK();
}

}  // namespace

ByteBudget::ByteBudget(const AllocatorConfig& config)
    : slack_(2 * std::max(kLargeBuffer, config.large_segment_size)) {}

Status ByteBudget::Add(int64_t bytes, const std::string& what) {
  if (bytes < 0) return Status::InvalidArgument(what + ": negative size " + std::to_string(bytes));
  if (bytes > kMaxRequestBytes)
    return Status::InvalidArgument(what + ": " + std::to_string(bytes) +
                                   " bytes is more than memsim models (2^50 bytes = 1 PiB)");
  if (total_ > kMaxTotalBytes - Cost(bytes))
    return Status::InvalidArgument(what + ": the bytes requested by the whole run exceed 2^62; "
                                          "the totals would overflow 64-bit arithmetic");
  total_ += Cost(bytes);
  return Status::OK();
}

std::string_view AllocatorModelName(AllocatorModel m) {
  switch (m) {
    case AllocatorModel::kCaching:
      return "caching";
    case AllocatorModel::kExpandable:
      return "expandable";
    case AllocatorModel::kIdeal:
      return "ideal";
  }
  return "?";
}

Result<AllocatorModel> ParseAllocatorModel(std::string_view name) {
  if (name == "caching") return AllocatorModel::kCaching;
  if (name == "expandable") return AllocatorModel::kExpandable;
  if (name == "ideal") return AllocatorModel::kIdeal;
  return Status::InvalidArgument("allocator model '" + std::string(name) +
                                 "' is not one of caching, expandable, ideal");
}

namespace {

// The ideal model: best-fit offsets in one arena.
Result<AllocatorReport> SimulateIdeal(const EventStream& es, const AllocatorConfig& cfg, AllocatorReport rep) {
  ByteBudget budget(cfg);
  MEMSIM_RETURN_IF_ERROR(CheckStreamBytes(es, 0, es.events.size(), &budget));
  MEMSIM_ASSIGN_OR_RETURN(auto ideal, RunIdeal(es, es.events.size()));
  rep.peak_reserved_bytes = rep.ideal_peak_bytes = ideal.first;
  rep.peak_allocated_bytes = ideal.second;
  int64_t live = 0;
  for (const MemEvent& e : es.events) {
    live += (e.kind == EventKind::kAlloc ? 1 : -1) * es.buffers[e.buffer].bytes;
    rep.peak_requested_bytes = std::max(rep.peak_requested_bytes, live);
  }
  rep.events_simulated = static_cast<int64_t>(es.events.size());
  return rep;
}

// See Note [Fragmentation]: sampled when reserved first reaches a new peak, after event |i|.
void SampleFragmentation(const CachingAllocator& alloc, size_t i, Fragmentation* f) {
  const DeviceStats& st = alloc.stats();
  f->event_index = static_cast<int64_t>(i);
  f->reserved_bytes = st.reserved_bytes.all().current;
  f->allocated_bytes = st.allocated_bytes.all().current;
  f->requested_bytes = st.requested_bytes.all().current;
  f->internal_bytes = f->allocated_bytes - f->requested_bytes;
  f->internal_rounding_bytes = alloc.rounding_waste_bytes();
  f->internal_unsplit_bytes = alloc.unsplit_waste_bytes();
  f->external_bytes = f->reserved_bytes - f->allocated_bytes;
  f->inactive_split_bytes = st.inactive_split_bytes.all().current;
  f->largest_free_block_bytes = alloc.LargestFreeBlock();
}

// What a buffer holds while the caching models run: its block, or one of these.
constexpr BlockId kNotLive = kNoBlock;
constexpr BlockId kLiveZeroBytes = kNoBlock - 1;  // allocated, but never reached the allocator
static_assert(kLiveZeroBytes >= CachingAllocator::kMaxBlocks, "a block id would read as a state");

// Whether a checkpoint made with |a| applies to a run with |b|.
bool SameRun(const AllocatorOptions& a, const AllocatorOptions& b) {
  return a.model == b.model && a.alloc_conf == b.alloc_conf && a.capacity_bytes == b.capacity_bytes &&
         a.address_order == b.address_order && !b.record_placement;
}

}  // namespace

// One caching-model simulation in progress: the allocator, each buffer's block, and what the
// report samples along the way. Copyable: a checkpoint is one of these.
struct CachingRun {
  CachingRun(const AllocatorConfig& cfg, const AllocatorOptions& opt, size_t buffers)
      : budget(cfg), alloc(cfg, DeviceOptions{opt.capacity_bytes, opt.address_order, 0}), block(buffers, kNotLive) {}

  // Simulates events [next, to) of |es|. An OOM stops the run (the rest of the stream must
  // still fit the byte budget). Checks the stream and the budget as it goes.
  Status Advance(const EventStream& es, size_t to, Placement* place);

  ByteBudget budget;
  CachingAllocator alloc;
  std::vector<BlockId> block;
  int64_t frag_reserved = -1, peak_requested = 0, peak_requested_event = -1;
  Fragmentation fragmentation;
  std::optional<OomRecord> oom;
  size_t next = 0;  // events simulated
};

struct AllocatorCheckpoint {
  AllocatorOptions options;
  CachingRun run;  // its block map has one entry per buffer of the stream it was made on
};

Status CachingRun::Advance(const EventStream& es, size_t to, Placement* place) {
  const DeviceStats& st = alloc.stats();
  if (oom) return Status::OK();
  // Locals, not the members, in the loop: the calls into the allocator would make the compiler
  // store and reload them at every event.
  int64_t peak = peak_requested, peak_event = peak_requested_event, reserved_sampled = frag_reserved;
  size_t i = next;
  auto done = [&] {
    next = i;
    peak_requested = peak;
    peak_requested_event = peak_event;
    frag_reserved = reserved_sampled;
  };
  for (; i < to; ++i) {
    const MemEvent& e = es.events[i];
    if (e.buffer >= es.buffers.size()) return BadEvent(i, "buffer index out of range");
    BlockId& held = block[e.buffer];
    if (e.kind == EventKind::kFree) {
      if (held == kNotLive) return BadEvent(i, "free of a buffer that is not allocated");
      if (held != kLiveZeroBytes) {
        if (place) place->address[i] = alloc.BlockAddress(held);
        alloc.Free(held);
      }
      held = kNotLive;
      continue;
    }
    if (held != kNotLive) return BadEvent(i, "buffer allocated twice");
    const Buffer& buf = es.buffers[e.buffer];
    MEMSIM_RETURN_IF_ERROR(budget.AddNamed(buf.bytes, [&] { return "tensor \"" + buf.name + "\""; }));
    if (buf.bytes == 0) {  // a zero-byte tensor never reaches the allocator
      held = kLiveZeroBytes;
      continue;
    }
    held = alloc.Malloc(buf.bytes, buf.stream);
    if (held == kNoBlock) {
      oom = OomRecord{*alloc.last_oom(), e.buffer, e.op, e.phase, static_cast<int64_t>(i)};
      done();  // |next| stays at the OOM
      return CheckStreamBytes(es, i + 1, es.events.size(), &budget);
    }
    if (place) {
      place->address[i] = alloc.BlockAddress(held);
      place->segment_bytes[i] = alloc.last_malloc_device_bytes();
    }
    if (st.requested_bytes.all().current > peak) {
      peak = st.requested_bytes.all().current;
      peak_event = static_cast<int64_t>(i);
    }
    if (st.reserved_bytes.all().current > reserved_sampled) {
      reserved_sampled = st.reserved_bytes.all().current;
      SampleFragmentation(alloc, i, &fragmentation);
    }
  }
  done();
  return Status::OK();
}

namespace {

// The caching models over the whole stream, from the start or from |from| (a run of its first
// events).
Status RunCaching(const EventStream& es, const AllocatorConfig& cfg, const AllocatorOptions& opt,
                  const CachingRun* from, AllocatorReport* rep) {
  Placement* place = nullptr;
  if (opt.record_placement) {
    place = &rep->placement.emplace();
    place->address.assign(es.events.size(), 0);
    place->segment_bytes.assign(es.events.size(), 0);
  }
  CachingRun run = from ? *from : CachingRun(cfg, opt, es.buffers.size());
  MEMSIM_RETURN_IF_ERROR(run.Advance(es, es.events.size(), place));
  const DeviceStats& st = run.alloc.stats();
  rep->events_simulated = static_cast<int64_t>(run.next);
  if (place) place->final_segments = run.alloc.Snapshot();
  rep->stats = st;
  rep->peak_allocated_bytes = st.allocated_bytes.all().peak;
  rep->peak_reserved_bytes = st.reserved_bytes.all().peak;
  rep->peak_requested_bytes = st.requested_bytes.all().peak;
  rep->peak_requested_event = run.peak_requested_event;
  rep->fragmentation = run.fragmentation;
  rep->oom = std::move(run.oom);
  if (opt.compute_ideal) {
    MEMSIM_ASSIGN_OR_RETURN(auto ideal, RunIdeal(es, run.next));
    rep->ideal_peak_bytes = ideal.first;
  }
  return Status::OK();
}

// The options' config, checked.
Result<AllocatorConfig> ConfigOf(const AllocatorOptions& opt) {
  MEMSIM_ASSIGN_OR_RETURN(AllocatorConfig cfg, ParseAllocConf(opt.alloc_conf));
  if (opt.model == AllocatorModel::kExpandable) cfg.expandable_segments = true;
  if (opt.capacity_bytes < 0) return Status::InvalidArgument("capacity_bytes must be >= 0");
  if (opt.record_placement && (opt.model == AllocatorModel::kIdeal || cfg.expandable_segments))
    return Status::Unsupported("the memory_viz export needs the caching allocator without expandable_segments");
  return cfg;
}

}  // namespace

Result<AllocatorReport> SimulateAllocator(const EventStream& es, const AllocatorOptions& opt,
                                          const AllocatorCheckpoint* from) {
  MEMSIM_ASSIGN_OR_RETURN(AllocatorConfig cfg, ConfigOf(opt));
  AllocatorReport rep;
  rep.model = opt.model;
  rep.alloc_conf = cfg.ToString();
  rep.capacity_bytes = opt.capacity_bytes;
  if (opt.model == AllocatorModel::kIdeal) return SimulateIdeal(es, cfg, std::move(rep));
  const bool resume = from != nullptr && SameRun(from->options, opt) && from->run.block.size() == es.buffers.size();
  MEMSIM_RETURN_IF_ERROR(RunCaching(es, cfg, opt, resume ? &from->run : nullptr, &rep));
  return rep;
}

Result<std::shared_ptr<const AllocatorCheckpoint>> SimulatePrefix(const EventStream& es, size_t events,
                                                                  const AllocatorOptions& opt) {
  MEMSIM_ASSIGN_OR_RETURN(AllocatorConfig cfg, ConfigOf(opt));
  if (opt.model == AllocatorModel::kIdeal || opt.record_placement || events > es.events.size())
    return std::shared_ptr<const AllocatorCheckpoint>();
  auto c = std::make_shared<AllocatorCheckpoint>(AllocatorCheckpoint{opt, CachingRun(cfg, opt, es.buffers.size())});
  MEMSIM_RETURN_IF_ERROR(c->run.Advance(es, events, nullptr));
  if (c->run.oom) return std::shared_ptr<const AllocatorCheckpoint>();
  return std::shared_ptr<const AllocatorCheckpoint>(std::move(c));
}

const AllocatorCheckpoint* CheckpointCache::Get(const EventStream& events, size_t prefix,
                                                const AllocatorOptions& options) {
  if (prefix == 0 || options.record_placement) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [opt, made] : made_)
    if (SameRun(opt, options)) return made.get();
  if (made_.size() >= kMaxEntries) return nullptr;
  Result<std::shared_ptr<const AllocatorCheckpoint>> c = SimulatePrefix(events, prefix, options);
  made_.emplace_back(options, c.ok() ? *c : nullptr);
  return made_.back().second.get();
}

nlohmann::ordered_json DeviceStatsToJson(const DeviceStats& s) {
  using nlohmann::ordered_json;
  auto arr = [](const StatArray& a) {
    ordered_json j;
    const char* names[3] = {"all", "small_pool", "large_pool"};
    for (int k = 0; k < 3; ++k) {
      j[names[k]] = ordered_json{{"current", a.s[k].current}, {"peak", a.s[k].peak}};
    }
    return j;
  };
  ordered_json j;
  j["allocated_bytes"] = arr(s.allocated_bytes);
  j["reserved_bytes"] = arr(s.reserved_bytes);
  j["active_bytes"] = arr(s.active_bytes());
  j["requested_bytes"] = arr(s.requested_bytes);
  j["inactive_split_bytes"] = arr(s.inactive_split_bytes);
  j["allocation"] = arr(s.allocation);
  j["segment"] = arr(s.segment);
  j["active"] = arr(s.active());
  j["inactive_split"] = arr(s.inactive_split);
  j["num_alloc_retries"] = s.num_alloc_retries;
  j["num_ooms"] = s.num_ooms;
  j["num_device_alloc"] = s.num_device_alloc;
  j["num_device_free"] = s.num_device_free;
  j["oversize_allocations"] = ordered_json{{"current", s.oversize_allocations.current},
                                           {"peak", s.oversize_allocations.peak}};
  j["oversize_segments"] =
      ordered_json{{"current", s.oversize_segments.current}, {"peak", s.oversize_segments.peak}};
  return j;
}

nlohmann::ordered_json AllocatorReportToJson(const AllocatorReport& r) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["model"] = std::string(AllocatorModelName(r.model));
  j["alloc_conf"] = r.alloc_conf;
  j["capacity_bytes"] =
      r.capacity_bytes > 0 ? ordered_json(r.capacity_bytes) : ordered_json(nullptr);
  j["peak_allocated_bytes"] = r.peak_allocated_bytes;
  j["peak_reserved_bytes"] = r.peak_reserved_bytes;
  j["peak_requested_bytes"] = r.peak_requested_bytes;
  j["ideal_peak_bytes"] = r.ideal_peak_bytes;
  j["events_simulated"] = r.events_simulated;
  const Fragmentation& f = r.fragmentation;
  j["fragmentation"] = ordered_json{{"at_event", f.event_index},
                                    {"reserved_bytes", f.reserved_bytes},
                                    {"allocated_bytes", f.allocated_bytes},
                                    {"requested_bytes", f.requested_bytes},
                                    {"internal_bytes", f.internal_bytes},
                                    {"internal_rounding_bytes", f.internal_rounding_bytes},
                                    {"internal_unsplit_bytes", f.internal_unsplit_bytes},
                                    {"external_bytes", f.external_bytes},
                                    {"inactive_split_bytes", f.inactive_split_bytes},
                                    {"largest_free_block_bytes", f.largest_free_block_bytes}};
  j["stats"] = DeviceStatsToJson(r.stats);
  if (r.oom) {
    const OomInfo& o = r.oom->info;
    j["oom"] =
        ordered_json{{"buffer", r.oom->buffer},
                     {"op", r.oom->op == kNoOp ? ordered_json(nullptr) : ordered_json(r.oom->op)},
                     {"phase", std::string(PhaseName(r.oom->phase))},
                     {"event_index", r.oom->event_index},
                     {"requested_bytes", o.requested_bytes},
                     {"tried_to_allocate_bytes", o.tried_to_allocate_bytes},
                     {"capacity_bytes", o.capacity_bytes},
                     {"free_bytes", o.free_bytes},
                     {"allocated_bytes", o.allocated_bytes},
                     {"reserved_bytes", o.reserved_bytes},
                     {"reserved_unallocated_bytes", o.reserved_unallocated_bytes},
                     {"message", o.message}};
  } else {
    j["oom"] = nullptr;
  }
  return j;
}

}  // namespace memsim
