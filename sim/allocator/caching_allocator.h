// A faithful, deterministic model of PyTorch's native CUDA caching allocator (one device):
// rounding, small/large pools, best fit by (stream, size, address), split and oversize rules,
// merging, per-stream pools, the OOM ladder against a capacity, empty_cache and expandable
// segments. Addresses are simulated 64-bit offsets; nothing touches a device. Not thread-safe:
// one instance per simulation (cheap to create). Rules: docs/allocator.md, Notes [...].
//
// Usage:
//   CachingAllocator a(config, {.capacity_bytes = 16 << 30});
//   BlockId x = a.Malloc(1000);      // kNoBlock = simulated OOM (see last_oom())
//   a.Free(x);  a.EmptyCache();  a.stats().reserved_bytes.all().peak;
#ifndef MEMSIM_SIM_ALLOCATOR_CACHING_ALLOCATOR_H_
#define MEMSIM_SIM_ALLOCATOR_CACHING_ALLOCATOR_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/check.h"
#include "lib/util/status.h"
#include "sim/allocator/alloc_config.h"
#include "sim/allocator/allocator_stats.h"
#include "sim/allocator/free_set.h"

namespace memsim {

using BlockId = uint32_t;
inline constexpr BlockId kNoBlock = UINT32_MAX;
using StreamId = int64_t;  ///< cudaStream_t value; 0 = default stream

/// How fresh (non-expandable) segments get addresses. Real cudaMalloc mostly returns decreasing
/// 2 MiB-aligned addresses (replay_notes.md); the spec's worked examples assume increasing.
/// Addresses only matter for best-fit ties. See Note [Simulated addresses].
enum class AddressOrder : uint8_t { kDecreasing, kIncreasing };

struct DeviceOptions {
  int64_t capacity_bytes = 0;  ///< memory the allocator may reserve; 0 = unlimited
  AddressOrder address_order = AddressOrder::kDecreasing;
  /// totalGlobalMem used to size expandable segments' virtual range (1.125x); 0 = capacity, or
  /// 80 GiB when the capacity is unlimited.
  int64_t total_memory_bytes = 0;
};

/// A simulated CUDA out-of-memory error, in PyTorch's terms (R7.6).
struct OomInfo {
  int64_t requested_bytes = 0;          ///< caller's bytes
  int64_t rounded_bytes = 0;            ///< round_size(requested)
  int64_t tried_to_allocate_bytes = 0;  ///< segment size, as in "Tried to allocate X"
  int64_t capacity_bytes = 0;
  int64_t free_bytes = 0;       ///< capacity - reserved
  int64_t allocated_bytes = 0;  ///< "allocated by PyTorch"
  int64_t reserved_bytes = 0;
  int64_t reserved_unallocated_bytes = 0;  ///< "reserved by PyTorch but unallocated"
  StreamId stream = 0;
  std::string message;  ///< PyTorch-style one-paragraph message
};

/// One block as shown in a snapshot (BlockInfo).
struct BlockView {
  uint64_t address = 0;
  int64_t size = 0;
  int64_t requested_size = 0;  ///< stale for free blocks, as in PyTorch
  bool allocated = false;
};

/// One segment as shown in a snapshot (SegmentInfo); expandable segments give one entry per
/// contiguous mapped run (R11.9).
struct SegmentView {
  uint64_t address = 0;
  int64_t total_size = 0;
  int64_t allocated_size = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
  bool expandable = false;
  std::vector<BlockView> blocks;
};

/// A segment to install directly (replay of a warm allocator). Blocks are in address order and
/// cover the segment exactly; no two free blocks may be adjacent.
struct ImportedSegment {
  uint64_t address = 0;
  int64_t size = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
  std::vector<BlockView> blocks;
};

class CachingAllocator {
 public:
  explicit CachingAllocator(const AllocatorConfig& config, const DeviceOptions& device = {});

  /// Block ids are below this (the ids above are free for callers' sentinels).
  static constexpr BlockId kMaxBlocks = kNoBlock - 16;

  /// torch's malloc(bytes, stream); |bytes| > 0. Returns kNoBlock on a simulated OOM (the
  /// allocator state then reflects what the ladder already released; see last_oom()).
  BlockId Malloc(int64_t bytes, StreamId stream = 0);
  /// Frees an allocated block (single-stream semantics: returned to the pool at once).
  void Free(BlockId block);
  /// torch.cuda.empty_cache(): releases every unsplit free segment and unmaps whole free pages.
  void EmptyCache();
  /// reset_peak_memory_stats(): every peak := current.
  void ResetPeakStats();

  const DeviceStats& stats() const { return stats_; }
  const AllocatorConfig& config() const { return cfg_; }
  const std::optional<OomInfo>& last_oom() const { return last_oom_; }

  uint64_t BlockAddress(BlockId b) const { return blocks_[b].addr; }
  int64_t BlockSize(BlockId b) const { return blocks_[b].size; }
  /// Bytes of the segment (or mapped pages) the last Malloc obtained from the device; 0 if it
  /// was served from the cache.
  int64_t last_malloc_device_bytes() const { return last_device_bytes_; }
  /// If the next Malloc creates a non-expandable segment of exactly |size| bytes, it gets
  /// |address| (replay uses the recorded cudaMalloc addresses). Cleared by that Malloc.
  void SetNextSegmentHint(uint64_t address, int64_t size) { hint_ = SegmentHint{address, size}; }

  /// Internal fragmentation of allocated blocks: sum(round_size(req) - req) and
  /// sum(block size - round_size(req)) (unsplit remainders handed out whole).
  int64_t rounding_waste_bytes() const { return rounding_waste_; }
  int64_t unsplit_waste_bytes() const { return unsplit_waste_; }
  /// Largest cached free (mapped) block, bytes.
  int64_t LargestFreeBlock() const;

