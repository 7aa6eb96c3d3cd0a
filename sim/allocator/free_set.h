// FreeSet: the free blocks of one allocator pool in PyTorch's order, (stream, size, address),
// kept as one sorted lane per stream. A lane is a sorted array of (128-bit key = size << 64 |
// address, block id) entries, so a search compares plain integers and an insert or erase moves
// one array. Lanes hold tens of blocks (17 on average, 83 at most over a ResNet-50 step), where a
// search and a short move beat a tree's pointer chasing. Note [Free sets] in docs/allocator.md.
#ifndef MEMSIM_SIM_ALLOCATOR_FREE_SET_H_
#define MEMSIM_SIM_ALLOCATOR_FREE_SET_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lib/util/check.h"

namespace memsim {

class FreeSet {
 public:
  using Key = unsigned __int128;
  using Id = uint32_t;
  using Stream = int64_t;

  /// The key of a block of |size| >= 0 bytes at |address| (size 0 orders by address alone).
  static Key KeyOf(int64_t size, uint64_t address) {
    return static_cast<Key>(static_cast<uint64_t>(size)) << 64 | address;
  }
  static int64_t SizeOf(Key k) { return static_cast<int64_t>(static_cast<uint64_t>(k >> 64)); }

  /// Lanes up to this long are searched by counting, longer ones by halving (BM_StageAllocator).
  static constexpr size_t kLinearLane = 32;

  /// One free block: its key and id side by side, so an insert or erase moves one array.
  struct Entry {
    Key key;
    Id id;
  };

  /// Past a lane's blocks, kPad entries of the largest key (no block has it: sizes are below
  /// 2^63): a count reads four entries at a time and a search stops at them without a bound check.
  static constexpr size_t kPad = 3;
  static constexpr Key kEndKey = ~Key{0};

  /// The free blocks of one stream, in (size, address) order, then the kPad end entries.
  struct Lane {
    Stream stream = 0;
    std::vector<Entry> entries = std::vector<Entry>(kPad, Entry{kEndKey, UINT32_MAX});

    size_t size() const { return entries.size() - kPad; }
    Key key(size_t i) const { return entries[i].key; }
    int64_t block_size(size_t i) const { return SizeOf(entries[i].key); }
    Id id(size_t i) const { return entries[i].id; }
    /// First position whose key is >= |k|: the first of its size, then a step over the blocks
    /// of that size at lower addresses.
    size_t LowerBound(Key k) const {
      size_t i = LowerBoundSize(SizeOf(k));
      while (entries[i].key < k) ++i;  // stops at the end entries
      return i;
    }
    /// First position whose size is >= |bytes|, = LowerBound(KeyOf(bytes, 0)). Only the keys'
    /// size halves are compared. Short lanes (most of them) count the smaller sizes: independent
    /// compares, no chain of dependent loads as in a binary search. Longer ones halve, one
    /// conditional move per halving.
    size_t LowerBoundSize(int64_t bytes) const {
      size_t n = size();
      const uint64_t s = static_cast<uint64_t>(bytes);
      auto smaller = [s](const Entry& e) { return static_cast<size_t>(static_cast<uint64_t>(e.key >> 64) < s); };
      const Entry* p = entries.data();
      if (n > kLinearLane) {
        const Entry* base = p;
        while (n > 1) {
          const size_t half = n / 2;
          base = smaller(base[half - 1]) ? base + half : base;
          n -= half;
        }
        return static_cast<size_t>(base - p) + smaller(*base);
      }
      size_t below = 0;
      // Four at a time; the last four may take up to three end entries, which are never smaller.
      for (size_t i = 0; i < n; i += 4) below += smaller(p[i]) + smaller(p[i + 1]) + smaller(p[i + 2]) + smaller(p[i + 3]);
      return below;
    }
    /// Position of exactly |k| (checked: the key must be present).
    size_t PositionOf(Key k) const {
      const size_t i = LowerBound(k);
      MEMSIM_CHECK(i < size() && entries[i].key == k);
      return i;
    }
    /// Inserts (|k|, |id|): one more entry at the end, moved back to its place. The steps of the
    /// move find the place, so an insert needs no search (and no call to memmove).
    void Insert(Key k, Id id) {
      const size_t n = size();
      entries.push_back(entries.back());
      ReplaceAt(n, k, id);  // from an end entry, so down
    }
    void EraseAt(size_t i) {
      Entry* p = entries.data();
      std::memmove(p + i, p + i + 1, (size() - i) * sizeof(Entry));  // the first end entry too
      entries.pop_back();
    }
    /// Replaces the entry at |i| by (|k|, |id|) and moves it to its place: one shift of the
    /// entries between the old and the new position instead of an erase and an insert.
    void ReplaceAt(size_t i, Key k, Id id) {
      size_t j = i;
      if (k > entries[i].key) {
        while (entries[j + 1].key < k) {  // stops at the end entries
          entries[j] = entries[j + 1];
          ++j;
        }
      } else {
        while (j > 0 && k < entries[j - 1].key) {
          entries[j] = entries[j - 1];
          --j;
        }
      }
      entries[j] = Entry{k, id};
    }
  };

  /// The lane of |stream|, or nullptr when it has no free block.
  Lane* Find(Stream stream) {
    for (Lane& l : lanes_)
      if (l.stream == stream) return &l;
    return nullptr;
  }
  const Lane* Find(Stream stream) const { return const_cast<FreeSet*>(this)->Find(stream); }

  void Insert(Stream stream, Key k, Id id) {
    Lane* found = Find(stream);
    Lane& l = found != nullptr ? *found : Obtain(stream);
    l.Insert(k, id);
  }
  /// Erases |k| of |stream| (checked: it must be present).
  void Erase(Stream stream, Key k) {
    Lane* l = Find(stream);
    MEMSIM_CHECK(l != nullptr);
    l->EraseAt(l->PositionOf(k));
  }
  /// Erase(stream, old_key) + Insert(stream, new_key, id) in one move.
  void Replace(Stream stream, Key old_key, Key new_key, Id id) {
    Lane* l = Find(stream);
    MEMSIM_CHECK(l != nullptr);
    l->ReplaceAt(l->PositionOf(old_key), new_key, id);
  }
  bool Contains(Stream stream, Key k) const {
    const Lane* l = Find(stream);
    if (l == nullptr) return false;
    const size_t i = l->LowerBound(k);
    return i < l->size() && l->key(i) == k;
  }
  size_t size() const {
    size_t n = 0;
    for (const Lane& l : lanes_) n += l.size();
    return n;
  }
  /// Calls |fn(id)| for every block in (stream, size, address) order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Lane& l : lanes_)
      for (size_t i = 0; i < l.size(); ++i) fn(l.id(i));
  }
  const std::vector<Lane>& lanes() const { return lanes_; }

 private:
  Lane& Obtain(Stream stream) {
    auto it = std::lower_bound(lanes_.begin(), lanes_.end(), stream,
                               [](const Lane& l, Stream s) { return l.stream < s; });
    if (it != lanes_.end() && it->stream == stream) return *it;
    Lane l;
    l.stream = stream;
    return *lanes_.insert(it, std::move(l));
  }

  std::vector<Lane> lanes_;  // sorted by stream; a lane stays once created (it is reused)
};

}  // namespace memsim

#endif  // MEMSIM_SIM_ALLOCATOR_FREE_SET_H_
