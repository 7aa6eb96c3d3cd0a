// The rules of DistributedDataParallel that unit tests check on their own (Note [DDP] in
// docs/op-rules.md): how tensors are grouped into buckets, as
// torch.distributed._compute_bucket_assignment_by_size and _broadcast_coalesced do.
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_DDP_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_DDP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsim {

/// One tensor to bucket: its bytes and a key (dtype and device) that must match within a bucket.
struct BucketItem {
  int64_t bytes = 0;
  int key = 0;
};

/// 1 MiB: the size limit of the first bucket of a rebuilt assignment (dist._DEFAULT_FIRST_BUCKET_BYTES).
inline constexpr int64_t kDefaultFirstBucketBytes = int64_t{1} << 20;
/// 250 MiB: DDP's broadcast_bucket_size (_sync_module_states, buffer broadcasts).
inline constexpr int64_t kBroadcastBucketBytes = int64_t{250} << 20;

/// compute_bucket_assignment_by_size: the items in order, one open bucket per key; an item is
/// added to its key's bucket, which is closed as soon as its size reaches the current limit
/// (limits[0] for a key's first bucket, then the next limit, the last one repeating). Open
/// buckets are closed at the end in key order. |sort_by_min_index|: the buckets are ordered by
/// the smallest item index they hold (DDP's construction, broadcast_coalesced); otherwise they
/// stay in closing order (a rebuild, whose items come in gradient-ready order).
/// Returns each bucket's item indices (positions in |items|).
std::vector<std::vector<size_t>> ComputeBucketAssignmentBySize(const std::vector<BucketItem>& items,
                                                               const std::vector<int64_t>& limits,
                                                               bool sort_by_min_index);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_DDP_H_
