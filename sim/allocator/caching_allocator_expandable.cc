// CachingAllocator: expandable segments (expandable_segments:True). See Note [Expandable segments]
// in docs/allocator.md: one huge virtual range per (stream, pool), mapped page by page.
#include <algorithm>

#include "lib/util/check.h"
#include "lib/util/checked.h"
#include "sim/allocator/caching_allocator.h"

namespace memsim {

BlockId CachingAllocator::FindExpandableBlock(PoolKind pk, StreamId stream, int64_t size) {
  Pool& pool = PoolOf(pk);
  auto has_space = [&](BlockId b) {
    int64_t bytes = 0;
    while (bytes < size && Allocatable(b)) {
      bytes += blocks_[b].size;
      b = blocks_[b].next;
    }
    return bytes >= size;
  };
  const FreeSet::Lane* lane = pool.unmapped.Find(stream);
  for (size_t i = 0; lane != nullptr && i < lane->size(); ++i) {
    BlockId c = lane->id(i);
    // The lowest-address unmapped block, or the free block right before it.
    if (Allocatable(blocks_[c].prev)) c = blocks_[c].prev;
    if (has_space(c)) return c;
  }
  // A new virtual range of ceil(1.125 x totalGlobalMem / page) pages.
  const int64_t page = pk == PoolKind::kSmall ? kSmallBuffer : cfg_.large_segment_size;
  int64_t total = dev_.total_memory_bytes > 0 ? dev_.total_memory_bytes
                  : dev_.capacity_bytes > 0   ? dev_.capacity_bytes
                                              : int64_t{80} << 30;
  total = std::min(total, kMaxTensorBytes);  // every capacity is at most 2^50: the range's size cannot overflow
  const int64_t pages = (total + total / 8 + page - 1) / page;
  Segment seg;
  seg.addr = va_cursor_;
  seg.size = pages * page;
  seg.page = page;
  seg.stream = stream;
  seg.pool = pk;
  seg.expandable = true;
  va_cursor_ += static_cast<uint64_t>(seg.size) + static_cast<uint64_t>(page);
  segments_.push_back(seg);
  const BlockId b = NewBlock();
  Block& blk = blocks_[b];
  blk.addr = seg.addr;
  blk.size = seg.size;
  blk.stream = stream;
  blk.pool = pk;
  blk.segment = static_cast<uint32_t>(segments_.size() - 1);
  blk.mapped = false;
  blk.expandable = true;
  pool.unmapped.Insert(stream, UnmappedKey(b), b);
  return b;
}

bool CachingAllocator::MapBlock(BlockId b, int64_t size) {
  const Segment& seg = segments_[blocks_[b].segment];
  MEMSIM_CHECK(!blocks_[b].mapped && size <= blocks_[b].size);
  const uint64_t off = blocks_[b].addr - seg.addr;
  const uint64_t page = static_cast<uint64_t>(seg.page);
  const uint64_t begin = off / page;
  const uint64_t end = (off + static_cast<uint64_t>(size) + page - 1) / page;
  const int64_t mapped = static_cast<int64_t>((end - begin) * page);
  if (dev_.capacity_bytes > 0 && stats_.reserved_bytes.all().current + mapped > dev_.capacity_bytes)
    return false;  // the physical pages cannot be created
  const PoolKind pk = blocks_[b].pool;
  Pool& pool = PoolOf(pk);
  EraseUnmapped(b);
  blocks_[b].mapped = true;
  if (mapped < blocks_[b].size) {
    // b -> remaining (still unmapped) -> b.next
    const BlockId r = NewBlock();
    Block& rem = blocks_[r];
    Block& blk = blocks_[b];
    rem = blk;
    rem.mapped = false;
    rem.addr = blk.addr + static_cast<uint64_t>(mapped);
    rem.size = blk.size - mapped;
    rem.requested = 0;
    rem.prev = b;
    rem.next = blk.next;
    if (rem.next != kNil) blocks_[rem.next].prev = r;
    blk.next = r;
    blk.size = mapped;
    pool.unmapped.Insert(rem.stream, UnmappedKey(r), r);
  }
  TryMerge(b, blocks_[b].prev);
  TryMerge(b, blocks_[b].next);
  InsertFree(b);
  stats_.reserved_bytes.Increase(pk, mapped);
  ++stats_.num_device_alloc;
  last_device_bytes_ += mapped;
  return true;
}

BlockId CachingAllocator::TryAllocateExpandable(PoolKind pk, StreamId stream, int64_t size) {
  BlockId c = FindExpandableBlock(pk, stream, size);
  // c is: unmapped -> *, or free -> unmapped -> *.
  if (!blocks_[c].mapped && !MapBlock(c, std::min(blocks_[c].size, size))) return kNil;
  MEMSIM_CHECK(blocks_[c].mapped);
  while (blocks_[c].size < size) {
    const int64_t remaining = size - blocks_[c].size;
    const BlockId next = blocks_[c].next;
    MEMSIM_CHECK(next != kNil && !blocks_[next].mapped);
    if (!MapBlock(next, std::min(remaining, blocks_[next].size))) return kNil;
    c = next;  // the mapped block absorbed c
  }
  EraseFree(c);
  return c;
}

void CachingAllocator::UnmapBlock(BlockId b) {
  const Segment& seg = segments_[blocks_[b].segment];
  const uint64_t page = static_cast<uint64_t>(seg.page);
  const uint64_t off = blocks_[b].addr - seg.addr;
  const uint64_t begin = (off + page - 1) / page;
  const uint64_t end = (off + static_cast<uint64_t>(blocks_[b].size)) / page;
  if (begin >= end) return;  // no whole page inside
  const PoolKind pk = blocks_[b].pool;
  Pool& pool = PoolOf(pk);
  EraseFree(b);
  const uint64_t ustart = seg.addr + begin * page;
  const int64_t usize = static_cast<int64_t>((end - begin) * page);
  const int64_t before = static_cast<int64_t>(ustart - blocks_[b].addr);
  if (before > 0) {
    // prev -> before_free -> b
    const BlockId f = NewBlock();
    Block& nb = blocks_[f];
    Block& blk = blocks_[b];
    nb = blk;
    nb.requested = 0;
    nb.size = before;
    nb.prev = blk.prev;
    nb.next = b;
    if (nb.prev != kNil) blocks_[nb.prev].next = f;
    blk.prev = f;
    InsertFree(f);
  }
  const int64_t after = blocks_[b].size - before - usize;
  if (after > 0) {
    // b -> after_free -> next
    const BlockId f = NewBlock();
    Block& nb = blocks_[f];
    Block& blk = blocks_[b];
    nb = blk;
    nb.requested = 0;
    nb.addr = ustart + static_cast<uint64_t>(usize);
    nb.size = after;
    nb.prev = b;
    nb.next = blk.next;
    if (nb.next != kNil) blocks_[nb.next].prev = f;
    blk.next = f;
    InsertFree(f);
  }
  Block& blk = blocks_[b];
  blk.addr = ustart;
  blk.size = usize;
  blk.mapped = false;
  TryMerge(b, blocks_[b].prev);
  TryMerge(b, blocks_[b].next);
  pool.unmapped.Insert(blk.stream, UnmappedKey(b), b);
  stats_.reserved_bytes.Decrease(pk, usize);
  ++stats_.num_device_free;
}

void CachingAllocator::ReleaseExpandableSegment(BlockId b) {
  // The whole virtual range is unmapped: give it back.
  Segment& seg = segments_[blocks_[b].segment];
  MEMSIM_CHECK(blocks_[b].size == seg.size && !blocks_[b].mapped);
  EraseUnmapped(b);
  seg.live = false;
  DeleteBlock(b);
}

}  // namespace memsim
