// Rules for the ONNX ops torch.onnx emits around shapes and masks: ConstantOfShape, Equal and Where
// on compile-time values are folded (torchvision ViT's `class_token.expand(n, -1, -1)` becomes
// `Where(Equal(shape, -1), ones, shape)`); Where(mask, constant, x) on tensors is `masked_fill`
// (a causal attention mask). A Constant too large to fold (a mask buffer torch.onnx inlined)
// becomes a buffer directly. Also the tanh-approximation GELU pattern (TryGeluTanhPattern).
#include <cmath>
#include <limits>

#include "lib/onnx/importer.h"

namespace memsim::onnx_import {
namespace {

using NP = onnx::NodeProto;

constexpr auto In = NodeInput;

constexpr auto Attr = NodeAttr;

bool IsFloatInit(Importer& im, const std::string& name) {
  int k = im.InitIndex(name);
  if (k < 0) return false;
  int32_t t = im.graph().initializer(k).data_type();
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE || t == onnx::TensorProto::FLOAT16 ||
         t == onnx::TensorProto::BFLOAT16;
}

/// |name| as a small compile-time value (never a float weight).
std::optional<ConstValue> Folded(Importer& im, const std::string& name) {
  if (name.empty() || IsFloatInit(im, name)) return std::nullopt;
  return im.AsConst(name);
}

/// Element |i| of |c| with scalar broadcasting.
size_t At(const ConstValue& c, size_t i) { return c.numel() == 1 ? 0 : i; }

Status ConstantOfShape(Importer& im, const NP& n, int) {
  auto shape = Folded(im, In(n, 0));
  auto dims = shape ? shape->ConstInts() : std::nullopt;
  if (!dims) return Status::Unsupported("ConstantOfShape of a shape that is not a constant");
  ConstValue fill;
  fill.elem_type = onnx::TensorProto::FLOAT;
  fill.is_float = true;
  fill.floats = {0.0};
  if (const auto* a = Attr(n, "value")) {
    auto v = ReadTensor(a->t(), 1);
    if (!v || v->numel() != 1) return Status::Unsupported("ConstantOfShape value is not a one-element tensor");
    fill = *v;
  }
  ConstValue c;
  c.elem_type = fill.elem_type;
  c.is_float = fill.is_float;
  c.shape = *dims;
  const int64_t numel = NumElements(*dims);
  if (numel < 0 || numel > 4096) return Status::Unsupported("ConstantOfShape of more than 4096 elements (a tensor, not a shape)");
  for (int64_t k = 0; k < numel; ++k) {
    if (c.is_float) c.floats.push_back(fill.floats[0]);
    else c.ints.push_back(fill.ints[0]);
  }
  im.BindConst(n.output(0), c);
  return Status::OK();
}

/// a == b for folded integers: equal SymInts are equal; a symbolic size (≥ 0) never equals a
/// negative constant; otherwise unknown.
std::optional<bool> SymEqual(const SymInt& a, const SymInt& b) {
  if (a == b) return true;
  if (a.is_const() && b.is_const()) return false;
  const SymInt& c = a.is_const() ? a : b;
  const SymInt& s = a.is_const() ? b : a;
  if (c.is_const() && c.coeff < 0 && s.coeff > 0) return false;
  return std::nullopt;
}

Status Equal(Importer& im, const NP& n, int) {
  auto a = Folded(im, In(n, 0)), b = Folded(im, In(n, 1));
  if (!a || !b) return Status::Unsupported("Equal of tensors has no memsim op (only of compile-time values)");
  const size_t num = std::max(a->numel(), b->numel());
  if ((a->numel() != num && a->numel() != 1) || (b->numel() != num && b->numel() != 1))
    return Status::Unsupported("Equal of constants with different sizes");
  ConstValue r;
  r.elem_type = onnx::TensorProto::BOOL;
  r.shape = a->numel() >= b->numel() ? a->shape : b->shape;
  for (size_t i = 0; i < num; ++i) {
    std::optional<bool> eq;
    if (a->is_float || b->is_float) {
      auto x = a->is_float ? std::optional<double>(a->floats[At(*a, i)]) : std::nullopt;
      auto y = b->is_float ? std::optional<double>(b->floats[At(*b, i)]) : std::nullopt;
      if (!a->is_float && a->ints[At(*a, i)].is_const()) x = static_cast<double>(a->ints[At(*a, i)].coeff);
      if (!b->is_float && b->ints[At(*b, i)].is_const()) y = static_cast<double>(b->ints[At(*b, i)].coeff);
      if (x && y) eq = *x == *y;
    } else {
      eq = SymEqual(a->ints[At(*a, i)], b->ints[At(*b, i)]);
    }
    if (!eq) return Status::Unsupported("Equal of a symbolic size that may or may not match");
    r.ints.push_back(SymInt::Const(*eq ? 1 : 0));
  }
  im.BindConst(n.output(0), r);
  return Status::OK();
}

Status Where(Importer& im, const NP& n, int) {
  auto cond = Folded(im, In(n, 0)), x = Folded(im, In(n, 1)), y = Folded(im, In(n, 2));
  if (cond && x && y) {
    auto flags = cond->ConstInts();
    if (!flags || x->is_float != y->is_float) return Status::Unsupported("Where of mixed or symbolic constants");
    const size_t num = std::max({cond->numel(), x->numel(), y->numel()});
    for (const ConstValue* c : {&*cond, &*x, &*y})
      if (c->numel() != num && c->numel() != 1) return Status::Unsupported("Where of constants with different sizes");
    ConstValue r = x->numel() == num ? *x : *y;
    r.shape = cond->numel() == num ? cond->shape : x->numel() == num ? x->shape : y->shape;
    r.ints.clear();
    r.floats.clear();
    for (size_t i = 0; i < num; ++i) {
      const ConstValue& src = (*flags)[At(*cond, i)] ? *x : *y;
      if (r.is_float) r.floats.push_back(src.floats[At(src, i)]);
      else r.ints.push_back(src.ints[At(src, i)]);
    }
    im.BindConst(n.output(0), r);
    return Status::OK();
  }
  // Where(mask, v, t) = t.masked_fill(mask, v) for a one-element constant v.
  auto v = x ? x->Scalar() : std::nullopt;
  if (v && !y) {
    Json value;
    if (std::isinf(*v)) value = *v > 0 ? "inf" : "-inf";
    else if (std::isnan(*v)) value = "nan";
    else value = *v;
    MEMSIM_ASSIGN_OR_RETURN(std::string t, im.AsTensor(In(n, 2)));
    MEMSIM_ASSIGN_OR_RETURN(std::string mask, im.AsTensor(In(n, 0), InitUse::Role::kBuffer));
    im.Emit("masked_fill", {t, mask}, Json{{"value", value}, {"inplace", false}}, {n.output(0)});
    return Status::OK();
  }
  return Status::Unsupported("Where is neither a compile-time value nor Where(mask, constant, tensor) (→ masked_fill)");
}

}  // namespace

bool TryGeluTanhPattern(Importer& im, const NP& sq, int) {
  // torch.onnx's GELU(approximate="tanh") below opset 20: x·x → x·x² → 0.044715·x³ → x + … →
  // √(2/π)·… → Tanh → 1 + … → x·… → 0.5·…  (operands of Mul/Add in either order).
  const std::string x = In(sq, 0);
  if (In(sq, 1) != x) return false;
  auto only = [&](const std::string& v, const char* type) -> int {
    const auto& cs = im.Consumers(v);
    if (cs.size() != 1 || im.IsGraphOutput(v) || im.node(cs[0]).op_type() != type) return -1;
    return cs[0];
  };
  auto other = [&](int k, const std::string& v) {
    const NP& n = im.node(k);
    return In(n, 0) == v ? In(n, 1) : In(n, 0);
  };
  auto is_scalar = [&](const std::string& v, double want) {
    auto c = im.AsConst(v);
    if (int p = im.Producer(v); !c && p >= 0 && im.node(p).op_type() == "Constant" && Attr(im.node(p), "value"))
      c = ReadTensor(Attr(im.node(p), "value")->t(), 1);
    auto sc = c ? c->Scalar() : std::nullopt;
    return sc && std::abs(*sc - want) < 1e-4;
  };
  int cube = only(sq.output(0), "Mul");
  if (cube < 0 || other(cube, sq.output(0)) != x) return false;
  int coef = only(im.node(cube).output(0), "Mul");
  if (coef < 0 || !is_scalar(other(coef, im.node(cube).output(0)), 0.044715)) return false;
  int inner = only(im.node(coef).output(0), "Add");
  if (inner < 0 || other(inner, im.node(coef).output(0)) != x) return false;
  int scale = only(im.node(inner).output(0), "Mul");
  if (scale < 0 || !is_scalar(other(scale, im.node(inner).output(0)), std::sqrt(2.0 / M_PI))) return false;
  int th = only(im.node(scale).output(0), "Tanh");
  if (th < 0) return false;
  int one = only(im.node(th).output(0), "Add");
  if (one < 0 || !is_scalar(other(one, im.node(th).output(0)), 1.0)) return false;
  int mx = only(im.node(one).output(0), "Mul");
  if (mx < 0 || other(mx, im.node(one).output(0)) != x) return false;
  int half = only(im.node(mx).output(0), "Mul");
  if (half < 0 || !is_scalar(other(half, im.node(mx).output(0)), 0.5)) return false;
  auto xt = im.AsTensor(x);
  if (!xt.ok()) return false;
  for (int k : {cube, coef, inner, scale, th, one, mx, half}) im.MarkFused(k);
  im.Emit("gelu", {*xt}, Json{{"approximate", "tanh"}}, {im.node(half).output(0)});
  return true;
}

const std::map<std::string, Rule>& FoldRules() {
  static const std::map<std::string, Rule> kRules = {
      {"ConstantOfShape", ConstantOfShape},
      {"Equal", Equal},
      {"Where", Where},
  };
  return kRules;
}

}  // namespace memsim::onnx_import
