#include "lib/ir/quantized_base.h"

#include <charconv>
#include <map>
#include <set>
#include <sstream>

#include "lib/ir/lora.h"

namespace memsim {
namespace {

constexpr const char* kSpecForm =
    "nf4|fp4|int8[,double_quant=on|off][,compute=fp32|bf16|fp16][,blocksize=B][,targets=NAME,...][,skip=NAME,...]";

Status SpecError(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument("--quantize-base \"" + spec + "\": " + why + " (expected " + kSpecForm + ")");
}

std::optional<QuantFormat> ParseFormat(const std::string& s) {
  if (s == "nf4") return QuantFormat::kNf4;
  if (s == "fp4") return QuantFormat::kFp4;
  if (s == "int8") return QuantFormat::kInt8;
  return std::nullopt;
}

const char* FormatName(QuantFormat f) {
  switch (f) {
    case QuantFormat::kNf4: return "nf4";
    case QuantFormat::kFp4: return "fp4";
    case QuantFormat::kInt8: return "int8";
  }
  return "nf4";
}

std::string ComputeName(Dtype d) {
  switch (d) {
    case Dtype::kBFloat16: return "bf16";
    case Dtype::kFloat16: return "fp16";
    default: return "fp32";
  }
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s;
}

/// Applies one key=value of the spec to |c|.
Status SetKey(const std::string& spec, const std::string& k, const std::vector<std::string>& vs, QuantizedBaseConfig* c) {
  if (k != "targets" && k != "skip" && vs.size() != 1) return SpecError(spec, k + " takes one value");
  const std::string& v = vs.front();
  if (k == "type") {
    auto f = ParseFormat(v);
    if (!f) return SpecError(spec, "type=" + v + ": expected nf4, fp4 or int8");
    c->format = *f;
  } else if (k == "double_quant") {
    if (v != "on" && v != "off") return SpecError(spec, "double_quant=" + v + ": expected on or off");
    c->double_quant = v == "on";
  } else if (k == "compute") {
    static const std::map<std::string, Dtype> kCompute = {{"fp32", Dtype::kFloat32}, {"float32", Dtype::kFloat32},
                                                          {"bf16", Dtype::kBFloat16}, {"bfloat16", Dtype::kBFloat16},
                                                          {"fp16", Dtype::kFloat16}, {"float16", Dtype::kFloat16}};
    auto it = kCompute.find(v);
    if (it == kCompute.end()) return SpecError(spec, "compute=" + v + ": expected fp32, bf16 or fp16");
    c->compute = it->second;
  } else if (k == "blocksize") {
    int64_t b = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), b);
    // functional.dequantize_4bit's valid blocksizes
    if (ec != std::errc() || end != v.data() + v.size() || b < 32 || b > 4096 || (b & (b - 1)))
      return SpecError(spec, "blocksize=" + v + ": expected 32, 64, 128, ..., 4096");
    c->blocksize = b;
  } else if (k == "targets" || k == "skip") {
    std::vector<std::string>& list = k == "targets" ? c->targets : c->skip;
    list.clear();
    for (const std::string& t : vs)
      if (!t.empty() && t != "none") list.push_back(t);
  } else {
    return SpecError(spec, "unknown key \"" + k + "\"");
  }
  return Status::OK();
}

}  // namespace

std::string QuantizedBaseConfig::ToString() const {
  std::string s = FormatName(format);
  if (four_bit()) s += std::string(",double_quant=") + (double_quant ? "on" : "off");
  if (compute) s += ",compute=" + ComputeName(*compute);
  if (blocksize != 64) s += ",blocksize=" + std::to_string(blocksize);
  if (!targets.empty()) s += ",targets=" + Join(targets);
  if (skip != std::vector<std::string>{"lm_head"}) s += ",skip=" + (skip.empty() ? std::string("none") : Join(skip));
  return s;
}