  /// Installs a segment with its blocks; returns the ids of its allocated blocks in order.
  Result<std::vector<BlockId>> ImportSegment(const ImportedSegment& segment);

  /// The current segments, sorted by address.
  std::vector<SegmentView> Snapshot() const;
  /// Verifies internal invariants (for tests); returns a description of the first violation.
  Status CheckInvariants() const;

 private:
  static constexpr BlockId kNil = kNoBlock;
  struct Block {
    uint64_t addr = 0;
    int64_t size = 0;
    int64_t requested = 0;
    int64_t rounded = 0;
    uint64_t gc_base = 0;  // pool's get_free_block count when cached (GC age)
    StreamId stream = 0;
    BlockId prev = kNil;
    BlockId next = kNil;
    uint32_t segment = 0;
    PoolKind pool = PoolKind::kLarge;
    bool allocated = false;
    bool mapped = true;
    bool expandable = false;
  };
  struct Segment {
    uint64_t addr = 0;
    int64_t size = 0;  // cudaMalloc size, or the virtual range for expandable segments
    int64_t page = 0;  // expandable page size
    StreamId stream = 0;
    PoolKind pool = PoolKind::kLarge;
    bool expandable = false;
    bool live = true;
  };
  struct Pool {
    FreeSet blocks;    // free mapped blocks by (stream, size, address)
    FreeSet unmapped;  // unmapped expandable blocks by (stream, address)
    uint64_t get_free_calls = 0;
  };

  Pool& PoolOf(PoolKind k) { return pools_[static_cast<int>(k)]; }
  FreeSet::Key FreeKey(BlockId b) const { return FreeSet::KeyOf(blocks_[b].size, blocks_[b].addr); }
  FreeSet::Key UnmappedKey(BlockId b) const { return FreeSet::KeyOf(0, blocks_[b].addr); }
  void EraseFree(BlockId b) { PoolOf(blocks_[b].pool).blocks.Erase(blocks_[b].stream, FreeKey(b)); }
  void EraseUnmapped(BlockId b) { PoolOf(blocks_[b].pool).unmapped.Erase(blocks_[b].stream, UnmappedKey(b)); }
  bool IsSplit(BlockId b) const { return blocks_[b].prev != kNil || blocks_[b].next != kNil; }
  BlockId NewBlock() { return NewBlock(Block{}); }
  BlockId NewBlock(const Block& init);  // a block initialized as a copy of |init|
  void DeleteBlock(BlockId b);
  void InsertFree(BlockId b);

  bool GcEnabled() const { return gc_enabled_; }
  int64_t AllowedMaximum() const;
  // A cached block for a request and its position in its stream's lane of the free set.
  struct Found {
    BlockId block = kNil;
    size_t position = 0;
  };
  static constexpr size_t kNotCached = SIZE_MAX;
  Found GetFreeBlock(PoolKind pk, StreamId stream, int64_t size);
  BlockId AllocBlock(PoolKind pk, StreamId stream, int64_t size, int64_t alloc_size, bool retry);
  // |free_position|: b's position in its lane of the free set, or kNotCached (a new block).
  BlockId AllocFoundBlock(BlockId b, int64_t rounded, int64_t requested, size_t free_position);
  bool ShouldSplit(const Block& b, int64_t size) const;
  void FreeBlock(BlockId b);
  int64_t TryMerge(BlockId dst, BlockId src, std::optional<FreeSet::Key>* kept = nullptr);
  void GarbageCollect();
  bool ReleaseAvailableCachedBlocks(PoolKind pk, StreamId stream, int64_t size);
  void ReleaseCachedBlocks();
  void ReleasePool(PoolKind pk);
  void ReleaseBlock(BlockId b);
  uint64_t FreshSegmentAddress(int64_t size);
  void RecordOom(int64_t requested, int64_t rounded, int64_t alloc_size, StreamId stream);

  // Expandable segments (caching_allocator_expandable.cc).
  BlockId TryAllocateExpandable(PoolKind pk, StreamId stream, int64_t size);
  BlockId FindExpandableBlock(PoolKind pk, StreamId stream, int64_t size);
  bool MapBlock(BlockId b, int64_t size);
  void UnmapBlock(BlockId b);
  void ReleaseExpandableSegment(BlockId b);
  bool Allocatable(BlockId b) const { return b != kNil && !blocks_[b].allocated; }

  AllocatorConfig cfg_;
  DeviceOptions dev_;
  DeviceStats stats_;
  std::vector<Block> blocks_;
  std::vector<BlockId> free_ids_;
  std::vector<Segment> segments_;
  std::vector<Pool> pools_;  // [small, large]
  std::optional<OomInfo> last_oom_;
  struct SegmentHint {
    uint64_t address;
    int64_t size;
  };
  std::optional<SegmentHint> hint_;
  uint64_t low_cursor_;   // next address for kDecreasing (segments end here)
  uint64_t high_cursor_;  // next address for kIncreasing
  uint64_t va_cursor_;    // expandable virtual ranges
  bool gc_enabled_ = false;  // garbage collection configured (fixed at construction)
  int64_t last_device_bytes_ = 0;
  int64_t rounding_waste_ = 0;
  int64_t unsplit_waste_ = 0;
};

/// Formats bytes the way PyTorch's format_size does ("20.00 MiB").
std::string FormatBytes(int64_t bytes);

}  // namespace memsim

#endif  // MEMSIM_SIM_ALLOCATOR_CACHING_ALLOCATOR_H_
