#include "lib/ir/lora.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>

namespace memsim {
namespace {

Status SpecError(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument("--lora \"" + spec + "\": " + why +
                                 " (expected r=R,alpha=A,targets=NAME[,NAME...][,dropout=P][,dora=on|off][,rslora=on|off]"
                                 "[,autocast_adapter_dtype=on|off])");
}

Result<double> Number(const std::string& spec, const std::string& key, const std::string& v) {
  double x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size()) return SpecError(spec, key + "=" + v + " is not a number");
  return x;
}

Result<bool> OnOff(const std::string& spec, const std::string& key, const std::string& v) {
  if (v == "on" || v == "true") return true;
  if (v == "off" || v == "false") return false;
  return SpecError(spec, key + "=" + v + ": expected on or off");
}

bool HasWildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string Shortest(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

}  // namespace

std::string LoraConfig::ToString() const {
  std::string s = "r=" + std::to_string(r) + ",alpha=" + Shortest(alpha) + ",targets=";
  for (size_t i = 0; i < targets.size(); ++i) s += (i ? "," : "") + targets[i];
  if (dropout > 0) s += ",dropout=" + Shortest(dropout);
  if (dora) s += ",dora=on";
  if (rslora) s += ",rslora=on";
  if (!autocast_adapter_dtype) s += ",autocast_adapter_dtype=off";
  return s;
}

Result<LoraConfig> ParseLoraSpec(const std::string& spec) {
  std::string text;
  for (char ch : spec)
    if (ch != '\'' && ch != '"') text += ch;
  std::map<std::string, std::vector<std::string>> kv;
  std::string key;
  std::stringstream in(text);
  for (std::string w; std::getline(in, w, ',');) {
    if (size_t eq = w.find('='); eq != std::string::npos) {
      key = w.substr(0, eq);
      if (kv.count(key)) return SpecError(spec, key + " is given twice");
      kv[key] = {w.substr(eq + 1)};
    } else if (!key.empty() && !w.empty()) {
      kv[key].push_back(w);
    } else if (!w.empty()) {
      return SpecError(spec, "\"" + w + "\" has no key");
    }
  }
  LoraConfig c;
  for (const auto& [k, vs] : kv) {
    if (k != "targets" && vs.size() != 1) return SpecError(spec, k + " takes one value");
    const std::string& v = vs.front();
    if (k == "r") {
      MEMSIM_ASSIGN_OR_RETURN(double r, Number(spec, k, v));
      if (r < 1 || r != static_cast<double>(static_cast<int64_t>(r))) return SpecError(spec, "r must be a positive integer");
      c.r = static_cast<int64_t>(r);
    } else if (k == "alpha") {
      MEMSIM_ASSIGN_OR_RETURN(c.alpha, Number(spec, k, v));
    } else if (k == "dropout") {
      MEMSIM_ASSIGN_OR_RETURN(c.dropout, Number(spec, k, v));
      if (!(c.dropout >= 0 && c.dropout < 1)) return SpecError(spec, "dropout must be in [0, 1)");
    } else if (k == "dora") {
      MEMSIM_ASSIGN_OR_RETURN(c.dora, OnOff(spec, k, v));
    } else if (k == "rslora") {
      MEMSIM_ASSIGN_OR_RETURN(c.rslora, OnOff(spec, k, v));
    } else if (k == "autocast_adapter_dtype") {
      MEMSIM_ASSIGN_OR_RETURN(c.autocast_adapter_dtype, OnOff(spec, k, v));
    } else if (k == "targets") {
      for (const std::string& t : vs)
        if (!t.empty()) c.targets.push_back(t);
    } else {
      return SpecError(spec, "unknown key \"" + k + "\"");
    }
  }
  if (!kv.count("r")) return SpecError(spec, "r is missing");
  if (c.targets.empty()) return SpecError(spec, "targets is missing");
  return c;
}

bool LoraTargetMatches(const std::string& target, const std::string& module) {
  if (HasWildcard(target)) return fnmatch(target.c_str(), module.c_str(), 0) == 0;
  return module == target ||
         (module.size() > target.size() && module.ends_with(target) && module[module.size() - target.size() - 1] == '.');
}

namespace {

/// The rewrite: |out_| starts as a copy of |g_|; ops are re-emitted in order, the targeted
/// linears expanded; new tensors are appended (existing ids keep their meaning).
class LoraRewrite {
 public:
  LoraRewrite(const Graph& g, const LoraConfig& c) : g_(g), c_(c), out_(g) {}