Result<QuantizedBaseConfig> ParseQuantizedBaseSpec(const std::string& spec) {
  std::string text;
  for (char ch : spec)
    if (ch != '\'' && ch != '"') text += ch;
  std::vector<std::pair<std::string, std::vector<std::string>>> kv;
  std::set<std::string> seen;
  std::stringstream in(text);
  bool first = true;
  for (std::string w; std::getline(in, w, ','); first = false) {
    if (size_t eq = w.find('='); eq != std::string::npos) {
      std::string key = w.substr(0, eq);
      if (!seen.insert(key).second) return SpecError(spec, key + " is given twice");
      kv.push_back({key, {w.substr(eq + 1)}});
    } else if (first && !w.empty()) {
      seen.insert("type");
      kv.push_back({"type", {w}});
    } else if (!kv.empty() && !w.empty()) {
      kv.back().second.push_back(w);
    } else if (!w.empty()) {
      return SpecError(spec, "\"" + w + "\" has no key");
    }
  }
  if (!seen.count("type")) return SpecError(spec, "the format (nf4, fp4 or int8) is missing");
  QuantizedBaseConfig c;
  for (const auto& [k, vs] : kv) MEMSIM_RETURN_IF_ERROR(SetKey(spec, k, vs, &c));
  if (!c.four_bit() && (seen.count("double_quant") || seen.count("compute") || seen.count("blocksize")))
    return SpecError(spec, "int8 takes no double_quant, compute or blocksize (they are Linear4bit's)");
  return c;
}

int64_t QuantTensor::bytes() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n * ElementSize(dtype);
}

std::vector<QuantTensor> QuantizedWeight(const QuantizedBaseConfig& c, int64_t out, int64_t in) {
  if (!c.four_bit()) return {{"", Dtype::kUInt8, {out, in}}, {"SCB", Dtype::kFloat32, {out}}};  // int8: 1 byte
  const int64_t n = out * in;
  const int64_t blocks = (n + c.blocksize - 1) / c.blocksize;
  std::vector<QuantTensor> t = {{"", Dtype::kUInt8, {(n + 1) / 2, 1}}};
  if (!c.double_quant) {
    t.push_back({"absmax", Dtype::kFloat32, {blocks}});
    t.push_back({"quant_map", Dtype::kFloat32, {16}});
    return t;
  }
  // functional.quantize_4bit with compress_statistics: offset = absmax.mean(); quantize_blockwise(
  // absmax - offset, blocksize=256) → uint8 absmax, a float32 absmax per 256 blocks, the dynamic map
  t.push_back({"absmax", Dtype::kUInt8, {blocks}});
  t.push_back({"quant_map", Dtype::kFloat32, {16}});
  t.push_back({"nested_absmax", Dtype::kFloat32, {(blocks + 255) / 256}});
  t.push_back({"nested_quant_map", Dtype::kFloat32, {256}});
  t.push_back({"offset", Dtype::kFloat32, {}});
  return t;
}

bool QuantizesModule(const QuantizedBaseConfig& c, const std::string& module) {
  auto any = [&](const std::vector<std::string>& names) {
    for (const std::string& t : names)
      if (LoraTargetMatches(t, module)) return true;
    return false;
  };
  return (c.targets.empty() || any(c.targets)) && !any(c.skip);
}

namespace {

/// The rewrite: every linear op on a targeted module becomes the bnb op; its weight parameter the
/// packed quantized tensor, its quant state new buffers (existing tensor ids keep their meaning).
class QuantizeRewrite {
 public:
  QuantizeRewrite(const Graph& g, const QuantizedBaseConfig& c) : g_(g), c_(c), out_(g) {}

  Result<Graph> Run() {
    if (g_.quantized_base)
      return Status::InvalidArgument(g_.source + " has quantized base weights already (" + g_.quantized_base->ToString() +
                                     "): drop --quantize-base");
    std::map<TensorId, size_t> uses;
    for (const Op& op : g_.ops)
      for (TensorId t : op.inputs) ++uses[t];
    std::vector<size_t> hits(c_.targets.size(), 0);
    std::set<std::string> linear_modules;
    std::map<TensorId, bool> done;
    for (Op& op : out_.ops) {
      if (op.kind != OpKind::kLinear || op.module.empty() || op.inputs.size() < 2) continue;
      const TensorId w = op.inputs[1];
      const Tensor& wt = g_.tensors[w];
      if (wt.role != TensorRole::kParameter || IsAdapter(wt.name)) continue;
      const std::string module = LogicalModule(op.module);
      linear_modules.insert(module);
      for (size_t k = 0; k < c_.targets.size(); ++k) hits[k] += LoraTargetMatches(c_.targets[k], module);
      // A weight another op reads too (an output head tied to the embedding) stays as it is, as
      // transformers' get_keys_to_not_convert keeps tied weights.
      if (!QuantizesModule(c_, module) || uses[w] > 1) continue;
      MEMSIM_RETURN_IF_ERROR(Quantize(&op, module, !done[w]));
      done[w] = true;
    }
    for (size_t k = 0; k < c_.targets.size(); ++k) {
      if (hits[k]) continue;
      std::string some;
      size_t n = 0;
      for (const std::string& m : linear_modules)
        if (n++ < 6) some += (n > 1 ? ", " : "") + m;
      if (linear_modules.size() > 6) some += ", ...";
      return Status::InvalidArgument("--quantize-base targets: \"" + c_.targets[k] + "\" matches no Linear module of " +
                                     g_.name + (some.empty() ? " (it has none)" : " (its Linear modules: " + some + ")"));
    }
    out_.quantized_base = c_;
    out_.quantized_linears = done.size();
    return std::move(out_);
  }

