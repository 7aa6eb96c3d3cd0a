// Replays a recorded memory history (snapshot.h) through the caching-allocator model and
// compares with what the real allocator did: peak reserved / allocated, segment allocations
// (same moment, same size) and per-allocation placement (same address). For warm snapshots the
// allocator state at the start of recording is rebuilt from the final segments by undoing the
// trace (replay_notes.md). With an alloc-conf override it answers "what would this run have
// reserved with expandable segments / max_split_size_mb:N". Pure function; thread-safe.
//
//   Result<ReplayReport> r = ReplaySnapshot(snapshot, {.alloc_conf = "expandable_segments:True"});
#ifndef MEMSIM_SIM_REPLAY_REPLAY_H_
#define MEMSIM_SIM_REPLAY_REPLAY_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/status.h"
#include "sim/allocator/allocator_stats.h"
#include "sim/replay/fragmentation.h"
#include "sim/replay/snapshot.h"

namespace memsim {

struct ReplayOptions {
  /// PYTORCH_CUDA_ALLOC_CONF to simulate instead of the recorded settings. With an override
  /// the replay starts from the blocks alive at the start of recording (re-allocated in address
  /// order into an empty allocator), since the recorded cache layout belongs to other settings.
  std::optional<std::string> alloc_conf;
  int max_restarts = 16;  ///< Note [Warm-start reconstruction], ambiguity step
  /// Also replay the trace under expandable_segments and max_split_size_mb (ReplayReport::what_if).
  bool what_if = false;
};

/// The same trace under other settings (Note [Replay fragmentation]): every row starts cold from
/// the blocks alive when recording began; the first row is the recorded settings (or the
/// --alloc-conf override), the baseline of |change_bytes|.
struct ReplayWhatIf {
  std::string change;       ///< "as recorded, cold start", "expandable_segments:True", "max_split_size_mb:128"
  std::string alloc_conf;   ///< the whole configuration replayed (canonical)
  int64_t peak_reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_minus_allocated_bytes = 0;  ///< at its own peak (Note [Replay fragmentation])
  int64_t change_bytes = 0;                    ///< peak reserved minus the first row's
};

struct ReplayReport {
  std::string format;      ///< "pickle" | "alloc_data"
  std::string alloc_conf;  ///< config simulated (canonical form)
  bool override_conf = false;
  bool warm_start = false;  ///< rebuilt the cached segments from the dump
  int64_t trace_events = 0;
  int64_t allocs = 0;
  int64_t initial_segments = 0;  ///< segments reconstructed at the start of recording
  int64_t initial_live_blocks = 0;
  int restarts = 0;

  std::optional<int64_t> recorded_peak_reserved_bytes;  ///< null without segment information
  int64_t simulated_peak_reserved_bytes = 0;
  /// Recorded peak of live *requested* bytes (the trace only has requested sizes).
  int64_t recorded_peak_allocated_bytes = 0;
  int64_t simulated_peak_allocated_bytes = 0;  ///< block bytes (after rounding), PyTorch's stat
  int64_t simulated_peak_requested_bytes = 0;  ///< compare with recorded_peak_allocated_bytes

  std::optional<int64_t> segment_allocs_recorded;  ///< null without segment information
  std::optional<int64_t> segment_allocs_simulated;
  std::optional<int64_t> segment_allocs_matched;   ///< same event, same size
  std::optional<int64_t> alloc_decisions_matched;  ///< allocations placed at the recorded address
  std::optional<int64_t> first_mismatch_event;     ///< trace index of the first misplacement
  std::optional<bool> final_layout_matches;        ///< simulated final segments == dump

  DeviceStats stats;

  /// The allocator's state at the peak: what reserved-but-unallocated memory is made of.
  std::optional<PeakFragmentation> at_peak;
  std::vector<ReplayWhatIf> what_if;  ///< with ReplayOptions::what_if
  std::vector<std::string> warnings;  ///< e.g. a snapshot without trace history
};

/// Replays |snapshot|. Errors: an inconsistent trace (free of an unknown address, ...), an
/// unsupported recording (expandable segments in the dump), or a bad alloc_conf.
Result<ReplayReport> ReplaySnapshot(const MemorySnapshot& snapshot,
                                    const ReplayOptions& options = {});

/// Fraction of segment allocations that match: matched / max(recorded, simulated); 1 if both 0.
double SegmentMatchRate(const ReplayReport& r);

/// JSON with a fixed key order; missing information is null.
nlohmann::ordered_json ReplayReportToJson(const ReplayReport& r);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPLAY_REPLAY_H_
