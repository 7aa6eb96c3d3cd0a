// What the reserved memory that is not allocated is made of at the peak of a replay: free
// blocks inside split segments (inactive split), the largest free block, and the segments with
// the most free space together with the allocations that split them (where in the user's code
// each was made). Plain data plus one pure function over the allocator model's state;
// docs/allocator.md, Note [Replay fragmentation].
#ifndef MEMSIM_SIM_REPLAY_FRAGMENTATION_H_
#define MEMSIM_SIM_REPLAY_FRAGMENTATION_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sim/allocator/caching_allocator.h"

namespace memsim {

/// A block of a segment with free space: an allocation that splits it, or a free block.
struct SplitAllocation {
  bool allocated = true;
  uint64_t address = 0;  ///< simulated (the recorded one wherever the replay places as recorded)
  int64_t size = 0;      ///< block bytes
  int64_t requested_bytes = 0;
  int64_t event = -1;    ///< trace index of its alloc; -1: alive when recording began (or free)
  std::string where;     ///< the alloc's first user frame ("model.py:54 forward"); "" unknown
};

/// A segment with free space at the peak.
struct FragmentedSegment {
  uint64_t address = 0;
  int64_t total_bytes = 0;
  int64_t allocated_bytes = 0;
  int64_t free_bytes = 0;
  int64_t largest_free_bytes = 0;
  int64_t free_blocks = 0;
  PoolKind pool = PoolKind::kLarge;
  bool expandable = false;
  std::vector<SplitAllocation> blocks;  ///< its blocks, allocated and free, address order, at most kListed
  int64_t more_blocks = 0;             ///< blocks beyond those listed
};

/// The allocator's state at the peak (Note [Replay fragmentation]).
struct PeakFragmentation {
  static constexpr size_t kSegments = 5;  ///< segments listed
  static constexpr size_t kListed = 10;   ///< blocks listed per segment
  int64_t event = -1;  ///< trace index of the allocation it follows (-1: the start of recording)
  std::string where;   ///< that allocation's first user frame ("" unknown)
  int64_t reserved_bytes = 0;
  int64_t allocated_bytes = 0;  ///< block bytes
  int64_t requested_bytes = 0;
  int64_t free_bytes = 0;              ///< reserved - allocated
  int64_t inactive_split_bytes = 0;    ///< free bytes inside split segments
  int64_t inactive_split_blocks = 0;
  int64_t unsplit_free_bytes = 0;      ///< whole free segments (empty_cache() would release them)
  int64_t largest_free_block_bytes = 0;
  int64_t segments = 0;
  std::vector<FragmentedSegment> top_segments;  ///< most free bytes first
};

/// Where an allocated block came from: (trace index of its alloc or -1, its user frame).
using BlockOrigin = std::function<std::pair<int64_t, std::string>(uint64_t address)>;

/// Describes |a|'s current state, sampled after trace event |event| (made at |where|).
PeakFragmentation DescribeFragmentation(const CachingAllocator& a, int64_t event, const std::string& where,
                                        const BlockOrigin& origin);

nlohmann::ordered_json ToJson(const PeakFragmentation& f);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPLAY_FRAGMENTATION_H_
