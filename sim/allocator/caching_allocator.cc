#include "sim/allocator/caching_allocator.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <new>

#include "lib/util/check.h"

namespace memsim {
namespace {

// Simulated address regions; real GPU addresses (replay) stay below 2^48, so synthetic segments
// can never collide with recorded ones. See Note [Simulated addresses].
constexpr uint64_t kDecreasingTop = uint64_t{1} << 62;
constexpr uint64_t kIncreasingBase = uint64_t{1} << 60;
constexpr uint64_t kExpandableBase = uint64_t{1} << 61;
constexpr int64_t kDefaultTotalMemory = int64_t{80} << 30;

}  // namespace

std::string FormatBytes(int64_t bytes) {
  // PyTorch's format_size: B below 1 KiB, then KiB / MiB / GiB with two decimals.
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  } else if (bytes < 1048576) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  } else if (bytes < 1073741824) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  }
  return buf;
}

CachingAllocator::CachingAllocator(const AllocatorConfig& config, const DeviceOptions& device)
    : cfg_(config),
      dev_(device),
      low_cursor_(kDecreasingTop),
      high_cursor_(kIncreasingBase),
      va_cursor_(kExpandableBase) {
  pools_.resize(2);
  blocks_.reserve(1024);
  gc_enabled_ = cfg_.garbage_collection_threshold > 0.0 && cfg_.per_process_memory_fraction < 1.0 &&
                dev_.capacity_bytes > 0;
}

BlockId CachingAllocator::NewBlock(const Block& init) {
  if (!free_ids_.empty()) {
    BlockId id = free_ids_.back();
    free_ids_.pop_back();
    blocks_[id] = init;
    return id;
  }
  MEMSIM_CHECK(blocks_.size() < kMaxBlocks);
  blocks_.push_back(init);  // safe when |init| is an element: it is copied before any reallocation
  return static_cast<BlockId>(blocks_.size() - 1);
}

void CachingAllocator::DeleteBlock(BlockId b) {
  blocks_[b].size = -1;  // tombstone, catches use-after-delete in CheckInvariants
  free_ids_.push_back(b);
}

void CachingAllocator::InsertFree(BlockId b) {
  Pool& pool = PoolOf(blocks_[b].pool);
  blocks_[b].gc_base = pool.get_free_calls;
  pool.blocks.Insert(blocks_[b].stream, FreeKey(b), b);
}


int64_t CachingAllocator::AllowedMaximum() const {
  if (dev_.capacity_bytes <= 0) return INT64_MAX;
  if (cfg_.per_process_memory_fraction < 1.0)
    return static_cast<int64_t>(cfg_.per_process_memory_fraction *
                                static_cast<double>(dev_.capacity_bytes));
  return dev_.capacity_bytes;
}

// ---------------------------------------------------------------------------------------------
// malloc. See Note [Malloc fallback ladder].

BlockId CachingAllocator::Malloc(int64_t bytes, StreamId stream) {
  MEMSIM_CHECK(bytes > 0);
  last_device_bytes_ = 0;
  const int64_t size = RoundSize(bytes, cfg_);
  const PoolKind pk = size <= kSmallSize ? PoolKind::kSmall : PoolKind::kLarge;

  const Found found = GetFreeBlock(pk, stream, size);
  BlockId b = found.block;
  const size_t position = b != kNil ? found.position : kNotCached;
  if (b == kNil) {
    const int64_t alloc_size = SegmentSizeFor(size, cfg_);
    if (GcEnabled()) GarbageCollect();
    // The ladder as one short-circuit chain: new segment, release oversize cached blocks and
    // retry, release the whole cache and retry (counted), else OOM.
    (b = AllocBlock(pk, stream, size, alloc_size, false)) != kNil ||
        (ReleaseAvailableCachedBlocks(pk, stream, size) &&
         (b = AllocBlock(pk, stream, size, alloc_size, false)) != kNil) ||
        (ReleaseCachedBlocks(), (b = AllocBlock(pk, stream, size, alloc_size, true)) != kNil);
    if (b == kNil) {
      hint_.reset();
      RecordOom(bytes, size, alloc_size, stream);
      return kNoBlock;
    }
  }
  hint_.reset();
  return AllocFoundBlock(b, size, bytes, position);
}

