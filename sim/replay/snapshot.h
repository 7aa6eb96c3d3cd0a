// A recorded PyTorch memory history, read from (a) the pickle written by
// torch.cuda.memory._dump_snapshot() (final `segments` + `device_traces` + `allocator_settings`)
// or (b) the `alloc_data` JSON of a `_memory_viz trace_plot` HTML page (allocation sizes only,
// no addresses, no segments) — bare JSON or the HTML itself. Plain data; see
// docs/allocator.md, Note [Snapshot formats].
#ifndef MEMSIM_SIM_REPLAY_SNAPSHOT_H_
#define MEMSIM_SIM_REPLAY_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/util/status.h"
#include "sim/allocator/alloc_config.h"
#include "sim/allocator/caching_allocator.h"

namespace memsim {

enum class TraceAction : uint8_t {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kOom,
  kSnapshot,
  kOther
};

/// One trace entry; |size| is the caller's requested bytes for alloc/free, the segment size for
/// segment_* (see caching_allocator.md §16).
struct TraceEvent {
  TraceAction action = TraceAction::kOther;
  uint64_t addr = 0;
  int64_t size = 0;
  StreamId stream = 0;
  uint32_t where = 0;  ///< its place in the user's code: index into MemorySnapshot::frames (0: unknown)
};

enum class BlockState : uint8_t { kActiveAllocated, kActivePendingFree, kInactive };

struct SnapshotBlock {
  uint64_t address = 0;
  int64_t size = 0;
  int64_t requested_size = 0;
  BlockState state = BlockState::kInactive;
};

struct SnapshotSegment {
  uint64_t address = 0;
  int64_t total_size = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
  bool expandable = false;
  std::vector<SnapshotBlock> blocks;  ///< address order
};

struct MemorySnapshot {
  enum class Format : uint8_t { kPickle, kAllocData };
  Format format = Format::kPickle;
  bool has_segments = false;              ///< false for alloc_data
  std::vector<SnapshotSegment> segments;  ///< final state, one device, sorted by address
  std::vector<TraceEvent> trace;          ///< oldest first
  /// Distinct places in the user's code that trace events name (TraceEvent::where): the first
  /// frame outside torch and site-packages, "model.py:54 forward". Entry 0 is "" (unknown).
  std::vector<std::string> frames{std::string()};
  /// alloc_data only: allocations alive when recording began (addr, requested bytes).
  std::vector<std::pair<uint64_t, int64_t>> initially_allocated;
  AllocatorConfig recorded_config;  ///< from allocator_settings (defaults if absent)
  std::string recorded_conf;        ///< PYTORCH_CUDA_ALLOC_CONF as recorded
  int device = 0;
};

std::string_view FormatName(MemorySnapshot::Format f);

/// Detects the format from the bytes (pickle opcode 0x80, '{' JSON, or HTML holding
/// `alloc_data = {...}`) and parses it. Errors name what is wrong (key path or byte offset).
Result<MemorySnapshot> ParseSnapshot(std::string_view bytes);
/// Reads and parses a file; errors are prefixed with the path.
Result<MemorySnapshot> LoadSnapshotFile(const std::string& path);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPLAY_SNAPSHOT_H_