  Result<Graph> Run() {
    if (g_.lora)
      return Status::InvalidArgument(g_.source + " has LoRA adapters already (" + std::to_string(g_.lora_adapters) +
                                     ", its \"lora\" key): drop --lora, or run the base model's graph");
    if (!g_.fp8.empty())
      return Status::Unsupported("--lora on float8 Linears (--fp8 " + g_.fp8 +
                                 "): adapters around torchao's Float8Linear are not modelled; drop one of them");
    if (c_.r < 1) return Status::InvalidArgument("--lora: r must be a positive integer");
    if (!(c_.dropout >= 0 && c_.dropout < 1)) return Status::InvalidArgument("--lora: dropout must be in [0, 1)");
    MEMSIM_RETURN_IF_ERROR(FindTargets());
    out_.ops.clear();
    for (OpId o = 0; o < g_.ops.size(); ++o) {
      if (adapter_of_op_.count(o)) Expand(g_.ops[o], adapter_of_op_.at(o));
      else out_.ops.push_back(g_.ops[o]);
    }
    OrderParameters();
    for (TensorId t : out_.parameters) out_.tensors[t].requires_grad = false;
    for (const Adapter& a : adapters_) {
      out_.tensors[a.A].requires_grad = out_.tensors[a.B].requires_grad = true;
      if (a.magnitude != kNone) out_.tensors[a.magnitude].requires_grad = true;
    }
    out_.RelinkProducers();
    out_.lora = c_;
    out_.lora_adapters = adapters_.size();
    return std::move(out_);
  }

 private:
  struct Adapter {
    std::string module;
    TensorId weight, bias = kNone, A = kNone, B = kNone;
    TensorId magnitude = kNone;  ///< DoRA's lora_magnitude_vector [out]
    bool upcast = false;         ///< float32 adapters on a 16-bit base (autocast_adapter_dtype)
  };

  Status FindTargets() {
    std::map<std::string, size_t> by_module;
    std::vector<size_t> hits(c_.targets.size(), 0);
    std::set<std::string> linear_modules;
    for (OpId o = 0; o < g_.ops.size(); ++o) {
      const Op& op = g_.ops[o];
      if (op.kind != OpKind::kLinear || op.module.empty() || op.inputs.size() < 2) continue;
      if (g_.tensors[op.inputs[1]].role != TensorRole::kParameter) continue;
      linear_modules.insert(op.module);
      bool hit = false;
      for (size_t k = 0; k < c_.targets.size(); ++k)
        if (LoraTargetMatches(c_.targets[k], op.module)) hit = true, ++hits[k];
      if (!hit) continue;
      auto [it, fresh] = by_module.emplace(op.module, adapters_.size());
      if (fresh) {
        Adapter a;
        a.module = op.module;
        a.weight = op.inputs[1];
        if (op.inputs.size() > 2 && g_.tensors[op.inputs[2]].role == TensorRole::kParameter) a.bias = op.inputs[2];
        MEMSIM_RETURN_IF_ERROR(MakeAdapterParams(&a));
        adapters_.push_back(a);
      }
      adapter_of_op_[o] = it->second;
    }
    for (size_t k = 0; k < c_.targets.size(); ++k) {
      if (hits[k]) continue;
      std::string some;
      size_t n = 0;
      for (const std::string& m : linear_modules)
        if (n++ < 6) some += (n > 1 ? ", " : "") + m;
      if (linear_modules.size() > 6) some += ", ...";
      return Status::InvalidArgument("--lora targets: \"" + c_.targets[k] + "\" matches no Linear module of " + g_.name +
                                     (some.empty() ? " (it has none)" : " (its Linear modules: " + some + ")"));
    }
    return Status::OK();
  }

