// SimulateAllocator: runs one training step's memory events (lib/stream/events.h) through an
// allocator model and reports peaks, PyTorch-named stats, fragmentation and a simulated OOM.
// Pure function of its inputs; safe to call concurrently on a shared const EventStream.
//
// API (what `memsim run` needs):
//   AllocatorOptions opt;                       // model kCaching | kExpandable | kIdeal
//   opt.alloc_conf = "max_split_size_mb:128";   // PYTORCH_CUDA_ALLOC_CONF syntax
//   opt.capacity_bytes = 16LL << 30;            // 0 = unlimited (no OOM possible)
//   Result<AllocatorReport> r = SimulateAllocator(events, opt);   // error only for a bad conf
//   r->peak_reserved_bytes, r->peak_allocated_bytes, r->ideal_peak_bytes, r->fragmentation
//   if (r->oom) { r->oom->buffer, r->oom->op, r->oom->info.message }   // caller maps names
//   nlohmann::ordered_json j = AllocatorReportToJson(*r);          // stable key order
// A simulated OOM stops the step (as PyTorch raises); peaks cover the events before it.
#ifndef MEMSIM_SIM_ALLOCATOR_SIMULATE_H_
#define MEMSIM_SIM_ALLOCATOR_SIMULATE_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/stream/events.h"
#include "lib/util/status.h"
#include "sim/allocator/alloc_config.h"
#include "sim/allocator/allocator_stats.h"
#include "sim/allocator/caching_allocator.h"

namespace memsim {

enum class AllocatorModel : uint8_t {
  kCaching,     ///< PyTorch's native caching allocator with the given alloc_conf
  kExpandable,  ///< the same with expandable_segments:True forced on
  kIdeal,       ///< best-fit offset planning in one arena (lower bound), see ideal_packing.h
};
std::string_view AllocatorModelName(AllocatorModel m);
/// Parses "caching" | "expandable" | "ideal".
Result<AllocatorModel> ParseAllocatorModel(std::string_view name);

struct AllocatorOptions {
  AllocatorModel model = AllocatorModel::kCaching;
  std::string alloc_conf;      ///< PYTORCH_CUDA_ALLOC_CONF string; "" = defaults
  int64_t capacity_bytes = 0;  ///< device memory available to the allocator; 0 = unlimited
  AddressOrder address_order = AddressOrder::kDecreasing;
  bool compute_ideal = true;  ///< also run the ideal packer for ideal_peak_bytes
  bool record_placement = false;  ///< fill AllocatorReport::placement (caching models only)
};

/// Where the caching model put every block (what a memory_viz export draws).
struct Placement {
  std::vector<uint64_t> address;        ///< per event: its block's address (0: zero-byte, none)
  std::vector<int64_t> segment_bytes;   ///< per event: device bytes its Malloc obtained (0: cached)
  std::vector<SegmentView> final_segments;  ///< the segments after the last simulated event
};

/// Fragmentation at the moment reserved memory first reached its peak.
struct Fragmentation {
  int64_t event_index = -1;  ///< index into EventStream::events (-1: no event)
  int64_t reserved_bytes = 0;
  int64_t allocated_bytes = 0;          ///< block bytes
  int64_t requested_bytes = 0;          ///< caller bytes
  int64_t internal_bytes = 0;           ///< allocated - requested = rounding + unsplit
  int64_t internal_rounding_bytes = 0;  ///< round_size(n) - n
  int64_t internal_unsplit_bytes = 0;   ///< remainders handed out whole (R6.2)
  int64_t external_bytes = 0;           ///< reserved - allocated: free gaps in reserved segments
  int64_t inactive_split_bytes = 0;     ///< the part of external that empty_cache cannot free
  int64_t largest_free_block_bytes = 0;
};

/// A simulated OOM and what triggered it.
struct OomRecord {
  OomInfo info;         ///< PyTorch's numbers and message
  uint32_t buffer = 0;  ///< EventStream::buffers index of the failed allocation
  uint32_t op = kNoOp;  ///< op index of the event
  Phase phase = Phase::kSetup;
  int64_t event_index = 0;
};

struct AllocatorReport {
  AllocatorModel model = AllocatorModel::kCaching;
  std::string alloc_conf;  ///< canonical form of the parsed config
  int64_t capacity_bytes = 0;
  int64_t peak_allocated_bytes = 0;  ///< max_memory_allocated(): block bytes
  int64_t peak_reserved_bytes = 0;   ///< max_memory_reserved(); arena peak for kIdeal
  int64_t peak_requested_bytes = 0;  ///< peak of caller bytes alive
  /// The event after which the caller bytes alive first reached that peak (caching models; -1:
  /// none reached the allocator). Without an OOM this is lib/analysis/peak.h's FindPeak event.
  int64_t peak_requested_event = -1;
  int64_t ideal_peak_bytes = 0;      ///< ideal packing lower bound (0 if not computed)
  int64_t events_simulated = 0;      ///< events processed (fewer than all after an OOM)
  DeviceStats stats;                 ///< final stats (peaks included); zero for kIdeal
  Fragmentation fragmentation;
  std::optional<OomRecord> oom;
  std::optional<Placement> placement;  ///< with AllocatorOptions::record_placement
};

/// Bounds every byte total of one simulation so that no statistic (current, peak, cumulative
/// allocated/freed), arena offset or rounded size can overflow int64: each request must be in
/// [0, kMaxRequestBytes] and the worst case it can add to any total (twice its size plus two
/// segments of slack) summed over the run must stay below kMaxTotalBytes. Not thread-safe.
class ByteBudget {
 public:
  explicit ByteBudget(const AllocatorConfig& config);
  /// Accounts one request of |bytes|; the error names |what| ("tensor \"fc.weight\"").
  Status Add(int64_t bytes, const std::string& what);
  /// Add() for a request whose name is only built when it fails.
  template <typename NameFn>
  Status AddNamed(int64_t bytes, NameFn&& what) {
    if (bytes >= 0 && bytes <= kMaxRequestBytes && total_ <= kMaxTotalBytes - Cost(bytes)) {
      total_ += Cost(bytes);
      return Status::OK();
    }
    return Add(bytes, what());
  }

