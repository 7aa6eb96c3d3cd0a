// The caching allocator's policy constants and its configuration, parsed exactly like
// PYTORCH_CUDA_ALLOC_CONF ("expandable_segments:True,max_split_size_mb:128,..."), plus the size
// rounding function (round_size) that every allocator model shares. Pure values; thread-safe.
// See docs/allocator.md, Note [Caching allocator rounding] and Note [Alloc conf syntax].
#ifndef MEMSIM_SIM_ALLOCATOR_ALLOC_CONFIG_H_
#define MEMSIM_SIM_ALLOCATOR_ALLOC_CONFIG_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

#include "lib/util/status.h"
#include "lib/util/checked.h"

namespace memsim {

inline constexpr int64_t kMiB = 1048576;                   // bytes
inline constexpr int64_t kMinBlockSize = 512;              // bytes; every block is a multiple
inline constexpr int64_t kSmallSize = 1048576;             // bytes; rounded sizes <= go small
inline constexpr int64_t kSmallBuffer = 2097152;           // bytes; small-pool segment / page
inline constexpr int64_t kLargeBuffer = 20971520;          // bytes; 1..10 MiB segment / page
inline constexpr int64_t kMinLargeAlloc = 10485760;        // bytes; >= gets its own segment
inline constexpr int64_t kRoundLarge = 2097152;            // bytes; big-segment rounding unit
inline constexpr int64_t kUnlimitedSplitSize = INT64_MAX;  // max_split_size default
inline constexpr int kRoundupIntervals = 16;               // 1 MiB ... 64 GiB
/// The largest single request (or segment) memsim models (kMaxTensorBytes, 1 PiB); a run whose
/// requests sum past kMaxTotalBytes is refused before it starts (ByteBudget in simulate.h).
inline constexpr int64_t kMaxRequestBytes = kMaxTensorBytes;

/// The native allocator's options (PyTorch's AcceleratorAllocatorConfig + CUDAAllocatorConfig).
struct AllocatorConfig {
  int64_t max_split_size = kUnlimitedSplitSize;        ///< bytes; max_split_size_mb
  int64_t max_non_split_rounding_size = kLargeBuffer;  ///< bytes; max_non_split_rounding_mb
  int64_t large_segment_size = kLargeBuffer;           ///< bytes; large_segment_size_mb
  /// Divisions per interval; entry k covers [2^(20+k), 2^(21+k)) bytes, entry 0 everything
  /// below 2 MiB, entry 15 everything above. 0 or 1 = plain 512-byte rounding.
  std::array<int64_t, kRoundupIntervals> roundup_power2_divisions{};
  double garbage_collection_threshold = 0.0;  ///< (0, 1); 0 = off
  /// Fraction of the device capacity the process may reserve (torch.cuda.
  /// set_per_process_memory_fraction). 1.0 = not set. GC only runs when this is < 1.
  double per_process_memory_fraction = 1.0;
  bool expandable_segments = false;
  bool release_lock_on_cudamalloc = false;     ///< accepted, no effect in a simulator
  bool pinned_use_cuda_host_register = false;  ///< accepted, no effect
  int64_t pinned_num_register_threads = 1;     ///< accepted, no effect

  /// Division count that applies to a request of |size| bytes.
  int64_t DivisionsFor(int64_t size) const {
    // See Note [Caching allocator rounding]: intervals start at 1 MiB (log2 = 20). Inline: the
    // allocator rounds every request.
    const int log_size = size > 0 ? 63 - std::countl_zero(static_cast<uint64_t>(size)) : 0;
    return roundup_power2_divisions[std::min(log_size > 20 ? log_size - 20 : 0, kRoundupIntervals - 1)];
  }
  /// The canonical PYTORCH_CUDA_ALLOC_CONF string for this config ("" for the defaults).
  std::string ToString() const;
};

/// Parses a PYTORCH_CUDA_ALLOC_CONF string. Spaces are ignored, as in PyTorch. A bad key or
/// value is rejected with InvalidArgument naming the key and the offending text.
Result<AllocatorConfig> ParseAllocConf(std::string_view conf);

/// round_size's power-of-two rounding: |size| > 512 * |divisions|, |divisions| > 1.
int64_t RoundSizeByDivisions(int64_t size, int64_t divisions);

/// PyTorch's round_size: < 512 -> 512; power-of-two divisions when configured; else the next
/// multiple of 512. |size| must be in [0, kMaxRequestBytes]. See Note [Caching allocator rounding].
/// Inline: the allocator rounds every request, and most configs have no divisions.
inline int64_t RoundSize(int64_t size, const AllocatorConfig& config) {
  if (size < kMinBlockSize) return kMinBlockSize;
  const int64_t divisions = config.DivisionsFor(size);
  // size > 512 * divisions, written so that no division count can overflow it.
  if (divisions > 1 && (size - 1) / kMinBlockSize >= divisions) return RoundSizeByDivisions(size, divisions);
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

/// PyTorch's get_allocation_size: the cudaMalloc size for a rounded request (R4.2).
int64_t SegmentSizeFor(int64_t rounded, const AllocatorConfig& config);

}  // namespace memsim

#endif  // MEMSIM_SIM_ALLOCATOR_ALLOC_CONFIG_H_
