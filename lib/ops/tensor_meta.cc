#include "lib/ops/tensor_meta.h"

#include <algorithm>

#include "lib/util/checked.h"

namespace memsim {

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorMeta::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::string TensorMeta::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::optional<TensorMeta> TensorMeta::Contiguous(Dtype t, std::vector<int64_t> sizes) {
  int64_t n = ElementSize(t);
  for (int64_t s : sizes) {
    if (s < 0) return std::nullopt;
    auto m = CheckedMul(n, s);
    if (!m) return std::nullopt;
    n = *m;
  }
  TensorMeta m;
  m.dtype = t;
  m.strides = ContiguousStrides(sizes);
  m.sizes = std::move(sizes);
  return m;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return st;
}

std::optional<int64_t> WrapDim(int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r) return std::nullopt;
  return d < 0 ? d + r : d;
}

std::optional<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// Port of at::detail::computeStride (TensorUtils.cpp).
std::optional<std::vector<int64_t>> ViewStrides(const std::vector<int64_t>& oldshape,
                                                const std::vector<int64_t>& oldstride,
                                                const std::vector<int64_t>& newshape) {
  std::vector<int64_t> newstride(newshape.size());
  if (oldshape.empty()) {
    std::fill(newstride.begin(), newstride.end(), 1);
    return newstride;
  }
  int64_t numel = 1;
  for (int64_t s : oldshape) numel *= s;
  if (numel == 0 && oldshape == newshape) return oldstride;
  if (numel == 0) return ContiguousStrides(newshape);
  int64_t view_d = static_cast<int64_t>(newshape.size()) - 1;
  int64_t chunk_base_stride = oldstride.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(oldshape.size()) - 1; tensor_d >= 0; tensor_d--) {
    tensor_numel *= oldshape[tensor_d];
    if (tensor_d == 0 ||
        (oldshape[tensor_d - 1] != 1 && oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        newstride[view_d] = view_numel * chunk_base_stride;
        view_numel *= newshape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return newstride;
}

}  // namespace memsim