 private:
  int64_t Cost(int64_t bytes) const { return 2 * bytes + slack_; }
  int64_t slack_;
  int64_t total_ = 0;
};

/// The caching models' state after the first events of a stream, to resume from on streams
/// that start with the same events of the same sizes (a size schedule's fixed prefix).
struct AllocatorCheckpoint;

/// Simulates |events|; from |from| (SimulatePrefix's state after their first events) when it is
/// not null and was made with the same model, alloc_conf, capacity and address order (and
/// |options| records no placement), else from the start: the same report either way. Errors: a
/// bad alloc_conf, a buffer or byte total out of range (see ByteBudget), or an event stream that
/// frees a buffer that is not allocated / allocates one twice / names a buffer out of range.
Result<AllocatorReport> SimulateAllocator(const EventStream& events, const AllocatorOptions& options,
                                          const AllocatorCheckpoint* from = nullptr);

/// The state after the first |prefix| events of |events| under |options|; null (simulate from
/// the start) for the ideal model, a placement record, or an OOM among them.
Result<std::shared_ptr<const AllocatorCheckpoint>> SimulatePrefix(const EventStream& events, size_t prefix,
                                                                  const AllocatorOptions& options);

/// Checkpoints by allocator options, each made on first use from the first stream it is asked
/// with: every stream a cache sees must start with the same |prefix| events of the same sizes.
/// Thread-safe.
class CheckpointCache {
 public:
  /// The checkpoint after the first |prefix| events of |events| for |options|; null when there is
  /// none (see SimulatePrefix; also after an error, which the full run then reports).
  const AllocatorCheckpoint* Get(const EventStream& events, size_t prefix, const AllocatorOptions& options);

 private:
  static constexpr size_t kMaxEntries = 16;  // option sets of one compiled step: a few
  std::mutex mu_;
  std::vector<std::pair<AllocatorOptions, std::shared_ptr<const AllocatorCheckpoint>>> made_;
};

/// The report as JSON with a fixed key order (the run command embeds it).
nlohmann::ordered_json AllocatorReportToJson(const AllocatorReport& report);
/// PyTorch-style stats block: {"allocated_bytes": {"all": {"current", "peak"}, ...}, ...}.
nlohmann::ordered_json DeviceStatsToJson(const DeviceStats& stats);

}  // namespace memsim

#endif  // MEMSIM_SIM_ALLOCATOR_SIMULATE_H_
