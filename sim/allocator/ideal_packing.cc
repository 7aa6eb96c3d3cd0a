#include "sim/allocator/ideal_packing.h"

#include <algorithm>

#include "lib/util/check.h"

namespace memsim {

void IdealPacker::AddGap(int64_t offset, int64_t size) {
  gaps_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void IdealPacker::RemoveGap(std::map<int64_t, int64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  gaps_.erase(it);
}

int64_t IdealPacker::Allocate(int64_t bytes) {
  const int64_t size = Align(std::max<int64_t>(bytes, 1));
  live_ += size;
  peak_live_ = std::max(peak_live_, live_);
  auto fit = by_size_.lower_bound({size, INT64_MIN});
  if (fit != by_size_.end()) {
    const int64_t offset = fit->second;
    const int64_t gap = fit->first;
    RemoveGap(gaps_.find(offset));
    if (gap > size) AddGap(offset + size, gap - size);
    return offset;
  }
  // No gap fits: extend the arena, reusing a free gap that ends at the top.
  int64_t offset = top_;
  if (!gaps_.empty()) {
    auto last = std::prev(gaps_.end());
    if (last->first + last->second == top_) {
      offset = last->first;
      RemoveGap(last);
    }
  }
  top_ = offset + size;
  peak_top_ = std::max(peak_top_, top_);
  return offset;
}

void IdealPacker::Free(int64_t offset, int64_t bytes) {
  int64_t size = Align(std::max<int64_t>(bytes, 1));
  live_ -= size;
  MEMSIM_CHECK(live_ >= 0);
  auto next = gaps_.lower_bound(offset);
  if (next != gaps_.end() && next->first == offset + size) {
    size += next->second;
    RemoveGap(next);
  }
  auto it = gaps_.lower_bound(offset);
  if (it != gaps_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      RemoveGap(prev);
    }
  }
  if (offset + size == top_) {  // shrink the arena; the peak stays
    top_ = offset;
    return;
  }
  AddGap(offset, size);
}

}  // namespace memsim