CachingAllocator::Found CachingAllocator::GetFreeBlock(PoolKind pk, StreamId stream, int64_t size) {
  // See Note [Best fit]. The block found stays in the free set (AllocFoundBlock takes it out).
  Pool& pool = PoolOf(pk);
  if (GcEnabled()) ++pool.get_free_calls;
  const FreeSet::Lane* lane = pool.blocks.Find(stream);
  if (lane == nullptr) return {};
  const size_t n = lane->size();
  size_t i = lane->LowerBoundSize(size);
  if (i == n) return {};
  // Expandable blocks exist only with expandable_segments, and then every block is one: without
  // it the search touches no block, only the lane.
  if (cfg_.expandable_segments) {
    // R11.3: a block that can grow into the unmapped tail counts as that big.
    auto xsize = [&](BlockId id) {
      const Block& blk = blocks_[id];
      return blk.size + (blk.next != kNil && !blocks_[blk.next].mapped ? blocks_[blk.next].size : 0);
    };
    while (blocks_[lane->id(i)].expandable && i + 1 < n && xsize(lane->id(i + 1)) < xsize(lane->id(i))) ++i;
  }
  const BlockId b = lane->id(i);
  const int64_t candidate = lane->block_size(i);
  // R5.2 / R5.3, see Note [Oversize blocks].
  if (size < cfg_.max_split_size && candidate >= cfg_.max_split_size) return {};
  if (size >= cfg_.max_split_size && candidate >= size + cfg_.max_non_split_rounding_size)
    return {};
  return {b, i};
}

uint64_t CachingAllocator::FreshSegmentAddress(int64_t size) {
  if (hint_ && hint_->size == size) {
    const uint64_t a = hint_->address;
    hint_.reset();
    return a;
  }
  const uint64_t align = static_cast<uint64_t>(kRoundLarge);
  const uint64_t usize = static_cast<uint64_t>(size);
  if (dev_.address_order == AddressOrder::kDecreasing) {
    low_cursor_ = (low_cursor_ - usize) & ~(align - 1);
    return low_cursor_;
  }
  uint64_t a = high_cursor_;
  high_cursor_ = (high_cursor_ + usize + align - 1) & ~(align - 1);
  return a;
}

BlockId CachingAllocator::AllocBlock(PoolKind pk, StreamId stream, int64_t size, int64_t alloc_size,
                                     bool retry) {
  if (retry) ++stats_.num_alloc_retries;
  const int64_t reserved = stats_.reserved_bytes.all().current;
  if (cfg_.per_process_memory_fraction < 1.0 && dev_.capacity_bytes > 0 &&
      reserved + alloc_size > AllowedMaximum()) {
    return kNil;  // R7.2: fraction limit, no device call
  }
  if (cfg_.expandable_segments) return TryAllocateExpandable(pk, stream, size);
  if (dev_.capacity_bytes > 0 && reserved + alloc_size > dev_.capacity_bytes) return kNil;

  const BlockId b = NewBlock();
  Segment seg;
  seg.addr = FreshSegmentAddress(alloc_size);
  seg.size = alloc_size;
  seg.stream = stream;
  seg.pool = pk;
  segments_.push_back(seg);
  Block& blk = blocks_[b];
  blk.addr = seg.addr;
  blk.size = alloc_size;
  blk.stream = stream;
  blk.pool = pk;
  blk.segment = static_cast<uint32_t>(segments_.size() - 1);
  stats_.segment.Increase(pk, 1);
  stats_.reserved_bytes.Increase(pk, alloc_size);
  ++stats_.num_device_alloc;
  if (alloc_size >= cfg_.max_split_size) stats_.oversize_segments.Increase(1);
  last_device_bytes_ += alloc_size;
  return b;
}