  Status MakeAdapterParams(Adapter* a) {
    const Tensor& w = g_.tensors[a->weight];
    if (w.shape.size() != 2)
      return Status::InvalidArgument("--lora: the weight of " + a->module + " (" + w.name + ") is not 2-D");
    const DimExpr r = DimExpr::Const(c_.r);
    // peft's cast_adapter_dtype (tuners_utils.py): float16 / bfloat16 adapter parameters become float32
    a->upcast = c_.autocast_adapter_dtype && (w.dtype == Dtype::kBFloat16 || w.dtype == Dtype::kFloat16);
    if (a->upcast && c_.dora)
      return Status::Unsupported("--lora dora=on on the 16-bit " + a->module +
                                 " with float32 adapters (autocast_adapter_dtype, peft's default) is not modelled; "
                                 "add autocast_adapter_dtype=off");
    const Dtype dtype = a->upcast ? Dtype::kFloat32 : w.dtype;
    a->A = NewTensor(a->module + ".lora_A.default.weight", TensorRole::kParameter, dtype, {r, w.shape[1]}, w.pointer);
    a->B = NewTensor(a->module + ".lora_B.default.weight", TensorRole::kParameter, dtype, {w.shape[0], r}, w.pointer);
    if (c_.dora)
      a->magnitude = NewTensor(a->module + ".lora_magnitude_vector.default.weight", TensorRole::kParameter, w.dtype,
                               {w.shape[0]}, w.pointer);
    // PEFT's module tree: the Linear becomes M.base_layer (a name the weight keeps only when it
    // is the module's own; a tied weight keeps its first owner's name).
    Rename(a->weight, a->module, ".weight");
    if (a->bias != kNone) Rename(a->bias, a->module, ".bias");
    return Status::OK();
  }

  void Rename(TensorId t, const std::string& module, const std::string& leaf) {
    std::string& name = out_.tensors[t].name;
    if (name == module + leaf) name = module + ".base_layer" + leaf;
  }

  TensorId NewTensor(std::string name, TensorRole role, Dtype dtype, SymShape shape, const std::string& pointer) {
    while (out_.FindTensor(name) != kNone) name += "_";
    Tensor t;
    t.name = std::move(name);
    t.role = role;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.pointer = pointer;
    out_.tensors.push_back(std::move(t));
    return static_cast<TensorId>(out_.tensors.size() - 1);
  }

  TensorId NewActivation(const Op& op, const std::string& suffix) {
    return NewTensor(g_.tensors[op.outputs[0]].name + suffix, TensorRole::kActivation, Dtype::kFloat32, {}, op.pointer);
  }

  void Emit(const Op& like, OpKind kind, std::string module, std::vector<TensorId> inputs, TensorId output, Attrs attrs = {}) {
    Op op;
    op.kind = kind;
    op.module = std::move(module);
    op.inputs = std::move(inputs);
    op.outputs = {output};
    op.name = out_.tensors[output].name;
    op.attrs = std::move(attrs);
    op.pointer = like.pointer;
    out_.ops.push_back(std::move(op));
  }

  /// PEFT's Linear.forward: result = base_layer(x); result = result + lora_B(lora_A(dropout(x))) * scaling.
  /// With float32 adapters on a 16-bit base (Adapter::upcast): x = _cast_input_dtype(x, float32) first
  /// (the layer's local `x` until it returns), the sum is float32 (type promotion) and
  /// result.to(torch_result_dtype) casts it back.
  void Expand(const Op& linear, size_t k) {
    const Adapter& a = adapters_[k];
    const std::string& m = a.module;
    const TensorId x = linear.inputs[0], y = linear.outputs[0];
    Op base = linear;
    base.module = m + ".base_layer";
    base.outputs = {NewActivation(linear, ".base_layer")};
    base.name = out_.tensors[base.outputs[0]].name;
    base.keep_alive.clear();
    out_.ops.push_back(base);
    if (c_.dora) return ExpandDora(linear, a, base.outputs[0]);
    TensorId h = x;
    if (a.upcast) h = Op1(linear, ".lora_input_cast", OpKind::kToDtype, m, {x}, DtypeAttr(Dtype::kFloat32));
    const TensorId x_local = h;
    if (c_.dropout > 0) {
      TensorId xd = NewActivation(linear, ".lora_dropout");
      Emit(linear, OpKind::kDropout, m + ".lora_dropout.default", {h}, xd, Dropout());
      h = xd;
    }
    TensorId ha = NewActivation(linear, ".lora_A");
    Emit(linear, OpKind::kLinear, m + ".lora_A.default", {h, a.A}, ha);
    TensorId hb = NewActivation(linear, ".lora_B");
    Emit(linear, OpKind::kLinear, m + ".lora_B.default", {ha, a.B}, hb);
    Attrs mul;
    mul.Set("scalar", c_.scaling());
    mul.Set("inplace", false);
    TensorId hs = NewActivation(linear, ".lora_scaled");
    Emit(linear, OpKind::kMul, m, {hb}, hs, std::move(mul));
    Attrs add;
    add.Set("inplace", false);
    const TensorId sum = a.upcast ? NewActivation(linear, ".lora_sum") : y;
    Emit(linear, OpKind::kAdd, m, {base.outputs[0], hs}, sum, std::move(add));
    if (a.upcast) Emit(linear, OpKind::kToDtype, m, {sum}, y, DtypeAttr(g_.tensors[a.weight].dtype));
    out_.ops.back().name = linear.name;
    out_.ops.back().keep_alive = linear.keep_alive;  // the caller's names outlive the whole LoRA forward
    if (x_local != x) out_.ops.back().keep_alive.push_back(x_local);
  }

