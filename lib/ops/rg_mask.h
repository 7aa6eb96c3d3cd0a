// Which inputs of an op require grad: one bit per input, for any number of inputs (a compiled
// region takes every parameter of the model as an input, Note [Compiled regions]). The first 64
// inputs need no allocation.
#ifndef MEMSIM_LIB_OPS_RG_MASK_H_
#define MEMSIM_LIB_OPS_RG_MASK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsim {

class RgMask {
 public:
  bool test(size_t i) const {
    if (i < 64) return (lo_ >> i) & 1u;
    const size_t w = i / 64 - 1;
    return w < hi_.size() && (hi_[w] >> (i % 64)) & 1u;
  }
  void set(size_t i) {
    if (i < 64) {
      lo_ |= uint64_t{1} << i;
      return;
    }
    const size_t w = i / 64 - 1;
    if (w >= hi_.size()) hi_.resize(w + 1, 0);
    hi_[w] |= uint64_t{1} << (i % 64);
  }
  bool any() const {
    if (lo_) return true;
    for (uint64_t x : hi_)
      if (x) return true;
    return false;
  }

 private:
  uint64_t lo_ = 0;
  std::vector<uint64_t> hi_;
};

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_RG_MASK_H_