bool CachingAllocator::ShouldSplit(const Block& b, int64_t size) const {
  // See Note [Split rules].
  const int64_t remaining = b.size - size;
  if (b.pool == PoolKind::kSmall || cfg_.expandable_segments) return remaining >= kMinBlockSize;
  return size < cfg_.max_split_size && remaining > kSmallSize;
}

BlockId CachingAllocator::AllocFoundBlock(BlockId b, int64_t rounded, int64_t requested, size_t free_position) {
  const bool in_free_set = free_position != kNotCached;
  const PoolKind pk = blocks_[b].pool;
  const bool already_split = IsSplit(b);
  const bool expandable = blocks_[b].expandable;
  if (ShouldSplit(blocks_[b], rounded)) {
    const BlockId remaining = b;
    const BlockId front = NewBlock(blocks_[remaining]);  // same stream, pool, segment, expandable, mapped
    Block& rem = blocks_[remaining];
    Block& blk = blocks_[front];
    blk.size = rounded;
    blk.prev = rem.prev;
    if (blk.prev != kNil) blocks_[blk.prev].next = front;
    blk.next = remaining;
    rem.prev = front;
    rem.addr += static_cast<uint64_t>(rounded);
    rem.size -= rounded;
    if (in_free_set) {
      // The remainder keeps the block's id: move its entry instead of erasing and inserting.
      Pool& pool = PoolOf(pk);
      rem.gc_base = pool.get_free_calls;
      pool.blocks.Find(rem.stream)->ReplaceAt(free_position, FreeKey(remaining), remaining);
    } else {
      InsertFree(remaining);
    }
    if (!expandable) {
      if (already_split) {
        stats_.inactive_split_bytes.Decrease(pk, rounded);
      } else {
        stats_.inactive_split.Increase(pk, 1);
        stats_.inactive_split_bytes.Increase(pk, blocks_[remaining].size);
      }
    }
    b = front;
  } else {
    if (in_free_set) PoolOf(pk).blocks.Find(blocks_[b].stream)->EraseAt(free_position);
    if (already_split && !expandable) {
      stats_.inactive_split.Decrease(pk, 1);
      stats_.inactive_split_bytes.Decrease(pk, blocks_[b].size);
    }
  }
  Block& blk = blocks_[b];
  blk.allocated = true;
  blk.requested = requested;
  blk.rounded = rounded;
  stats_.allocation.Increase(pk, 1);
  stats_.allocated_bytes.Increase(pk, blk.size);
  stats_.requested_bytes.Increase(pk, requested);
  if (blk.size >= cfg_.max_split_size) stats_.oversize_allocations.Increase(1);
  rounding_waste_ += rounded - requested;
  unsplit_waste_ += blk.size - rounded;
  return b;
}

// ---------------------------------------------------------------------------------------------
// free. See Note [Free and merge].

void CachingAllocator::Free(BlockId b) {
  MEMSIM_CHECK(b < blocks_.size() && blocks_[b].allocated);
  Block& blk = blocks_[b];
  blk.allocated = false;
  stats_.allocation.Decrease(blk.pool, 1);
  stats_.allocated_bytes.Decrease(blk.pool, blk.size);
  rounding_waste_ -= blk.rounded - blk.requested;
  unsplit_waste_ -= blk.size - blk.rounded;
  FreeBlock(b);
}

