// Overflow-checked 64-bit arithmetic for sizes. Sizes in memsim are int64 bytes or elements;
// every product of dimensions goes through these so an absurd shape is an error, not a wrap.
#ifndef MEMSIM_LIB_UTIL_CHECKED_H_
#define MEMSIM_LIB_UTIL_CHECKED_H_

#include <cstdint>
#include <optional>

namespace memsim {

/// The largest single tensor (or allocation request) memsim models: 1 PiB. Larger sizes are
/// input errors, so rounding and every byte sum stay far from int64 overflow.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;
/// The largest byte total one simulation may accumulate (the sum of every request of a run).
inline constexpr int64_t kMaxTotalBytes = int64_t{1} << 62;

inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace memsim

#endif  // MEMSIM_LIB_UTIL_CHECKED_H_
