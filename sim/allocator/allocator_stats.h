// Allocator statistics with PyTorch's names and meaning (torch.cuda.memory_stats()): every stat
// is kept for {all, small_pool, large_pool} as {current, peak} (what memsim reports; PyTorch's
// cumulative allocated/freed counters are not kept). Values only change through
// Increase/Decrease. Plain data; see docs/allocator.md, Note [Allocator stats].
#ifndef MEMSIM_SIM_ALLOCATOR_ALLOCATOR_STATS_H_
#define MEMSIM_SIM_ALLOCATOR_ALLOCATOR_STATS_H_

#include <algorithm>
#include <array>
#include <cstdint>

#include "lib/util/check.h"

namespace memsim {

/// Which pool a block or segment belongs to (R2.3).
enum class PoolKind : uint8_t { kSmall = 0, kLarge = 1 };

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;

  void Increase(int64_t amount) {
    current += amount;
    // GCC compiles this to a branch in some callers (AllocFoundBlock); a branch-free max was
    // measured no faster (docs/benchmarks.md, BM_CompiledConfiguration).
    peak = std::max(peak, current);
  }
  void Decrease(int64_t amount) {
    current -= amount;
    MEMSIM_CHECK(current >= 0);
  }
};

/// A stat for the whole device and for each pool; index 0 = all, 1 = small_pool, 2 = large_pool.
struct StatArray {
  std::array<Stat, 3> s;
  const Stat& all() const { return s[0]; }
  const Stat& small_pool() const { return s[1]; }
  const Stat& large_pool() const { return s[2]; }
  const Stat& pool(PoolKind p) const { return s[1 + static_cast<int>(p)]; }
  void Increase(PoolKind p, int64_t amount) {
    s[0].Increase(amount);
    s[1 + static_cast<int>(p)].Increase(amount);
  }
  void Decrease(PoolKind p, int64_t amount) {
    s[0].Decrease(amount);
    s[1 + static_cast<int>(p)].Decrease(amount);
  }
};

/// PyTorch's DeviceStats. COUNT: number of things; SUM: bytes.
struct DeviceStats {
  StatArray allocation;            ///< COUNT: allocated blocks
  StatArray segment;               ///< COUNT: cudaMalloc'ed segments (not expandable maps)
  StatArray inactive_split;        ///< COUNT: free blocks inside split segments
  StatArray allocated_bytes;       ///< SUM: block sizes of allocated blocks
  StatArray reserved_bytes;        ///< SUM: segment sizes / mapped pages
  StatArray inactive_split_bytes;  ///< SUM: free bytes inside split segments
  StatArray requested_bytes;       ///< SUM: caller-requested bytes of active blocks
  int64_t num_alloc_retries = 0;   ///< COUNT: cache flushes + retries (R7.5)
  int64_t num_ooms = 0;            ///< COUNT: out-of-memory errors raised
  int64_t num_sync_all_streams = 0;
  int64_t num_device_alloc = 0;  ///< COUNT: cudaMalloc / page-map calls
  int64_t num_device_free = 0;   ///< COUNT: cudaFree / page-unmap calls
  Stat oversize_allocations;     ///< COUNT: allocated blocks >= max_split_size
  Stat oversize_segments;        ///< COUNT: segments >= max_split_size

  /// COUNT / SUM of active (allocated or pending-free) blocks. The model frees with single-stream
  /// semantics (no block waits on another stream's events), so a block is active exactly while it
  /// is allocated: PyTorch's active stats are the allocation stats, counters and peaks alike.
  const StatArray& active() const { return allocation; }
  const StatArray& active_bytes() const { return allocated_bytes; }
};

}  // namespace memsim

#endif  // MEMSIM_SIM_ALLOCATOR_ALLOCATOR_STATS_H_