void CachingAllocator::FreeBlock(BlockId b) {
  const int64_t original_size = blocks_[b].size;
  const int64_t requested = blocks_[b].requested;
  const PoolKind pk = blocks_[b].pool;
  int64_t net_count = 0;
  int64_t net_bytes = 0;
  const BlockId candidates[2] = {blocks_[b].prev, blocks_[b].next};
  std::optional<FreeSet::Key> kept;  // a merged neighbour's entry, reused for b
  for (BlockId c : candidates) {
    const int64_t subsumed = TryMerge(b, c, &kept);
    if (subsumed > 0) {
      net_count -= 1;
      net_bytes -= subsumed;
    }
  }
  if (kept) {
    Pool& pool = PoolOf(pk);
    blocks_[b].gc_base = pool.get_free_calls;
    pool.blocks.Replace(blocks_[b].stream, *kept, FreeKey(b), b);
  } else {
    InsertFree(b);
  }
  if (IsSplit(b)) {
    net_count += 1;
    net_bytes += blocks_[b].size;
  }
  if (!blocks_[b].expandable) {
    if (net_count > 0) stats_.inactive_split.Increase(pk, net_count);
    if (net_count < 0) stats_.inactive_split.Decrease(pk, -net_count);
    if (net_bytes > 0) stats_.inactive_split_bytes.Increase(pk, net_bytes);
    if (net_bytes < 0) stats_.inactive_split_bytes.Decrease(pk, -net_bytes);
  }
  stats_.requested_bytes.Decrease(pk, requested);
  if (original_size >= cfg_.max_split_size) stats_.oversize_allocations.Decrease(1);
}

int64_t CachingAllocator::TryMerge(BlockId dst, BlockId src, std::optional<FreeSet::Key>* kept) {
  if (src == kNil) return 0;
  Block& s = blocks_[src];
  Block& d = blocks_[dst];
  if (s.allocated || s.mapped != d.mapped) return 0;
  if (d.prev == src) {  // [src dst]
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNil) blocks_[d.prev].next = dst;
  } else {  // [dst src]
    d.next = s.next;
    if (d.next != kNil) blocks_[d.next].prev = dst;
  }
  const int64_t subsumed = s.size;
  const FreeSet::Key src_key = s.mapped ? FreeKey(src) : UnmappedKey(src);
  Pool& pool = PoolOf(s.pool);
  if (s.mapped && kept != nullptr && !*kept) {
    *kept = src_key;  // the caller moves this entry to dst's merged key
  } else {
    (s.mapped ? pool.blocks : pool.unmapped).Erase(s.stream, src_key);
  }
  d.size += subsumed;
  DeleteBlock(src);
  return subsumed;
}

// ---------------------------------------------------------------------------------------------
// Releasing memory: GC, oversize release, empty_cache. See Note [Malloc fallback ladder].

void CachingAllocator::GarbageCollect() {
  // R7.1: reclaim old, unsplit, non-expandable cached blocks of the large pool.
  Pool& pool = PoolOf(PoolKind::kLarge);
  const int64_t threshold = static_cast<int64_t>(cfg_.garbage_collection_threshold *
                                                 static_cast<double>(AllowedMaximum()));
  const int64_t reserved = stats_.reserved_bytes.all().current;
  if (reserved <= threshold) return;
  const int64_t target = reserved - threshold;
  auto age = [&](BlockId b) {
    return static_cast<double>(pool.get_free_calls - blocks_[b].gc_base);
  };
  double total_age = 0.0;
  int64_t freeable = 0;
  pool.blocks.ForEach([&](BlockId b) {
    if (!IsSplit(b) && !blocks_[b].expandable) {
      total_age += age(b);
      ++freeable;
    }
  });
  if (freeable == 0) return;
  int64_t reclaimed = 0;
  bool freed = true;
  std::vector<BlockId> old;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = total_age / static_cast<double>(freeable);
    // One pass in set order; releasing a whole segment changes no other block, so the blocks
    // to release can be chosen first.
    old.clear();
    pool.blocks.ForEach([&](BlockId b) {
      if (!IsSplit(b) && !blocks_[b].expandable && age(b) >= age_threshold) old.push_back(b);
    });
    freed = !old.empty();
    for (BlockId b : old) {
      reclaimed += blocks_[b].size;
      total_age -= age(b);
      --freeable;
      ReleaseBlock(b);
    }
  }
}

