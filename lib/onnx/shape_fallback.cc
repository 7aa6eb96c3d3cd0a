// Shapes that ONNX shape inference leaves unknown, propagated by the importer itself through the
// ops it maps. torch.onnx writes nn.MultiheadAttention's in-projection chunk as Slices whose
// bounds are computed (Shape → Gather → Div → Mul), and ONNX does not infer the shape of such a
// Slice, nor of anything downstream; the importer has folded those bounds to (symbolic) integers,
// so it can. Dims are SymInts, so a batch dimension stays the symbol `batch`.
#include <algorithm>
#include <limits>
#include <set>

#include "lib/onnx/importer.h"

namespace memsim::onnx_import {
namespace {

using NP = onnx::NodeProto;

constexpr auto In = NodeInput;

constexpr auto Attr = NodeAttr;

std::optional<std::vector<int64_t>> Ints(Importer& im, const NP& n, const std::string& attr, int input) {
  if (const auto* a = Attr(n, attr)) return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  if (input < 0 || In(n, input).empty()) return std::nullopt;
  auto c = im.AsConst(In(n, input));
  return c ? c->ConstInts() : std::nullopt;
}

bool IsOne(const std::optional<SymInt>& d) { return d && *d == SymInt::Const(1); }

/// Numpy broadcasting of two shapes; a dim is unknown when either side is unknown and not 1.
std::optional<ShapeDims> Broadcast(const ShapeDims& a, const ShapeDims& b) {
  size_t r = std::max(a.size(), b.size());
  ShapeDims out(r);
  for (size_t k = 0; k < r; ++k) {
    std::optional<SymInt> x = k + a.size() >= r ? a[k + a.size() - r] : SymInt::Const(1);
    std::optional<SymInt> y = k + b.size() >= r ? b[k + b.size() - r] : SymInt::Const(1);
    if (IsOne(x)) out[k] = y;
    else if (IsOne(y)) out[k] = x;
    else if (x && y && !(*x == *y)) return std::nullopt;
    else out[k] = x ? x : y;
  }
  return out;
}

int64_t Norm(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

/// Length of x[start:end:step] along a dim of size |dim| (ONNX Slice clamping), or nullopt.
std::optional<SymInt> SliceLen(const std::optional<SymInt>& dim, const SymInt& start, const SymInt& end, int64_t step) {
  const bool to_end = end.is_const() && end.coeff >= std::numeric_limits<int32_t>::max();
  if (step == 1 && start == SymInt::Const(0) && to_end) return dim;
  if (step == 1 && start == SymInt::Const(0) && dim && end == *dim) return dim;
  if (!dim || !dim->is_const() || !start.is_const() || !end.is_const()) return std::nullopt;
  int64_t d = dim->coeff, s = start.coeff, e = end.coeff;
  if (s < 0) s += d;
  if (e < 0) e += d;
  if (step > 0) {
    s = std::clamp<int64_t>(s, 0, d);
    e = std::clamp<int64_t>(e, 0, d);
    return SymInt::Const(e > s ? (e - s - 1) / step + 1 : 0);  // no overflow for any step
  }
  return std::nullopt;
}

std::optional<ShapeDims> Infer(Importer& im, const NP& n, int out) {
  const std::string& op = n.op_type();
  auto s0 = In(n, 0).empty() ? std::nullopt : im.ShapeOf(In(n, 0));
  static const std::set<std::string> kSame = {
      "Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Gelu", "Erf", "Clip", "Softmax",
      "LogSoftmax", "Dropout", "BatchNormalization", "LayerNormalization", "InstanceNormalization", "Identity", "Cast"};
  if (kSame.count(op)) return out == 0 ? s0 : std::nullopt;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    auto s1 = im.ShapeOf(In(n, 1));
    if (!s0 || !s1) return std::nullopt;
    return Broadcast(*s0, *s1);
  }
  if (op == "Range") {  // Range(0, n, 1), the only form mapped (→ arange)
    auto limit = im.AsConst(In(n, 1));
    if (!limit || limit->is_float || limit->numel() != 1) return std::nullopt;
    return ShapeDims{limit->ints[0]};
  }
  if (op == "Where") {
    auto s1 = im.ShapeOf(In(n, 1)), s2 = im.ShapeOf(In(n, 2));
    if (!s0 || !s1 || !s2) return std::nullopt;
    auto b = Broadcast(*s0, *s1);
    return b ? Broadcast(*b, *s2) : std::nullopt;
  }
  if (!s0) return std::nullopt;
  const size_t r = s0->size();
  if (op == "Expand") {  // ONNX Expand broadcasts the input with the shape operand
    auto c = im.AsConst(In(n, 1));
    if (!c || c->is_float) return std::nullopt;
    ShapeDims target;
    for (const SymInt& d : c->ints) target.push_back(d);
    return Broadcast(*s0, target);
  }
  if (op == "Transpose") {
    auto perm = Ints(im, n, "perm", -1);
    ShapeDims o;
    if (!perm) {
      o.assign(s0->rbegin(), s0->rend());
      return o;
    }
    for (int64_t p : *perm) {
      if (p < 0 || p >= static_cast<int64_t>(r)) return std::nullopt;
      o.push_back((*s0)[p]);
    }
    return o;
  }
  if (op == "MatMul") {
    auto s1 = im.ShapeOf(In(n, 1));
    if (!s1 || r < 1 || s1->empty()) return std::nullopt;
    ShapeDims a = *s0, b = *s1;
    const bool a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), SymInt::Const(1));
    if (b1) b.push_back(SymInt::Const(1));
    ShapeDims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    auto batch = Broadcast(ba, bb);
    if (!batch) return std::nullopt;
    if (!a1) batch->push_back(a[a.size() - 2]);
    if (!b1) batch->push_back(b.back());
    return batch;
  }
  if (op == "Gemm") {
    auto s1 = im.ShapeOf(In(n, 1));
    if (!s1 || r != 2 || s1->size() != 2) return std::nullopt;
    const bool ta = Attr(n, "transA") && Attr(n, "transA")->i(), tb = Attr(n, "transB") && Attr(n, "transB")->i();
    return ShapeDims{(*s0)[ta ? 1 : 0], (*s1)[tb ? 0 : 1]};
  }
  if (op == "Slice") {
    auto st = im.AsConst(In(n, 1)), en = im.AsConst(In(n, 2));
    if (!st || !en || st->is_float || en->is_float || st->numel() != en->numel()) return std::nullopt;
    auto axes = Ints(im, n, "", 3);
    auto steps = Ints(im, n, "", 4);
    ShapeDims o = *s0;
    for (size_t k = 0; k < st->numel(); ++k) {
      int64_t ax = axes ? Norm((*axes)[k], r) : static_cast<int64_t>(k);
      if (ax < 0 || ax >= static_cast<int64_t>(r)) return std::nullopt;
      o[ax] = SliceLen((*s0)[ax], st->ints[k], en->ints[k], steps ? (*steps)[k] : 1);
    }
    return o;
  }
  if (op == "Reshape") {
    auto c = im.AsConst(In(n, 1));
    if (!c || c->is_float) return std::nullopt;
    ShapeDims o;
    int infer = -1;
    SymInt known = SymInt::Const(1);
    for (size_t k = 0; k < c->ints.size(); ++k) {
      SymInt d = c->ints[k];
      if (d == SymInt::Const(0)) {
        if (k >= r || !(*s0)[k]) return std::nullopt;
        d = *(*s0)[k];
      }
      if (d == SymInt::Const(-1)) {
        infer = static_cast<int>(k);
        o.push_back(std::nullopt);
        continue;
      }
      std::optional<SymInt> m = Mul(known, d);
      if (!m) return std::nullopt;
      known = *m;
      o.push_back(d);
    }
    if (infer >= 0) {
      SymInt numel = SymInt::Const(1);
      for (const auto& d : *s0) {
        if (!d) return o;
        std::optional<SymInt> m = Mul(numel, *d);
        if (!m) return std::nullopt;
        numel = *m;
      }
      o[infer] = Div(numel, known);
    }
    return o;
  }
  if (op == "Unsqueeze") {
    auto axes = Ints(im, n, "axes", 1);
    if (!axes) return std::nullopt;
    const size_t orank = r + axes->size();
    std::vector<int64_t> ax;
    for (int64_t a : *axes) ax.push_back(Norm(a, orank));
    std::sort(ax.begin(), ax.end());
    ShapeDims o = *s0;
    for (int64_t a : ax) {
      if (a < 0 || a > static_cast<int64_t>(o.size())) return std::nullopt;
      o.insert(o.begin() + a, SymInt::Const(1));
    }
    return o;
  }
  if (op == "Squeeze") {
    auto axes = Ints(im, n, "axes", 1);
    ShapeDims o;
    for (size_t k = 0; k < r; ++k) {
      bool drop = false;
      if (axes) {
        for (int64_t a : *axes) drop = drop || Norm(a, r) == static_cast<int64_t>(k);
      } else {
        if (!(*s0)[k]) return std::nullopt;
        drop = IsOne((*s0)[k]);
      }
      if (!drop) o.push_back((*s0)[k]);
    }
    return o;
  }
  if (op == "Concat") {
    int64_t ax = Norm(Attr(n, "axis") ? Attr(n, "axis")->i() : 0, r);
    if (ax < 0 || ax >= static_cast<int64_t>(r)) return std::nullopt;
    ShapeDims o = *s0;
    for (int k = 1; k < n.input_size(); ++k) {
      auto sk = im.ShapeOf(In(n, k));
      if (!sk || sk->size() != r || !o[ax] || !(*sk)[ax]) return std::nullopt;
      o[ax] = AddSub(*o[ax], *(*sk)[ax], false);
    }
    return o;
  }
  if (op == "Split") {
    int64_t ax = Norm(Attr(n, "axis") ? Attr(n, "axis")->i() : 0, r);
    if (ax < 0 || ax >= static_cast<int64_t>(r)) return std::nullopt;
    auto sizes = Ints(im, n, "split", 1);
    ShapeDims o = *s0;
    if (sizes && out < static_cast<int>(sizes->size())) {
      o[ax] = SymInt::Const((*sizes)[out]);
    } else if (!sizes && o[ax] && o[ax]->is_const() && o[ax]->coeff % n.output_size() == 0) {
      o[ax] = SymInt::Const(o[ax]->coeff / n.output_size());
    } else {
      return std::nullopt;
    }
    return o;
  }
  if (op == "Gather") {
    auto si = im.ShapeOf(In(n, 1));
    int64_t ax = Norm(Attr(n, "axis") ? Attr(n, "axis")->i() : 0, r);
    if (!si || ax < 0 || ax >= static_cast<int64_t>(r)) return std::nullopt;
    ShapeDims o(s0->begin(), s0->begin() + ax);
    o.insert(o.end(), si->begin(), si->end());
    o.insert(o.end(), s0->begin() + ax + 1, s0->end());
    return o;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ShapeDims> FallbackShape(Importer& im, const onnx::NodeProto& n, int out) {
  return Infer(im, n, out);
}

}  // namespace memsim::onnx_import
