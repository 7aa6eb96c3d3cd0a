// TensorMeta: a tensor's concrete dtype, sizes and strides once the symbols are bound, and which
// tensor owns its storage (views and in-place results share their base's storage). Strides are
// tracked because they decide when PyTorch copies (contiguous(), reshape, matmul folding).
#ifndef MEMSIM_LIB_OPS_TENSOR_META_H_
#define MEMSIM_LIB_OPS_TENSOR_META_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/dtype.h"

namespace memsim {

struct TensorMeta {
  Dtype dtype = Dtype::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  ///< in elements

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;          ///< product of sizes (checked on construction)
  int64_t bytes() const { return numel() * ElementSize(dtype); }
  bool is_contiguous() const;
  std::string ShapeString() const;  ///< "[8, 3, 224, 224]"

  /// A fresh contiguous tensor; nullopt if the element count or bytes overflow.
  static std::optional<TensorMeta> Contiguous(Dtype t, std::vector<int64_t> sizes);
};

/// Row-major strides for |sizes|.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& sizes);
/// Normalises a possibly negative axis for a tensor of rank |rank|; nullopt if out of range.
std::optional<int64_t> WrapDim(int64_t d, int64_t rank);
/// NumPy broadcasting of two shapes; nullopt if incompatible.
std::optional<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);
/// Strides of |sizes| viewed from a tensor with |old_sizes|/|old_strides| without a copy, as
/// PyTorch's computeStride does; nullopt when a view is impossible (reshape must copy).
std::optional<std::vector<int64_t>> ViewStrides(const std::vector<int64_t>& old_sizes,
                                                const std::vector<int64_t>& old_strides,
                                                const std::vector<int64_t>& sizes);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_TENSOR_META_H_