bool CachingAllocator::ReleaseAvailableCachedBlocks(PoolKind pk, StreamId stream, int64_t size) {
  // R7.4, only with a finite max_split_size.
  if (cfg_.max_split_size == kUnlimitedSplitSize) return false;
  Pool& pool = PoolOf(pk);
  const int64_t key_size = std::max(size, cfg_.max_split_size);
  const FreeSet::Lane* lane = pool.blocks.Find(stream);
  if (lane == nullptr) return false;
  size_t i = lane->LowerBoundSize(key_size);
  if (i == lane->size() || blocks_[lane->id(i)].expandable) {
    // No single block is big enough: free oversize blocks from the largest down. Releasing the
    // block at position j leaves the positions below j in place.
    int64_t released = 0;
    while (i > 0 && released < key_size) {
      const BlockId b = lane->id(--i);
      if (blocks_[b].size < cfg_.max_split_size) break;
      if (!blocks_[b].expandable && !IsSplit(b)) {
        released += blocks_[b].size;
        ReleaseBlock(b);
      }
    }
    return released >= key_size;
  }
  const BlockId b = lane->id(i);
  if (IsSplit(b)) return false;  // cannot happen with PyTorch's rules; be safe
  ReleaseBlock(b);
  return true;
}

void CachingAllocator::ReleaseBlock(BlockId b) {
  // cudaFree of a whole, free, non-expandable segment.
  Block& blk = blocks_[b];
  MEMSIM_CHECK(!blk.allocated && !IsSplit(b) && !blk.expandable);
  Pool& pool = PoolOf(blk.pool);
  pool.blocks.Erase(blk.stream, FreeKey(b));
  Segment& seg = segments_[blk.segment];
  seg.live = false;
  stats_.segment.Decrease(blk.pool, 1);
  stats_.reserved_bytes.Decrease(blk.pool, blk.size);
  ++stats_.num_device_free;
  if (blk.size >= cfg_.max_split_size) stats_.oversize_segments.Decrease(1);
  DeleteBlock(b);
}

void CachingAllocator::ReleasePool(PoolKind pk) {
  Pool& pool = PoolOf(pk);
  std::vector<BlockId> to_unmap;
  std::vector<BlockId> to_free;
  pool.blocks.ForEach([&](BlockId b) {
    if (blocks_[b].expandable) {
      to_unmap.push_back(b);
    } else if (!IsSplit(b)) {
      to_free.push_back(b);
    }
  });
  for (BlockId b : to_free) ReleaseBlock(b);
  for (BlockId b : to_unmap) {
    UnmapBlock(b);
    if (!blocks_[b].mapped && !IsSplit(b)) ReleaseExpandableSegment(b);
  }
}

void CachingAllocator::ReleaseCachedBlocks() {
  ReleasePool(PoolKind::kLarge);
  ReleasePool(PoolKind::kSmall);
}

void CachingAllocator::EmptyCache() { ReleaseCachedBlocks(); }

void CachingAllocator::ResetPeakStats() {
  for (StatArray* a : {&stats_.allocation, &stats_.segment, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& s : a->s) s.peak = s.current;
  }
  stats_.oversize_allocations.peak = stats_.oversize_allocations.current;
  stats_.oversize_segments.peak = stats_.oversize_segments.current;
}

void CachingAllocator::RecordOom(int64_t requested, int64_t rounded, int64_t alloc_size,
                                 StreamId stream) {
  ++stats_.num_ooms;
  OomInfo o;
  o.requested_bytes = requested;
  o.rounded_bytes = rounded;
  o.tried_to_allocate_bytes = alloc_size;
  o.capacity_bytes = dev_.capacity_bytes;
  o.reserved_bytes = stats_.reserved_bytes.all().current;
  o.allocated_bytes = stats_.allocated_bytes.all().current;
  o.reserved_unallocated_bytes = o.reserved_bytes - o.allocated_bytes;
  o.free_bytes = std::max<int64_t>(0, dev_.capacity_bytes - o.reserved_bytes);
  o.stream = stream;
  const int64_t limit = AllowedMaximum();
  o.message = "CUDA out of memory. Tried to allocate " + FormatBytes(alloc_size) +
              ". GPU 0 has a total capacity of " + FormatBytes(dev_.capacity_bytes) + " of which " +
              FormatBytes(o.free_bytes) + " is free. ";
  if (limit < dev_.capacity_bytes) {
    o.message += "Process has a memory limit of " + FormatBytes(limit) + ". ";
  }
  o.message += "Of the allocated memory " + FormatBytes(o.allocated_bytes) +
               " is allocated by PyTorch, and " + FormatBytes(o.reserved_unallocated_bytes) +
               " is reserved by PyTorch but unallocated.";
  if (!cfg_.expandable_segments && o.reserved_unallocated_bytes > 0) {
    o.message +=
        " If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
  }
  last_oom_ = std::move(o);
}