 private:
  /// peft's adapters are nn.Linear modules created after quantization: never quantized.
  static bool IsAdapter(const std::string& name) {
    return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
  }
  /// The Linear's module path as the user names it (a LoRA base layer is M.base_layer).
  std::string LogicalModule(const std::string& module) const {
    const std::string suffix = ".base_layer";
    if (g_.lora && module.ends_with(suffix)) return module.substr(0, module.size() - suffix.size());
    return module;
  }

  Status Quantize(Op* op, const std::string& module, bool first_use) {
    const TensorId w = op->inputs[1];
    Tensor& wt = out_.tensors[w];
    if (wt.shape.size() != 2 || !wt.shape[0].is_const() || !wt.shape[1].is_const())
      return Status::InvalidArgument("--quantize-base: the weight of " + module + " (" + wt.name +
                                     ") is not 2-D with constant sizes");
    const int64_t out = wt.shape[0].coeff, in = wt.shape[1].coeff;
    const Dtype orig = wt.dtype;
    const std::vector<QuantTensor> q = QuantizedWeight(c_, out, in);
    if (first_use) {
      wt.dtype = q[0].dtype;
      wt.shape.clear();
      for (int64_t d : q[0].shape) wt.shape.push_back(DimExpr::Const(d));
      wt.requires_grad = false;
      // AddBuffer appends to out_.tensors: |wt| may move, so its name and pointer are copied first.
      const std::string name = wt.name, pointer = wt.pointer;
      for (size_t i = 1; i < q.size(); ++i) AddBuffer(name + "." + q[i].suffix, q[i], pointer);
    }
    op->kind = c_.four_bit() ? OpKind::kLinear4bit : OpKind::kLinear8bit;
    op->attrs.Set("out_features", DimExpr::Const(out));
    op->attrs.Set("in_features", DimExpr::Const(in));
    op->attrs.Set("weight_dtype", std::string(DtypeName(orig)));
    if (c_.four_bit()) {
      op->attrs.Set("blocksize", DimExpr::Const(c_.blocksize));
      op->attrs.Set("double_quant", c_.double_quant);
      if (c_.compute) op->attrs.Set("compute", std::string(DtypeName(*c_.compute)));
      // peft's LoRA Linear4bit clones the base layer's result (peft/tuners/lora/bnb.py)
      op->attrs.Set("clone", g_.lora.has_value() && op->module != module);
    }
    return Status::OK();
  }

  void AddBuffer(const std::string& name, const QuantTensor& q, const std::string& pointer) {
    Tensor t;
    t.name = name;
    while (out_.FindTensor(t.name) != kNone) t.name += "_";
    t.role = TensorRole::kBuffer;
    t.dtype = q.dtype;
    for (int64_t d : q.shape) t.shape.push_back(DimExpr::Const(d));
    t.pointer = pointer;
    out_.tensors.push_back(std::move(t));
    out_.buffers.push_back(static_cast<TensorId>(out_.tensors.size() - 1));
  }

  const Graph& g_;
  const QuantizedBaseConfig& c_;
  Graph out_;
};

}  // namespace

Result<Graph> ApplyQuantizedBase(const Graph& g, const QuantizedBaseConfig& config) {
  return QuantizeRewrite(g, config).Run();
}

}  // namespace memsim
