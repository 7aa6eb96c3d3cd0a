// Overflow-checked 64-bit arithmetic for sizes. Sizes in memsim are int64 bytes or elements;
// every product of dimensions goes through these so an absurd shape is an error, not a wrap.
#ifndef MEMSIM_LIB_UTIL_CHECKED_H_
#define MEMSIM_LIB_UTIL_CHECKED_H_

#include <cstdint>
#include <optional>

namespace memsim {

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