// ---------------------------------------------------------------------------------------------
// Introspection and import.

int64_t CachingAllocator::LargestFreeBlock() const {
  int64_t best = 0;
  for (const Pool& p : pools_) {
    // Each lane is ordered by (size, address): its last block is its largest.
    for (const FreeSet::Lane& l : p.blocks.lanes())
      if (l.size() > 0) best = std::max(best, FreeSet::SizeOf(l.key(l.size() - 1)));
  }
  return best;
}

Result<std::vector<BlockId>> CachingAllocator::ImportSegment(const ImportedSegment& in) {
  if (in.size <= 0 || in.blocks.empty()) return Status::InvalidArgument("empty segment");
  uint64_t at = in.address;
  for (size_t i = 0; i < in.blocks.size(); ++i) {
    const BlockView& v = in.blocks[i];
    if (v.address != at || v.size <= 0 || v.size % kMinBlockSize != 0)
      return Status::InvalidArgument("segment " + std::to_string(in.address) + ": block " +
                                     std::to_string(i) + " does not tile the segment");
    if (i > 0 && !v.allocated && !in.blocks[i - 1].allocated)
      return Status::InvalidArgument("segment " + std::to_string(in.address) +
                                     ": adjacent free blocks");
    at += static_cast<uint64_t>(v.size);
  }
  if (at != in.address + static_cast<uint64_t>(in.size))
    return Status::InvalidArgument("segment " + std::to_string(in.address) +
                                   ": blocks do not add up to the segment size");
  Segment seg;
  seg.addr = in.address;
  seg.size = in.size;
  seg.stream = in.stream;
  seg.pool = in.pool;
  segments_.push_back(seg);
  const uint32_t sid = static_cast<uint32_t>(segments_.size() - 1);
  const PoolKind pk = in.pool;
  stats_.segment.Increase(pk, 1);
  stats_.reserved_bytes.Increase(pk, in.size);
  ++stats_.num_device_alloc;
  if (in.size >= cfg_.max_split_size) stats_.oversize_segments.Increase(1);
  const bool split = in.blocks.size() > 1;
  std::vector<BlockId> ids;
  BlockId prev = kNil;
  for (const BlockView& v : in.blocks) {
    const BlockId b = NewBlock();
    Block& blk = blocks_[b];
    blk.addr = v.address;
    blk.size = v.size;
    blk.requested = v.requested_size;
    blk.rounded =
        v.allocated ? std::min(v.size, RoundSize(std::max<int64_t>(v.requested_size, 1), cfg_)) : 0;
    blk.stream = in.stream;
    blk.pool = pk;
    blk.segment = sid;
    blk.prev = prev;
    if (prev != kNil) blocks_[prev].next = b;
    prev = b;
    if (v.allocated) {
      blk.allocated = true;
      stats_.allocation.Increase(pk, 1);
      stats_.allocated_bytes.Increase(pk, v.size);
      stats_.requested_bytes.Increase(pk, v.requested_size);
      if (v.size >= cfg_.max_split_size) stats_.oversize_allocations.Increase(1);
      rounding_waste_ += blk.rounded - blk.requested;
      unsplit_waste_ += blk.size - blk.rounded;
      ids.push_back(b);
    } else {
      if (split) {
        stats_.inactive_split.Increase(pk, 1);
        stats_.inactive_split_bytes.Increase(pk, v.size);
      }
    }
  }
  // Insert free blocks once the links are final.
  for (BlockId b = prev; b != kNil; b = blocks_[b].prev) {
    if (!blocks_[b].allocated) InsertFree(b);
  }
  return ids;
}

