// "Ideal packing": best-fit offset planning of an allocation stream in one linear arena
// (ONNX Runtime style), the lower bound that shows what the caching allocator's fragmentation
// costs. Online in event order, no segments, no rounding beyond an alignment. Not thread-safe.
// See docs/allocator.md, Note [Ideal packing].
#ifndef MEMSIM_SIM_ALLOCATOR_IDEAL_PACKING_H_
#define MEMSIM_SIM_ALLOCATOR_IDEAL_PACKING_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace memsim {

class IdealPacker {
 public:
  explicit IdealPacker(int64_t alignment = 512) : alignment_(alignment) {}

  /// Places |bytes| (rounded up to the alignment) in the smallest free gap that fits (lowest
  /// offset on ties), else at the top of the arena. Returns the offset.
  int64_t Allocate(int64_t bytes);
  /// Frees the range placed at |offset| by Allocate with the same |bytes|.
  void Free(int64_t offset, int64_t bytes);

  int64_t arena_bytes() const { return top_; }            ///< current arena size
  int64_t peak_arena_bytes() const { return peak_top_; }  ///< the lower bound on reserved
  int64_t live_bytes() const { return live_; }
  int64_t peak_live_bytes() const { return peak_live_; }

 private:
  int64_t Align(int64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }
  void AddGap(int64_t offset, int64_t size);
  void RemoveGap(std::map<int64_t, int64_t>::iterator it);

  int64_t alignment_;
  std::map<int64_t, int64_t> gaps_;                // offset -> size
  std::set<std::pair<int64_t, int64_t>> by_size_;  // (size, offset)
  int64_t top_ = 0;
  int64_t peak_top_ = 0;
  int64_t live_ = 0;
  int64_t peak_live_ = 0;
};

}  // namespace memsim

#endif  // MEMSIM_SIM_ALLOCATOR_IDEAL_PACKING_H_