  static Attrs DtypeAttr(Dtype t) {
    Attrs a;
    a.Set("dtype", std::string(DtypeName(t)));
    return a;
  }

  /// A no-input op of |kind| (or one on |inputs|) whose new output is named after |linear|'s.
  TensorId Op1(const Op& linear, const std::string& suffix, OpKind kind, const std::string& module,
               std::vector<TensorId> inputs, Attrs attrs = {}) {
    TensorId t = NewActivation(linear, suffix);
    Emit(linear, kind, module, std::move(inputs), t, std::move(attrs));
    return t;
  }

  Attrs Dropout() const {
    Attrs d;
    d.Set("p", c_.dropout);
    d.Set("inplace", false);
    d.Set("training", true);
    return d;
  }

  static Attrs Scalar(double x) {
    Attrs a;
    a.Set("scalar", x);
    a.Set("inplace", false);
    return a;
  }

  /// DoRA (Note [LoRA]; peft DoraLinearVariant.forward, DoraLinearLayer.forward):
  /// the result plus (m / ||W + s·BA||_row - 1) * base + (m / ||..||) * lora_B(lora_A(x)) * s.
  /// get_lora_weight's lora_B(lora_A(eye)) is recorded by autograd but used detached: its nodes
  /// die with the name `lora_weight` when the layer returns (Note [Dead graphs]).
  void ExpandDora(const Op& linear, const Adapter& a, TensorId base) {
    const std::string& m = a.module;
    const Tensor& w = g_.tensors[a.weight];
    TensorId x = linear.inputs[0];  // DoraLinearVariant.forward: x = dropout(x) first
    if (c_.dropout > 0) x = Op1(linear, ".lora_dropout", OpKind::kDropout, m + ".lora_dropout.default", {x}, Dropout());
    Attrs eye;
    eye.Set("shape", std::vector<DimExpr>{w.shape[1], w.shape[1]});
    eye.Set("dtype", std::string(DtypeName(w.dtype)));
    TensorId x_eye = Op1(linear, ".dora_eye", OpKind::kFull, m, {}, std::move(eye));
    TensorId ea = Op1(linear, ".dora_lora_A", OpKind::kLinear, m + ".lora_A.default", {x_eye, a.A});
    TensorId eb = Op1(linear, ".dora_lora_B", OpKind::kLinear, m + ".lora_B.default", {ea, a.B});
    Attrs t;
    t.Set("dim0", DimExpr::Const(0));
    t.Set("dim1", DimExpr::Const(1));
    TensorId lw = Op1(linear, ".dora_lora_weight", OpKind::kTranspose, m, {eb}, std::move(t));
    out_.ops.back().keep_alive = {x_eye};  // get_lora_weight's local, until it returns
    TensorId lwd = Op1(linear, ".dora_lora_weight_detached", OpKind::kDetach, m, {lw});
    const std::string dm = m + ".lora_magnitude_vector.default";
    TensorId slw = Op1(linear, ".dora_scaled_weight", OpKind::kMul, dm, {lwd}, Scalar(c_.scaling()));
    Attrs add;
    add.Set("inplace", false);
    TensorId cw = Op1(linear, ".dora_weight", OpKind::kAdd, dm, {a.weight, slw}, add);
    Attrs norm;
    norm.Set("dim", std::vector<DimExpr>{DimExpr::Const(1)});
    TensorId wn = Op1(linear, ".dora_weight_norm", OpKind::kVectorNorm, dm, {cw}, std::move(norm));
    Attrs div;
    div.Set("inplace", false);
    TensorId ms = Op1(linear, ".dora_mag_norm_scale", OpKind::kDiv, dm, {a.magnitude, wn}, std::move(div));
    Attrs view;
    view.Set("shape", std::vector<DimExpr>{DimExpr::Const(1), DimExpr::Const(-1)});
    TensorId ms2 = Op1(linear, ".dora_mag_norm_scale_view", OpKind::kView, dm, {ms}, std::move(view));
    TensorId ha = Op1(linear, ".lora_A", OpKind::kLinear, m + ".lora_A.default", {x, a.A});
    TensorId lr = Op1(linear, ".lora_B", OpKind::kLinear, m + ".lora_B.default", {ha, a.B});
    TensorId b = base;
    if (c_.dropout > 0)  // base_result=None: F.linear(dropout(x), W), no bias
      b = Op1(linear, ".dora_base_dropout", OpKind::kLinear, dm, {x, a.weight});
    else if (a.bias != kNone) b = Op1(linear, ".dora_base_minus_bias", OpKind::kSub, dm, {base, a.bias}, add);
    Attrs minus1 = Scalar(1.0);
    TensorId ms1 = Op1(linear, ".dora_mag_norm_scale_m1", OpKind::kSub, dm, {ms2}, std::move(minus1));
    TensorId t1 = Op1(linear, ".dora_base_term", OpKind::kMul, dm, {ms1, b}, add);
    TensorId t2 = Op1(linear, ".dora_lora_term", OpKind::kMul, dm, {ms2, lr}, add);
    TensorId t3 = Op1(linear, ".dora_lora_scaled", OpKind::kMul, dm, {t2}, Scalar(c_.scaling()));
    TensorId rd = Op1(linear, ".dora_result", OpKind::kAdd, dm, {t1, t3}, add);
    out_.ops.back().keep_alive = {lw};  // DoraLinearLayer.forward's local `lora_weight`, until it returns
    Emit(linear, OpKind::kAdd, m, {base, rd}, linear.outputs[0], add);
    out_.ops.back().name = linear.name;
    // Linear.forward's own `x` outlives the variant's `x = dropout(x)`, until the layer returns.
    out_.ops.back().keep_alive = {linear.inputs[0]};
    out_.ops.back().keep_alive.insert(out_.ops.back().keep_alive.end(), linear.keep_alive.begin(), linear.keep_alive.end());
  }