std::vector<SegmentView> CachingAllocator::Snapshot() const {
  std::vector<SegmentView> out;
  std::vector<BlockId> heads;
  for (BlockId b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].size < 0) continue;
    if (blocks_[b].prev == kNil) heads.push_back(b);
  }
  for (BlockId h : heads) {
    const Segment& seg = segments_[blocks_[h].segment];
    if (!seg.live) continue;
    SegmentView cur;
    bool open = false;
    auto flush = [&] {
      if (open && !cur.blocks.empty()) out.push_back(cur);
      cur = SegmentView{};
      open = false;
    };
    for (BlockId b = h; b != kNil; b = blocks_[b].next) {
      const Block& blk = blocks_[b];
      if (!blk.mapped) {
        flush();
        continue;
      }
      if (!open) {
        cur.address = blk.addr;
        cur.stream = seg.stream;
        cur.pool = seg.pool;
        cur.expandable = seg.expandable;
        open = true;
      }
      cur.total_size += blk.size;
      if (blk.allocated) cur.allocated_size += blk.size;
      cur.blocks.push_back({blk.addr, blk.size, blk.requested, blk.allocated});
    }
    flush();
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentView& a, const SegmentView& b) { return a.address < b.address; });
  return out;
}

Status CachingAllocator::CheckInvariants() const {
  int64_t reserved = 0, allocated = 0, split_bytes = 0, free_count = 0;
  for (BlockId b = 0; b < blocks_.size(); ++b) {
    const Block& blk = blocks_[b];
    if (blk.size < 0) continue;
    if (!segments_[blk.segment].live) return Status::Internal("block in dead segment");
    if (blk.mapped) reserved += blk.size;
    if (blk.allocated) allocated += blk.size;
    if (blk.next != kNil) {
      const Block& n = blocks_[blk.next];
      if (n.prev != b || n.addr != blk.addr + static_cast<uint64_t>(blk.size))
        return Status::Internal("broken block list at " + std::to_string(blk.addr));
      if (!blk.allocated && !n.allocated && blk.mapped == n.mapped)
        return Status::Internal("adjacent free blocks at " + std::to_string(blk.addr));
    }
    const Pool& pool = pools_[static_cast<int>(blk.pool)];
    if (!blk.allocated) {
      const bool in = blk.mapped ? pool.blocks.Contains(blk.stream, FreeKey(b))
                                 : pool.unmapped.Contains(blk.stream, UnmappedKey(b));
      if (!in)
        return Status::Internal("free block missing from its set at " + std::to_string(blk.addr));
      if (blk.mapped) ++free_count;
      if (blk.mapped && !blk.expandable && IsSplit(b)) split_bytes += blk.size;
    }
  }
  const int64_t in_sets = static_cast<int64_t>(pools_[0].blocks.size() + pools_[1].blocks.size());
  if (in_sets != free_count) return Status::Internal("free sets hold stale entries");
  if (reserved != stats_.reserved_bytes.all().current)
    return Status::Internal("reserved_bytes " +
                            std::to_string(stats_.reserved_bytes.all().current) +
                            " != mapped block bytes " + std::to_string(reserved));
  if (allocated != stats_.allocated_bytes.all().current)
    return Status::Internal("allocated_bytes mismatch");
  if (split_bytes != stats_.inactive_split_bytes.all().current)
    return Status::Internal("inactive_split_bytes " +
                            std::to_string(stats_.inactive_split_bytes.all().current) +
                            " != " + std::to_string(split_bytes));
  return Status::OK();
}

}  // namespace memsim
