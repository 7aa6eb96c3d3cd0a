// One converter per ONNX op type (docs/onnx-import.md has the table). Each maps a node to memsim
// ops through the Importer, or folds it into a compile-time value (shape chains), or returns
// Status::Unsupported with the reason; the importer collects every unsupported node.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>

#include "lib/onnx/importer.h"

namespace memsim::onnx_import {
namespace {

using NP = onnx::NodeProto;
using Role = InitUse::Role;

constexpr auto Attr = NodeAttr;
int64_t AttrInt(const NP& n, const std::string& name, int64_t def) {
  const auto* a = Attr(n, name);
  return a ? a->i() : def;
}
float AttrFloat(const NP& n, const std::string& name, float def) {
  const auto* a = Attr(n, name);
  return a ? a->f() : def;
}
std::string AttrStr(const NP& n, const std::string& name, const std::string& def) {
  const auto* a = Attr(n, name);
  return a ? a->s() : def;
}
std::optional<std::vector<int64_t>> AttrInts(const NP& n, const std::string& name) {
  const auto* a = Attr(n, name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
constexpr auto In = NodeInput;

/// A float32 attribute as the Python exporter writes it (0.1, 1e-05): 7 significant digits.
double Nice(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", v);
  return std::strtod(buf, nullptr);
}

Status Unsup(const std::string& why) { return Status::Unsupported(why); }

bool IsFloatType(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE || t == onnx::TensorProto::FLOAT16 ||
         t == onnx::TensorProto::BFLOAT16;
}

/// A floating-point initializer: a weight, never folded as a compile-time value.
bool IsFloatInit(Importer& im, const std::string& name) {
  int k = im.InitIndex(name);
  return k >= 0 && IsFloatType(im.graph().initializer(k).data_type());
}

Json ToJson(const std::vector<SymInt>& v) {
  Json j = Json::array();
  for (const SymInt& s : v) j.push_back(s.ToJson());
  return j;
}

/// Rank of |name| if known.
std::optional<int64_t> RankOf(Importer& im, const std::string& name) {
  auto s = im.ShapeOf(name);
  if (!s) return std::nullopt;
  return static_cast<int64_t>(s->size());
}

/// Fails unless the extra outputs k ≥ |from| of |n| are unused.
Status RequireUnused(Importer& im, const NP& n, int from) {
  for (int k = from; k < n.output_size(); ++k)
    if (!n.output(k).empty() && (!im.Consumers(n.output(k)).empty() || im.IsGraphOutput(n.output(k))))
      return Unsup("output " + std::to_string(k) + " (\"" + n.output(k) + "\") is used; memsim models only output 0");
  return Status::OK();
}

/// Axes from the attribute (older opsets) or the second input (newer).
Result<std::optional<std::vector<int64_t>>> AxesOf(Importer& im, const NP& n, int input) {
  if (auto a = AttrInts(n, "axes")) return std::optional<std::vector<int64_t>>(*a);
  std::string in = In(n, input);
  if (in.empty()) return std::optional<std::vector<int64_t>>();
  auto c = im.AsConst(in);
  auto ints = c ? c->ConstInts() : std::nullopt;
  if (!ints) return Unsup("axes input \"" + in + "\" is not a constant");
  return std::optional<std::vector<int64_t>>(*ints);
}

Status SymmetricPads(const NP& n, size_t rank, std::vector<int64_t>* pads) {
  std::string auto_pad = AttrStr(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return Unsup("auto_pad=" + auto_pad + " is not supported (only explicit pads)");
  auto p = AttrInts(n, "pads").value_or(std::vector<int64_t>(2 * rank, 0));
  if (auto_pad == "VALID") p.assign(2 * rank, 0);
  if (p.size() != 2 * rank) return Unsup("pads has " + std::to_string(p.size()) + " values for " + std::to_string(rank) + " spatial dims");
  pads->clear();
  for (size_t k = 0; k < rank; ++k) {
    if (p[k] != p[k + rank]) return Unsup("asymmetric pads (begin " + std::to_string(p[k]) + ", end " + std::to_string(p[k + rank]) + ") cannot be expressed in memsim");
    pads->push_back(p[k]);
  }
  return Status::OK();
}

// ---- shape-chain folding helpers ----

/// Elementwise integer arithmetic on constants (same size or one scalar).
std::optional<ConstValue> FoldArith(const std::string& op, const ConstValue& a, const ConstValue& b) {
  size_t n = std::max(a.numel(), b.numel());
  if ((a.numel() != n && a.numel() != 1) || (b.numel() != n && b.numel() != 1)) return std::nullopt;
  ConstValue r;
  r.shape = a.numel() >= b.numel() ? a.shape : b.shape;
  if (a.is_float || b.is_float) {
    auto get = [](const ConstValue& c, size_t i) -> std::optional<double> {
      size_t k = c.numel() == 1 ? 0 : i;
      if (c.is_float) return c.floats[k];
      if (!c.ints[k].is_const()) return std::nullopt;
      return static_cast<double>(c.ints[k].coeff);
    };
    r.is_float = true;
    r.elem_type = a.is_float ? a.elem_type : b.elem_type;
    for (size_t i = 0; i < n; ++i) {
      auto x = get(a, i), y = get(b, i);
      if (!x || !y) return std::nullopt;
      r.floats.push_back(op == "Add" ? *x + *y : op == "Sub" ? *x - *y : op == "Mul" ? *x * *y : *x / *y);
    }
    return r;
  }
  r.elem_type = a.elem_type;
  for (size_t i = 0; i < n; ++i) {
    const SymInt& x = a.ints[a.numel() == 1 ? 0 : i];
    const SymInt& y = b.ints[b.numel() == 1 ? 0 : i];
    std::optional<SymInt> z;
    if (op == "Mul") z = Mul(x, y);
    else if (op == "Div" && x.is_const() && y.is_const() && y.coeff != 0 &&
             !(y.coeff == -1 && x.coeff == INT64_MIN))
      z = SymInt::Const(x.coeff / y.coeff);  // ONNX integer Div truncates
    else if (op == "Div") z = Div(x, y);
    else z = AddSub(x, y, op == "Sub");
    if (!z) return std::nullopt;
    r.ints.push_back(*z);
  }
  return r;
}

ConstValue IntVector(const std::vector<SymInt>& v) {
  ConstValue c;
  c.elem_type = onnx::TensorProto::INT64;
  c.shape = {static_cast<int64_t>(v.size())};
  c.ints = v;
  return c;
}

// ---- rules ----


Status Unary(Importer& im, const NP& n, const std::string& op, Json attrs) {
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  im.Emit(op, {x}, std::move(attrs), {n.output(0)});
  return Status::OK();
}

Json InplaceFalse() { return Json{{"inplace", false}}; }

/// torch.onnx's exact GELU below opset 20: Div(x, √2) → Erf → Add 1 → Mul x → Mul 0.5.
bool TryGeluPattern(Importer& im, const NP& div, int i) {
  auto c = im.AsConst(In(div, 1));
  auto s = c ? c->Scalar() : std::nullopt;
  if (!s || std::abs(*s - std::sqrt(2.0)) > 1e-4) return false;
  const std::string x = In(div, 0);
  auto only = [&](const std::string& v, const char* type) -> int {
    const auto& cs = im.Consumers(v);
    if (cs.size() != 1 || im.IsGraphOutput(v) || im.node(cs[0]).op_type() != type) return -1;
    return cs[0];
  };
  auto other = [&](const NP& n, const std::string& v) { return In(n, 0) == v ? In(n, 1) : In(n, 0); };
  auto is_scalar = [&](const std::string& v, double want) {
    // The constant may come from a Constant node placed after the Div (torch.onnx puts each
    // Constant right before its user), so read such a node directly.
    auto k = im.AsConst(v);
    if (int p = im.Producer(v); !k && p >= 0 && im.node(p).op_type() == "Constant" && Attr(im.node(p), "value"))
      k = ReadTensor(Attr(im.node(p), "value")->t(), 1);
    auto sc = k ? k->Scalar() : std::nullopt;
    return sc && std::abs(*sc - want) < 1e-6;
  };
  int erf = only(div.output(0), "Erf");
  if (erf < 0) return false;
  int add = only(im.node(erf).output(0), "Add");
  if (add < 0 || !is_scalar(other(im.node(add), im.node(erf).output(0)), 1.0)) return false;
  int mul1 = only(im.node(add).output(0), "Mul");
  if (mul1 < 0) return false;
  const NP& m1 = im.node(mul1);
  std::string m1_other = other(m1, im.node(add).output(0));
  std::string result;
  int mul2 = -1;
  if (m1_other == x) {  // x * (1 + erf) then * 0.5
    mul2 = only(m1.output(0), "Mul");
    if (mul2 < 0 || !is_scalar(other(im.node(mul2), m1.output(0)), 0.5)) return false;
    result = im.node(mul2).output(0);
  } else {
    return false;
  }
  auto xt = im.AsTensor(x);
  if (!xt.ok()) return false;
  for (int k : {erf, add, mul1, mul2}) im.MarkFused(k);
  im.Emit("gelu", {*xt}, Json{{"approximate", "none"}}, {result});
  (void)i;
  return true;
}

Status Binary(Importer& im, const NP& n, int i) {
  const std::string& op = n.op_type();
  if (op == "Div" && TryGeluPattern(im, n, i)) return Status::OK();
  if (op == "Mul" && TryGeluTanhPattern(im, n, i)) return Status::OK();
  auto a = im.AsConst(In(n, 0)), b = im.AsConst(In(n, 1));
  const std::string memsim_op = op == "Add" ? "add" : op == "Sub" ? "sub" : op == "Mul" ? "mul" : "div";
  if (a && b) {
    auto r = FoldArith(op, *a, *b);
    if (!r) return Unsup("cannot fold " + op + " of two constants");
    im.BindConst(n.output(0), *r);
    return Status::OK();
  }
  auto scalar_json = [](const ConstValue& c) -> Json {
    if (c.is_float) return Nice(c.floats[0]);
    return c.ints[0].coeff;
  };
  auto scalar_ok = [](const std::optional<ConstValue>& c) {
    return c && c->numel() == 1 && (c->is_float || c->ints[0].is_const());
  };
  if (scalar_ok(b)) {
    MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
    im.Emit(memsim_op, {x}, Json{{"scalar", scalar_json(*b)}}, {n.output(0)});
    return Status::OK();
  }
  if (scalar_ok(a)) {
    MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 1)));
    Json attrs{{"scalar", scalar_json(*a)}};
    if (op == "Div") return Unsup("scalar / tensor has no memsim op");
    if (op == "Sub") attrs["reverse"] = true;
    im.Emit(memsim_op, {x}, attrs, {n.output(0)});
    return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  MEMSIM_ASSIGN_OR_RETURN(std::string y, im.AsTensor(In(n, 1)));
  im.Emit(memsim_op, {x, y}, Json::object(), {n.output(0)});
  return Status::OK();
}

Status Conv(Importer& im, const NP& n, int) {
  auto ks = AttrInts(n, "kernel_shape");
  size_t rank = 0;
  if (ks) rank = ks->size();
  else if (auto w = im.ShapeOf(In(n, 1)); w && w->size() >= 3) rank = w->size() - 2;
  if (rank != 1 && rank != 2) return Unsup("Conv with " + std::to_string(rank) + " spatial dims (memsim has conv1d, conv2d)");
  std::vector<int64_t> pads;
  MEMSIM_RETURN_IF_ERROR(SymmetricPads(n, rank, &pads));
  Json attrs;
  attrs["stride"] = AttrInts(n, "strides").value_or(std::vector<int64_t>(rank, 1));
  attrs["padding"] = pads;
  attrs["dilation"] = AttrInts(n, "dilations").value_or(std::vector<int64_t>(rank, 1));
  attrs["groups"] = AttrInt(n, "group", 1);
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  MEMSIM_ASSIGN_OR_RETURN(std::string w, im.AsTensor(In(n, 1)));
  std::vector<std::string> ins{x, w};
  if (!In(n, 2).empty()) {
    MEMSIM_ASSIGN_OR_RETURN(std::string b, im.AsTensor(In(n, 2)));
    ins.push_back(b);
  }
  im.Emit(rank == 1 ? "conv1d" : "conv2d", ins, attrs, {n.output(0)});
  return Status::OK();
}

/// Linear from A and the weight operand |w| of a MatMul/Gemm, or nullopt if |w| is not a
/// 2-D initializer (possibly behind Transpose). |stored_in_out|: w's layout is [in, out].
Result<std::optional<std::string>> LinearWeight(Importer& im, const std::string& w, bool stored_in_out) {
  const Value* v = im.Find(w);
  if (!v) return std::optional<std::string>();
  if (v->kind == Value::Kind::kInit) {
    auto dims = im.InitDims(w);
    if (!dims || dims->size() != 2) return std::optional<std::string>();
    if (!stored_in_out) {
      MEMSIM_ASSIGN_OR_RETURN(std::string t, im.AsTensor(w));
      return std::optional<std::string>(t);
    }
    MEMSIM_ASSIGN_OR_RETURN(std::string t, im.AsTransposedWeight(w));
    return std::optional<std::string>(t);
  }
  if (v->kind == Value::Kind::kTransposedInit && stored_in_out) {
    // Transpose(W [out,in]) feeding MatMul: W itself is the linear weight.
    const std::string name = im.graph().initializer(v->init).name();
    MEMSIM_ASSIGN_OR_RETURN(std::string t, im.AsTensor(name));
    return std::optional<std::string>(t);
  }
  return std::optional<std::string>();
}

/// A 1-D initializer bias that the only consumer of |y| (an Add) adds, or -1.
int BiasAdd(Importer& im, const std::string& y, std::string* bias) {
  const auto& cs = im.Consumers(y);
  if (cs.size() != 1 || im.IsGraphOutput(y)) return -1;
  const NP& add = im.node(cs[0]);
  if (add.op_type() != "Add") return -1;
  std::string other = In(add, 0) == y ? In(add, 1) : In(add, 0);
  auto dims = im.InitDims(other);
  if (!dims || dims->size() != 1 || (*dims)[0] <= 1) return -1;
  *bias = other;
  return cs[0];
}

Status MatMul(Importer& im, const NP& n, int) {
  MEMSIM_ASSIGN_OR_RETURN(auto w, LinearWeight(im, In(n, 1), true));
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  if (!w) {
    MEMSIM_ASSIGN_OR_RETURN(std::string y, im.AsTensor(In(n, 1)));
    im.Emit("matmul", {x, y}, Json::object(), {n.output(0)});
    return Status::OK();
  }
  std::string bias;
  int add = BiasAdd(im, n.output(0), &bias);
  if (add >= 0) {
    MEMSIM_ASSIGN_OR_RETURN(std::string b, im.AsTensor(bias));
    im.MarkFused(add);
    im.Emit("linear", {x, *w, b}, Json::object(), {im.node(add).output(0)});
  } else {
    im.Emit("linear", {x, *w}, Json::object(), {n.output(0)});
  }
  return Status::OK();
}

Status Gemm(Importer& im, const NP& n, int) {
  if (AttrInt(n, "transA", 0) != 0) return Unsup("Gemm with transA=1");
  if (AttrFloat(n, "alpha", 1.f) != 1.f || AttrFloat(n, "beta", 1.f) != 1.f) return Unsup("Gemm with alpha or beta != 1");
  const bool trans_b = AttrInt(n, "transB", 0) != 0;
  MEMSIM_ASSIGN_OR_RETURN(auto w, LinearWeight(im, In(n, 1), !trans_b));
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  const std::string c = In(n, 2);
  auto cdims = c.empty() ? std::nullopt : im.InitDims(c);
  const bool c_is_bias = cdims && cdims->size() == 1;
  std::string out;
  if (w) {
    std::vector<std::string> ins{x, *w};
    if (c_is_bias) {
      MEMSIM_ASSIGN_OR_RETURN(std::string b, im.AsTensor(c));
      ins.push_back(b);
    }
    bool last = c.empty() || c_is_bias;
    out = im.Emit("linear", ins, Json::object(), {last ? n.output(0) : ""})[0];
    if (last) return Status::OK();
  } else {
    MEMSIM_ASSIGN_OR_RETURN(std::string y, im.AsTensor(In(n, 1)));
    if (trans_b) y = im.Emit("transpose", {y}, Json{{"dim0", 0}, {"dim1", 1}}, {""})[0];
    out = im.Emit("matmul", {x, y}, Json::object(), {c.empty() ? n.output(0) : ""})[0];
    if (c.empty()) return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string ct, im.AsTensor(c));
  im.Emit("add", {out, ct}, Json::object(), {n.output(0)});
  return Status::OK();
}

Status Clip(Importer& im, const NP& n, int) {
  std::optional<double> lo, hi;
  if (Attr(n, "min")) lo = AttrFloat(n, "min", 0);
  if (Attr(n, "max")) hi = AttrFloat(n, "max", 0);
  for (int k : {1, 2}) {
    if (In(n, k).empty()) continue;
    auto c = im.AsConst(In(n, k));
    auto s = c ? c->Scalar() : std::nullopt;
    if (!s) return Unsup("Clip bound \"" + In(n, k) + "\" is not a constant");
    (k == 1 ? lo : hi) = *s;
  }
  if (lo && *lo == 0 && hi && *hi == 6) return Unary(im, n, "relu6", InplaceFalse());
  if (lo && *lo == 0 && !hi) return Unary(im, n, "relu", InplaceFalse());
  return Unsup("Clip(" + (lo ? std::to_string(*lo) : "-inf") + ", " + (hi ? std::to_string(*hi) : "inf") +
               ") is neither relu6 (0, 6) nor relu (0, inf)");
}

Status Softmax(Importer& im, const NP& n, int) {
  int64_t axis = AttrInt(n, "axis", im.opset() >= 13 ? -1 : 1);
  if (im.opset() < 13) {
    auto r = RankOf(im, In(n, 0));
    if (!r || (axis != -1 && axis != *r - 1)) return Unsup("opset < 13 softmax over a non-last axis flattens the input");
  }
  return Unary(im, n, n.op_type() == "Softmax" ? "softmax" : "log_softmax", Json{{"dim", axis}});
}

Status Dropout(Importer& im, const NP& n, int) {
  double p = AttrFloat(n, "ratio", 0.5f);
  bool training = im.opset() < 12 ? n.output_size() > 1 : false;
  if (!In(n, 1).empty()) {
    auto c = im.AsConst(In(n, 1));
    auto s = c ? c->Scalar() : std::nullopt;
    if (!s) return Unsup("Dropout ratio is not a constant");
    p = *s;
  }
  if (!In(n, 2).empty()) {
    auto c = im.AsConst(In(n, 2));
    auto s = c ? c->Scalar() : std::nullopt;
    if (!s) return Unsup("Dropout training_mode is not a constant");
    training = *s != 0;
  }
  MEMSIM_RETURN_IF_ERROR(RequireUnused(im, n, 1));
  return Unary(im, n, "dropout", Json{{"p", Nice(p)}, {"inplace", false}, {"training", training}});
}

Status BatchNorm(Importer& im, const NP& n, int) {
  bool training = im.opset() >= 14 ? AttrInt(n, "training_mode", 0) != 0 : n.output_size() > 1;
  MEMSIM_RETURN_IF_ERROR(RequireUnused(im, n, 1));
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  MEMSIM_ASSIGN_OR_RETURN(std::string w, im.AsTensor(In(n, 1)));
  MEMSIM_ASSIGN_OR_RETURN(std::string b, im.AsTensor(In(n, 2)));
  MEMSIM_ASSIGN_OR_RETURN(std::string mean, im.AsTensor(In(n, 3), Role::kBuffer));
  MEMSIM_ASSIGN_OR_RETURN(std::string var, im.AsTensor(In(n, 4), Role::kBuffer));
  // torch.onnx drops the unused num_batches_tracked buffer (int64 scalar) of a PyTorch
  // BatchNorm; put it back after running_var when the names follow PyTorch's.
  static const std::string kVar = ".running_var";
  if (var.size() > kVar.size() && var.compare(var.size() - kVar.size(), kVar.size(), kVar) == 0 &&
      im.InitIndex(In(n, 4)) >= 0) {
    std::string nbt = var.substr(0, var.size() - kVar.size()) + ".num_batches_tracked";
    if (im.InitIndex(nbt) < 0 && !im.Find(nbt))
      im.AddBufferAfterInit(im.InitIndex(In(n, 4)), Json{{"name", nbt}, {"shape", Json::array()}, {"dtype", "int64"}});
  }
  Json attrs{{"momentum", Nice(1.0 - AttrFloat(n, "momentum", 0.9f))}, {"eps", Nice(AttrFloat(n, "epsilon", 1e-5f))},
             {"training", training}};
  im.Emit("batch_norm", {x, w, b, mean, var}, attrs, {n.output(0)});
  return Status::OK();
}

Status LayerNorm(Importer& im, const NP& n, int) {
  MEMSIM_RETURN_IF_ERROR(RequireUnused(im, n, 1));
  int64_t axis = AttrInt(n, "axis", -1);
  Json shape = Json::array();
  if (auto d = im.ShapeOf(In(n, 1)); d && axis == -static_cast<int64_t>(d->size())) {
    for (const auto& s : *d) shape.push_back(s->ToJson());
  } else if (auto xs = im.ShapeOf(In(n, 0))) {
    int64_t r = static_cast<int64_t>(xs->size());
    for (int64_t k = axis < 0 ? axis + r : axis; k < r; ++k) {
      if (!(*xs)[k]) return Unsup("normalized dimension " + std::to_string(k) + " has no known size");
      shape.push_back((*xs)[k]->ToJson());
    }
  } else {
    return Unsup("cannot tell the normalized shape (unknown input shape)");
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  std::vector<std::string> ins{x};
  for (int k : {1, 2}) {
    if (In(n, k).empty()) break;
    MEMSIM_ASSIGN_OR_RETURN(std::string t, im.AsTensor(In(n, k)));
    ins.push_back(t);
  }
  im.Emit("layer_norm", ins, Json{{"normalized_shape", shape}, {"eps", Nice(AttrFloat(n, "epsilon", 1e-5f))}},
          {n.output(0)});
  return Status::OK();
}

Status InstanceNorm(Importer& im, const NP& n, int) {
  auto d = im.ShapeOf(In(n, 1));
  if (!d || d->size() != 1 || !(*d)[0] || !(*d)[0]->is_const()) return Unsup("scale has no known [C] shape");
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  MEMSIM_ASSIGN_OR_RETURN(std::string w, im.AsTensor(In(n, 1)));
  MEMSIM_ASSIGN_OR_RETURN(std::string b, im.AsTensor(In(n, 2)));
  im.Emit("group_norm", {x, w, b}, Json{{"num_groups", (*d)[0]->coeff}, {"eps", Nice(AttrFloat(n, "epsilon", 1e-5f))}},
          {n.output(0)});
  return Status::OK();
}

Status Pool(Importer& im, const NP& n, int) {
  auto ks = AttrInts(n, "kernel_shape");
  if (!ks || ks->size() != 2) return Unsup("only 2-D pooling is supported (memsim has max_pool2d, avg_pool2d)");
  std::vector<int64_t> pads;
  MEMSIM_RETURN_IF_ERROR(SymmetricPads(n, 2, &pads));
  MEMSIM_RETURN_IF_ERROR(RequireUnused(im, n, 1));
  Json attrs;
  attrs["kernel_size"] = *ks;
  attrs["stride"] = AttrInts(n, "strides").value_or(std::vector<int64_t>{1, 1});
  attrs["padding"] = pads;
  if (n.op_type() == "MaxPool") {
    attrs["dilation"] = AttrInts(n, "dilations").value_or(std::vector<int64_t>{1, 1});
    attrs["ceil_mode"] = AttrInt(n, "ceil_mode", 0) != 0;
    return Unary(im, n, "max_pool2d", attrs);
  }
  attrs["ceil_mode"] = AttrInt(n, "ceil_mode", 0) != 0;
  attrs["count_include_pad"] = AttrInt(n, "count_include_pad", 0) != 0;
  return Unary(im, n, "avg_pool2d", attrs);
}

Status GlobalAvgPool(Importer& im, const NP& n, int) {
  auto r = RankOf(im, In(n, 0));
  if (r && *r != 4) return Unsup("GlobalAveragePool over a rank-" + std::to_string(*r) + " input (only 4-D)");
  return Unary(im, n, "adaptive_avg_pool2d", Json{{"output_size", {1, 1}}});
}

Status Flatten(Importer& im, const NP& n, int) {
  int64_t axis = AttrInt(n, "axis", 1);
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  if (axis == 1) {
    im.Emit("flatten", {x}, Json{{"start_dim", 1}, {"end_dim", -1}}, {n.output(0)});
  } else if (axis == 0) {
    im.Emit("reshape", {x}, Json{{"shape", {1, -1}}}, {n.output(0)});
  } else {
    auto r = RankOf(im, In(n, 0));
    if (!r) return Unsup("Flatten(axis=" + std::to_string(axis) + ") of an input of unknown rank");
    if (axis < 0) axis += *r;
    std::string t = im.Emit("flatten", {x}, Json{{"start_dim", 0}, {"end_dim", axis - 1}}, {""})[0];
    im.Emit("flatten", {t}, Json{{"start_dim", 1}, {"end_dim", -1}}, {n.output(0)});
  }
  return Status::OK();
}

Status Reshape(Importer& im, const NP& n, int) {
  auto c = im.AsConst(In(n, 1));
  if (!c || c->is_float) return Unsup("the target shape \"" + In(n, 1) + "\" is not a constant or a Shape chain memsim can evaluate");
  std::vector<SymInt> shape = c->ints;
  if (AttrInt(n, "allowzero", 0) == 0) {
    for (size_t k = 0; k < shape.size(); ++k) {
      if (!(shape[k].is_const() && shape[k].coeff == 0)) continue;
      auto xs = im.ShapeOf(In(n, 0));
      if (!xs || k >= xs->size() || !(*xs)[k]) return Unsup("shape entry 0 (copy dim " + std::to_string(k) + ") of an input of unknown shape");
      shape[k] = *(*xs)[k];
    }
  }
  if (auto xc = im.AsConst(In(n, 0)); xc && !IsFloatInit(im, In(n, 0))) {
    std::vector<int64_t> dims;
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (!shape[k].is_const()) return Unsup("reshaping a constant to a symbolic shape");
      if (shape[k].coeff == -1) infer = static_cast<int64_t>(k);
      else if (__builtin_mul_overflow(known, shape[k].coeff, &known))
        return Unsup("reshape target shape overflows 64 bits");
      dims.push_back(shape[k].coeff);
    }
    if (infer >= 0) dims[infer] = known ? static_cast<int64_t>(xc->numel()) / known : 0;
    xc->shape = dims;
    im.BindConst(n.output(0), *xc);
    return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  im.Emit("reshape", {x}, Json{{"shape", ToJson(shape)}}, {n.output(0)});
  return Status::OK();
}

Status ShapeOp(Importer& im, const NP& n, int) {
  auto s = im.ShapeOf(In(n, 0));
  if (!s) return Unsup("the shape of \"" + In(n, 0) + "\" is unknown");
  int64_t r = static_cast<int64_t>(s->size());
  int64_t start = AttrInt(n, "start", 0), end = AttrInt(n, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<SymInt> v;
  for (int64_t k = start; k < end; ++k) {
    if (!(*s)[k]) return Unsup("dimension " + std::to_string(k) + " of \"" + In(n, 0) + "\" is neither a number nor a known symbol");
    v.push_back(*(*s)[k]);
  }
  im.BindConst(n.output(0), IntVector(v));
  return Status::OK();
}

Status Constant(Importer& im, const NP& n, int) {
  ConstValue c;
  if (const auto* a = Attr(n, "value")) {
    // Too large to be a shape or a scalar (a mask buffer torch.onnx inlined): a buffer as is.
    std::vector<int64_t> dims(a->t().dims().begin(), a->t().dims().end());
    if (NumElements(dims) > 4096) return im.BindConstBuffer(n.output(0), dims, a->t().data_type());
    auto v = ReadTensor(a->t(), 4096);
    if (!v) return Unsup("Constant value is too large or of an unsupported element type");
    c = *v;
  } else if (const auto* f = Attr(n, "value_float")) {
    c.elem_type = onnx::TensorProto::FLOAT;
    c.is_float = true;
    c.floats = {f->f()};
  } else if (const auto* i = Attr(n, "value_int")) {
    c.elem_type = onnx::TensorProto::INT64;
    c.ints = {SymInt::Const(i->i())};
  } else if (const auto* is = Attr(n, "value_ints")) {
    std::vector<SymInt> v;
    for (int64_t x : is->ints()) v.push_back(SymInt::Const(x));
    c = IntVector(v);
  } else {
    return Unsup("Constant without value, value_float, value_int or value_ints");
  }
  im.BindConst(n.output(0), c);
  return Status::OK();
}

Status Gather(Importer& im, const NP& n, int) {
  int64_t axis = AttrInt(n, "axis", 0);
  auto data = im.AsConst(In(n, 0));
  auto idx = im.AsConst(In(n, 1));
  auto idx_ints = idx ? idx->ConstInts() : std::nullopt;
  if (data && !data->is_float && data->shape.size() <= 1 && idx_ints && !IsFloatInit(im, In(n, 0))) {
    std::vector<SymInt> v;
    for (int64_t k : *idx_ints) {
      if (k < 0) k += static_cast<int64_t>(data->numel());
      if (k < 0 || k >= static_cast<int64_t>(data->numel())) return Unsup("Gather index out of range");
      v.push_back(data->ints[k]);
    }
    ConstValue r = IntVector(v);
    if (idx->shape.empty()) r.shape.clear();
    im.BindConst(n.output(0), r);
    return Status::OK();
  }
  auto wdims = im.InitDims(In(n, 0));
  if (wdims && wdims->size() == 2 && axis == 0 && !idx) {
    MEMSIM_ASSIGN_OR_RETURN(std::string ids, im.AsTensor(In(n, 1)));
    MEMSIM_ASSIGN_OR_RETURN(std::string w, im.AsTensor(In(n, 0)));
    im.Emit("embedding", {ids, w}, Json::object(), {n.output(0)});
    return Status::OK();
  }
  if (idx_ints && idx->shape.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
    im.Emit("select", {x}, Json{{"dim", axis}, {"index", (*idx_ints)[0]}}, {n.output(0)});
    return Status::OK();
  }
  if (idx_ints && idx->shape.size() == 1) {
    MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
    MEMSIM_ASSIGN_OR_RETURN(std::string ix, im.AsTensor(In(n, 1), Role::kBuffer));
    im.Emit("index_select", {x, ix}, Json{{"dim", axis}}, {n.output(0)});
    return Status::OK();
  }
  return Unsup("Gather is neither an embedding (2-D initializer, axis 0), a constant index nor a shape computation");
}

Status Unsqueeze(Importer& im, const NP& n, int) {
  MEMSIM_ASSIGN_OR_RETURN(auto axes, AxesOf(im, n, 1));
  if (!axes || axes->empty()) return Unsup("Unsqueeze without axes");
  auto r = RankOf(im, In(n, 0));
  std::vector<int64_t> ax = *axes;
  int64_t out_rank = (r ? *r : 0) + static_cast<int64_t>(ax.size());
  for (int64_t& a : ax) {
    if (a < 0 && !r) return Unsup("negative Unsqueeze axis on an input of unknown rank");
    if (a < 0) a += out_rank;
    // ONNX: each axis in [-out_rank, out_rank) (onnx_import_fuzz: an axis of -3e8 indexed before
    // the shape's start).
    if (a < 0 || (r && a >= out_rank))
      return Unsup("Unsqueeze axis out of range for the output rank " + std::to_string(out_rank));
  }
  std::sort(ax.begin(), ax.end());
  if (std::adjacent_find(ax.begin(), ax.end()) != ax.end()) return Unsup("Unsqueeze with a repeated axis");
  if (auto c = im.AsConst(In(n, 0)); c && !IsFloatInit(im, In(n, 0))) {
    for (int64_t a : ax) c->shape.insert(c->shape.begin() + std::min<int64_t>(a, c->shape.size()), 1);
    im.BindConst(n.output(0), *c);
    return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  for (size_t k = 0; k < ax.size(); ++k)
    x = im.Emit("unsqueeze", {x}, Json{{"dim", ax[k]}}, {k + 1 == ax.size() ? n.output(0) : ""})[0];
  return Status::OK();
}

Status Squeeze(Importer& im, const NP& n, int) {
  MEMSIM_ASSIGN_OR_RETURN(auto axes, AxesOf(im, n, 1));
  auto s = im.ShapeOf(In(n, 0));
  std::vector<int64_t> ax;
  if (axes) {
    ax = *axes;
  } else {
    if (!s) return Unsup("Squeeze without axes of an input of unknown shape");
    for (size_t k = 0; k < s->size(); ++k)
      if ((*s)[k] && *(*s)[k] == SymInt::Const(1)) ax.push_back(static_cast<int64_t>(k));
  }
  for (int64_t& a : ax) {
    if (a < 0 && !s) {
      if (ax.size() > 1) return Unsup("negative Squeeze axes on an input of unknown rank");
      continue;
    }
    if (a < 0) a += static_cast<int64_t>(s->size());
  }
  std::sort(ax.rbegin(), ax.rend());
  if (auto c = im.AsConst(In(n, 0)); c && !IsFloatInit(im, In(n, 0))) {
    for (int64_t a : ax)
      if (a >= 0 && a < static_cast<int64_t>(c->shape.size())) c->shape.erase(c->shape.begin() + a);
    im.BindConst(n.output(0), *c);
    return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  if (ax.empty()) {
    im.BindAlias(n.output(0), In(n, 0));
    return Status::OK();
  }
  for (size_t k = 0; k < ax.size(); ++k)
    x = im.Emit("squeeze", {x}, Json{{"dim", ax[k]}}, {k + 1 == ax.size() ? n.output(0) : ""})[0];
  return Status::OK();
}

Status Concat(Importer& im, const NP& n, int) {
  int64_t axis = AttrInt(n, "axis", 0);
  bool all_const = true;
  std::vector<SymInt> folded;
  for (const std::string& in : n.input()) {
    auto c = im.AsConst(in);
    if (!c || c->is_float || c->shape.size() != 1 || IsFloatInit(im, in)) {
      all_const = false;
      break;
    }
    folded.insert(folded.end(), c->ints.begin(), c->ints.end());
  }
  if (all_const) {
    im.BindConst(n.output(0), IntVector(folded));
    return Status::OK();
  }
  std::vector<std::string> ins;
  for (const std::string& in : n.input()) {
    MEMSIM_ASSIGN_OR_RETURN(std::string t, im.AsTensor(in));
    ins.push_back(t);
  }
  im.Emit("cat", ins, Json{{"dim", axis}}, {n.output(0)});
  return Status::OK();
}

Status Split(Importer& im, const NP& n, int) {
  int64_t axis = AttrInt(n, "axis", 0);
  std::optional<std::vector<int64_t>> sizes = AttrInts(n, "split");
  if (!sizes && !In(n, 1).empty()) {
    auto c = im.AsConst(In(n, 1));
    sizes = c ? c->ConstInts() : std::nullopt;
    if (!sizes) return Unsup("split sizes \"" + In(n, 1) + "\" are not constant");
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  std::vector<std::string> outs(n.output().begin(), n.output().end());
  if (sizes) im.Emit("split", {x}, Json{{"sections", *sizes}, {"dim", axis}}, outs);
  else im.Emit("chunk", {x}, Json{{"chunks", n.output_size()}, {"dim", axis}}, outs);
  return Status::OK();
}

Status Slice(Importer& im, const NP& n, int) {
  std::vector<SymInt> starts, ends;
  std::vector<int64_t> axes, steps;
  if (im.opset() < 10) {
    for (int64_t v : AttrInts(n, "starts").value_or(std::vector<int64_t>{})) starts.push_back(SymInt::Const(v));
    for (int64_t v : AttrInts(n, "ends").value_or(std::vector<int64_t>{})) ends.push_back(SymInt::Const(v));
    axes = AttrInts(n, "axes").value_or(std::vector<int64_t>{});
  } else {
    for (int k = 1; k <= 4; ++k) {
      if (In(n, k).empty()) continue;
      auto c = im.AsConst(In(n, k));
      if (!c || c->is_float) return Unsup("Slice input " + std::to_string(k) + " (\"" + In(n, k) + "\") is not constant");
      if (k == 1) starts = c->ints;
      if (k == 2) ends = c->ints;
      if (k >= 3) {
        auto ints = c->ConstInts();
        if (!ints) return Unsup("symbolic Slice axes or steps");
        (k == 3 ? axes : steps) = *ints;
      }
    }
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return Unsup("Slice starts/ends/axes/steps differ in length");
  auto big = [](const SymInt& s) { return s.is_const() && s.coeff >= std::numeric_limits<int32_t>::max(); };
  if (auto c = im.AsConst(In(n, 0)); c && !c->is_float && c->shape.size() == 1 && !IsFloatInit(im, In(n, 0))) {
    // Shape-chain slice of a 1-D integer vector.
    int64_t len = static_cast<int64_t>(c->numel());
    auto st = starts[0].is_const() ? std::optional<int64_t>(starts[0].coeff) : std::nullopt;
    auto en = ends[0].is_const() ? std::optional<int64_t>(ends[0].coeff) : std::nullopt;
    if (!st || !en || steps[0] != 1) return Unsup("symbolic or strided Slice of a shape");
    int64_t b = *st < 0 ? *st + len : *st, e = *en < 0 ? *en + len : std::min(*en, len);
    std::vector<SymInt> v;
    for (int64_t k = std::max<int64_t>(b, 0); k < e; ++k) v.push_back(c->ints[k]);
    im.BindConst(n.output(0), IntVector(v));
    return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::string x, im.AsTensor(In(n, 0)));
  for (size_t k = 0; k < axes.size(); ++k) {
    if (steps[k] <= 0) return Unsup("Slice with a non-positive step");
    Json attrs{{"dim", axes[k]}, {"start", starts[k].ToJson()}, {"end", big(ends[k]) ? Json() : ends[k].ToJson()},
               {"step", steps[k]}};
    x = im.Emit("slice", {x}, attrs, {k + 1 == axes.size() ? n.output(0) : ""})[0];
  }
  return Status::OK();
}

Status Cast(Importer& im, const NP& n, int) {
  int32_t to = static_cast<int32_t>(AttrInt(n, "to", 0));
  if (auto c = im.AsConst(In(n, 0)); c && !IsFloatInit(im, In(n, 0))) {
    if (IsFloatType(to) && !c->is_float) {
      auto ints = c->ConstInts();
      if (!ints) return Unsup("Cast of a symbolic size to float");
      c->is_float = true;
      for (int64_t v : *ints) c->floats.push_back(static_cast<double>(v));
      c->ints.clear();
    } else if (!IsFloatType(to) && c->is_float) {
      for (double v : c->floats) {
        // Converting a double beyond int64 (or NaN) is undefined: refused, not wrapped.
        if (!(v >= -0x1p63 && v < 0x1p63))
          return Unsup("Cast of a float constant beyond the int64 range to an integer");
        c->ints.push_back(SymInt::Const(static_cast<int64_t>(v)));
      }
      c->floats.clear();
      c->is_float = false;
    }
    c->elem_type = to;
    im.BindConst(n.output(0), *c);
    return Status::OK();
  }
  auto from = im.TypeOf(In(n, 0));
  if (from && *from == to) {
    im.BindAlias(n.output(0), In(n, 0));
    return Status::OK();
  }
  return Unsup("Cast of a tensor to another dtype (memsim has no cast op)");
}

Status Reduce(Importer& im, const NP& n, int) {
  MEMSIM_ASSIGN_OR_RETURN(auto axes, AxesOf(im, n, 1));
  bool keep = AttrInt(n, "keepdims", 1) != 0;
  if ((!axes || axes->empty()) && AttrInt(n, "noop_with_empty_axes", 0) != 0) {
    im.BindAlias(n.output(0), In(n, 0));
    return Status::OK();
  }
  Json dim = axes && !axes->empty() ? Json(*axes) : Json();
  return Unary(im, n, n.op_type() == "ReduceMean" ? "mean" : "sum", Json{{"dim", dim}, {"keepdim", keep}});
}

Status Transpose(Importer& im, const NP& n, int) {
  auto perm = AttrInts(n, "perm");
  auto dims = im.InitDims(In(n, 0));
  if (dims && dims->size() == 2 && (!perm || *perm == std::vector<int64_t>{1, 0})) {
    im.BindTransposedInit(n.output(0), im.InitIndex(In(n, 0)));
    return Status::OK();
  }
  if (!perm) {
    auto r = RankOf(im, In(n, 0));
    if (!r) return Unsup("Transpose without perm of an input of unknown rank");
    perm.emplace();
    for (int64_t k = *r - 1; k >= 0; --k) perm->push_back(k);
  }
  return Unary(im, n, "permute", Json{{"dims", *perm}});
}

Status Expand(Importer& im, const NP& n, int) {
  auto c = im.AsConst(In(n, 1));
  if (!c || c->is_float) return Unsup("Expand shape is not constant");
  std::vector<SymInt> sizes = c->ints;
  auto xs = im.ShapeOf(In(n, 0));
  if (xs && sizes.size() < xs->size()) return Unsup("Expand to a lower rank (ONNX broadcasting) has no memsim op");
  for (size_t k = 0; k < sizes.size(); ++k) {
    size_t off = sizes.size() - (xs ? xs->size() : 0);
    if (sizes[k] == SymInt::Const(1) && xs && k >= off && (*xs)[k - off] && !(*(*xs)[k - off] == SymInt::Const(1)))
      sizes[k] = SymInt::Const(-1);
  }
  return Unary(im, n, "expand", Json{{"sizes", ToJson(sizes)}});
}

/// Range(0, n, 1) → arange (n may be symbolic, e.g. a sequence length read by Shape).
Status Range(Importer& im, const NP& n, int) {
  auto start = im.AsConst(In(n, 0)), limit = im.AsConst(In(n, 1)), delta = im.AsConst(In(n, 2));
  if (!start || !limit || !delta || start->is_float || limit->is_float || limit->numel() != 1 ||
      start->Scalar() != std::optional<double>(0) || delta->Scalar() != std::optional<double>(1))
    return Unsup("only Range(0, n, 1) with constant integer n (→ arange)");
  auto dt = DtypeName(limit->elem_type);
  im.Emit("arange", {}, Json{{"end", limit->ints[0].ToJson()}, {"dtype", dt.value_or("int64")}}, {n.output(0)});
  return Status::OK();
}

const std::map<std::string, Rule>& Rules() {
  static const std::map<std::string, Rule> kRules = {
      {"Conv", Conv},
      {"Gemm", Gemm},
      {"MatMul", MatMul},
      {"Add", Binary},
      {"Sub", Binary},
      {"Mul", Binary},
      {"Div", Binary},
      {"Relu", [](Importer& im, const NP& n, int) { return Unary(im, n, "relu", InplaceFalse()); }},
      {"Sigmoid", [](Importer& im, const NP& n, int) { return Unary(im, n, "sigmoid", Json::object()); }},
      {"Tanh", [](Importer& im, const NP& n, int) { return Unary(im, n, "tanh", Json::object()); }},
      {"LeakyRelu",
       [](Importer& im, const NP& n, int) {
         return Unary(im, n, "leaky_relu", Json{{"negative_slope", Nice(AttrFloat(n, "alpha", 0.01f))}, {"inplace", false}});
       }},
      {"HardSwish", [](Importer& im, const NP& n, int) { return Unary(im, n, "hardswish", InplaceFalse()); }},
      {"HardSigmoid",
       [](Importer& im, const NP& n, int) {
         if (std::abs(AttrFloat(n, "alpha", 0.2f) - 1.0 / 6) > 1e-6 || AttrFloat(n, "beta", 0.5f) != 0.5f)
           return Unsup("HardSigmoid with alpha != 1/6 or beta != 0.5 is not torch's hardsigmoid");
         return Unary(im, n, "hardsigmoid", InplaceFalse());
       }},
      {"Gelu",
       [](Importer& im, const NP& n, int) {
         return Unary(im, n, "gelu", Json{{"approximate", AttrStr(n, "approximate", "none")}});
       }},
      {"Clip", Clip},
      {"Softmax", Softmax},
      {"LogSoftmax", Softmax},
      {"Dropout", Dropout},
      {"BatchNormalization", BatchNorm},
      {"LayerNormalization", LayerNorm},
      {"InstanceNormalization", InstanceNorm},
      {"MaxPool", Pool},
      {"AveragePool", Pool},
      {"GlobalAveragePool", GlobalAvgPool},
      {"Flatten", Flatten},
      {"Reshape", Reshape},
      {"Shape", ShapeOp},
      {"Constant", Constant},
      {"Gather", Gather},
      {"Unsqueeze", Unsqueeze},
      {"Squeeze", Squeeze},
      {"Concat", Concat},
      {"Split", Split},
      {"Slice", Slice},
      {"Cast", Cast},
      {"ReduceMean", Reduce},
      {"ReduceSum", Reduce},
      {"Transpose", Transpose},
      {"Expand", Expand},
      {"Range", Range},
      {"Identity", [](Importer& im, const NP& n, int) {
         im.BindAlias(n.output(0), In(n, 0));
         return Status::OK();
       }},
  };
  return kRules;
}

}  // namespace

Status ConvertNodeRule(Importer& im, int i) {
  const NP& n = im.node(i);
  if (!n.domain().empty() && n.domain() != "ai.onnx") return Unsup("op domain \"" + n.domain() + "\" is not supported");
  auto it = Rules().find(n.op_type());
  if (it == Rules().end()) {
    it = FoldRules().find(n.op_type());
    if (it == FoldRules().end()) return Unsup("op type " + n.op_type() + " has no memsim mapping");
  }
  if (n.output_size() < 1) return Unsup("node without outputs");
  return it->second(im, n, i);
}

}  // namespace memsim::onnx_import