  /// model.parameters() of the PEFT model: each adapter's A and B right after its base layer's
  /// weight and bias (M.base_layer, M.lora_dropout, M.lora_A, M.lora_B are M's children, in order).
  void OrderParameters() {
    std::map<TensorId, std::vector<TensorId>> after;
    for (const Adapter& a : adapters_) {
      size_t last = 0;
      for (size_t i = 0; i < g_.parameters.size(); ++i)
        if (g_.parameters[i] == a.weight || g_.parameters[i] == a.bias) last = i;
      after[g_.parameters[last]].insert(after[g_.parameters[last]].end(), {a.A, a.B});
      if (a.magnitude != kNone) after[g_.parameters[last]].push_back(a.magnitude);
    }
    out_.parameters.clear();
    for (TensorId p : g_.parameters) {
      out_.parameters.push_back(p);
      if (auto it = after.find(p); it != after.end())
        out_.parameters.insert(out_.parameters.end(), it->second.begin(), it->second.end());
    }
  }

  const Graph& g_;
  const LoraConfig& c_;
  Graph out_;
  std::vector<Adapter> adapters_;
  std::map<OpId, size_t> adapter_of_op_;
};

}  // namespace

Result<Graph> ApplyLora(const Graph& g, const LoraConfig& config) { return LoraRewrite(g, config).Run(); }

}  // namespace memsim
