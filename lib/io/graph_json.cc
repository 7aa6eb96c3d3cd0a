#include "lib/io/graph_json.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/io/optimizer_json.h"
#include "lib/ir/lora.h"
#include "lib/ir/quantized_base.h"
#include "lib/ir/topo.h"
#include "lib/util/checked.h"
#include "lib/util/text_limits.h"

namespace memsim {
namespace {

using nlohmann::json;

constexpr int64_t kMaxDim = int64_t{1} << 40;  // elements; larger is surely a mistake

/// A value for a message: compact JSON, at most a short excerpt (never the whole value).
std::string Show(const json& v) {
  return Excerpt(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

/// Builds a Graph from a parsed document, tracking the JSON pointer for every message.
class GraphReader {
 public:
  explicit GraphReader(const std::string& source) { g_.source = source; }

  Result<Graph> Read(const json& doc) {
    if (!doc.is_object()) return Err("", "the document must be a JSON object");
    if (auto it = doc.find("format"); it == doc.end() || *it != "memsim-graph")
      return Err("/format", "expected \"memsim-graph\"");
    if (auto it = doc.find("version"); it == doc.end() || *it != 1)
      return Err("/version", "expected 1");
    MEMSIM_ASSIGN_OR_RETURN(g_.name, String(doc, "name", "", true));
    MEMSIM_ASSIGN_OR_RETURN(g_.provenance, String(doc, "provenance", "", false));
    MEMSIM_ASSIGN_OR_RETURN(g_.torch_version, String(doc, "torch_version", "", false));
    if (auto it = doc.find("recorded_dtype"); it != doc.end()) {
      const auto d = it->is_string() ? ParseDtype(it->get<std::string>()) : std::nullopt;
      if (!d || (*d != Dtype::kFloat32 && *d != Dtype::kFloat16 && *d != Dtype::kBFloat16))
        return Err("/recorded_dtype", "expected float32, float16 or bfloat16 (the dtype the forward was recorded in)");
      g_.recorded_dtype = d;
    }
    if (auto it = doc.find("symbols"); it != doc.end()) {
      if (!it->is_object()) return Err("/symbols", "expected an object of symbol: integer");
      for (auto& [k, v] : it->items()) {
        if (!IsSymbolName(k)) return Err("/symbols/" + k, "not a valid symbol name");
        if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
            (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxDim)))
          return Err("/symbols/" + k, "expected a non-negative integer");
        g_.symbol_defaults[Symbol(k)] = v.get<int64_t>();
      }
    }
    MEMSIM_RETURN_IF_ERROR(Leaves(doc, "inputs", TensorRole::kInput, &g_.inputs, true));
    MEMSIM_RETURN_IF_ERROR(Leaves(doc, "parameters", TensorRole::kParameter, &g_.parameters, false));
    MEMSIM_RETURN_IF_ERROR(Leaves(doc, "buffers", TensorRole::kBuffer, &g_.buffers, false));
    MEMSIM_RETURN_IF_ERROR(Ops(doc));
    if (auto it = doc.find("outputs"); it != doc.end()) {
      if (!it->is_array()) return Err("/outputs", "expected an array of tensor names");
      for (size_t i = 0; i < it->size(); ++i) {
        MEMSIM_ASSIGN_OR_RETURN(TensorId t, Ref((*it)[i], "/outputs/" + std::to_string(i)));
        g_.outputs.push_back(t);
      }
    }
    if (auto it = doc.find("loss"); it != doc.end() && !it->is_null()) {
      MEMSIM_ASSIGN_OR_RETURN(g_.loss, Ref(*it, "/loss"));
      if (g_.tensors[g_.loss].role != TensorRole::kActivation)
        return Err("/loss", "the loss \"" + g_.tensors[g_.loss].name +
                                "\" must be computed by an op, not an input, parameter or buffer");
    }
    if (auto it = doc.find("optimizer"); it != doc.end()) {
      MEMSIM_ASSIGN_OR_RETURN(OptimizerProgram p, ParseOptimizerProgram(*it, g_.source, "/optimizer"));
      g_.optimizer = std::move(p);
    }
    if (auto it = doc.find("routing"); it != doc.end()) MEMSIM_RETURN_IF_ERROR(Routings(*it));
    MEMSIM_ASSIGN_OR_RETURN(std::vector<OpId> order, TopologicalOrder(g_));
    Reorder(order);
    if (auto it = doc.find("lora"); it != doc.end()) {
      MEMSIM_ASSIGN_OR_RETURN(g_, WithLora(*it));
    }
    if (auto it = doc.find("quantize_base"); it != doc.end()) {
      MEMSIM_ASSIGN_OR_RETURN(g_, WithQuantizedBase(*it));
    }
    return WithEagerTwin(doc);
  }

 private:
  /// The `compiled` section's `eager_ops` (export_torch.py --compile): the same model uncompiled,
  /// read as a graph of its own (the file's other keys, those ops) and kept as the compile twin
  /// (lib/ir/compile_mode.h).
  Result<Graph> WithEagerTwin(const json& doc) {
    auto c = doc.find("compiled");
    if (c == doc.end() || !c->is_object() || !c->contains("eager_ops")) return std::move(g_);
    json eager = doc;
    eager["ops"] = (*c)["eager_ops"];
    eager.erase("compiled");
    GraphReader reader(g_.source);
    reader.ops_pointer_ = "/compiled/eager_ops";
    MEMSIM_ASSIGN_OR_RETURN(Graph twin, reader.Read(eager));
    if (std::any_of(twin.ops.begin(), twin.ops.end(), [](const Op& op) { return op.kind == OpKind::kCompiled; }))
      return Err("/compiled/eager_ops", "the eager op list holds a compiled op");
    g_.compile_twin = std::make_shared<const Graph>(std::move(twin));
    return std::move(g_);
  }

  /// The "lora" key (a peft model's adapters, written by the exporter): the graph rewritten by
  /// ApplyLora with that configuration (Note [LoRA]).
  Result<Graph> WithLora(const json& v) {
    if (!v.is_object()) return Err("/lora", "expected an object {r, alpha, targets, dropout, dora, rslora, autocast_adapter_dtype}");
    LoraConfig c;
    for (auto& [k, x] : v.items()) {
      const std::string ptr = "/lora/" + k;
      if (k == "r") {
        if (!x.is_number_integer() || x.get<int64_t>() < 1) return Err(ptr, "expected a positive integer");
        c.r = x.get<int64_t>();
      } else if (k == "alpha" || k == "dropout") {
        if (!x.is_number()) return Err(ptr, "expected a number");
        (k == "alpha" ? c.alpha : c.dropout) = x.get<double>();
      } else if (k == "dora" || k == "rslora" || k == "autocast_adapter_dtype") {
        if (!x.is_boolean()) return Err(ptr, "expected true or false");
        (k == "dora" ? c.dora : k == "rslora" ? c.rslora : c.autocast_adapter_dtype) = x.get<bool>();
      } else if (k == "targets") {
        if (!x.is_array() || x.empty()) return Err(ptr, "expected a non-empty array of module paths");
        for (size_t i = 0; i < x.size(); ++i) {
          if (!x[i].is_string()) return Err(ptr + "/" + std::to_string(i), "expected a module path");
          c.targets.push_back(x[i].get<std::string>());
        }
      } else {
        return Err(ptr, "unknown key (expected r, alpha, targets, dropout, dora, rslora, autocast_adapter_dtype)");
      }
    }
    if (c.targets.empty()) return Err("/lora/targets", "missing");
    Result<Graph> r = ApplyLora(g_, c);
    if (!r.ok()) return Err("/lora", r.status().message());
    return r;
  }

  /// The "quantize_base" key (a model loaded with bitsandbytes, its Linear4bit / Linear8bitLt
  /// layers read by the exporter): the spec of --quantize-base, applied after the adapters as peft
  /// wraps the bnb layers (Note [Quantized base weights]).
  Result<Graph> WithQuantizedBase(const json& v) {
    if (!v.is_string()) return Err("/quantize_base", "expected a string such as \"nf4,double_quant=on,compute=bf16\"");
    Result<QuantizedBaseConfig> c = ParseQuantizedBaseSpec(v.get<std::string>());
    if (!c.ok()) return Err("/quantize_base", c.status().message());
    Result<Graph> r = ApplyQuantizedBase(g_, *c);
    if (!r.ok()) return Err("/quantize_base", r.status().message());
    return r;
  }

  Status Err(const std::string& ptr, const std::string& msg) const {
    // Keys and names come from the file: a message quotes at most an excerpt of them.
    const std::string where = ptr.empty() ? "/" : Excerpt(ptr, 160);
    const std::string tensor = tensor_.empty() ? "" : " (tensor \"" + Excerpt(tensor_) + "\")";
    return Status::ParseError(g_.source + ": " + where + ": " + Excerpt(msg, 400) + tensor);
  }

  static bool IsSymbolName(const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    for (char c : s)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
  }

  uint32_t Symbol(const std::string& name) {
    uint32_t id = g_.FindSymbol(name);
    if (id != kNone) return id;
    g_.symbols.push_back(name);
    g_.symbol_defaults.push_back(std::nullopt);
    return uint32_t(g_.symbols.size() - 1);
  }

  Result<std::string> String(const json& obj, const char* key, const std::string& dflt,
                             bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) return Err(std::string("/") + key, "missing");
      return dflt;
    }
    if (!it->is_string()) return Err(std::string("/") + key, "expected a string");
    return it->get<std::string>();
  }

  /// The "routing" key: [{"tokens": DIM, "experts": E}, ...], each expert's count a symbol
  /// routed<L>_e<i> the graph declares (Note [Routed token counts]).
  Status Routings(const json& v) {
    if (!v.is_array()) return Err("/routing", "expected an array of {tokens, experts}");
    for (size_t l = 0; l < v.size(); ++l) {
      const std::string ptr = "/routing/" + std::to_string(l);
      const json& r = v[l];
      if (!r.is_object() || !r.contains("tokens") || !r.contains("experts"))
        return Err(ptr, "expected {\"tokens\": DIM, \"experts\": E}");
      Graph::Routing x;
      MEMSIM_ASSIGN_OR_RETURN(x.tokens, Dim(r["tokens"], ptr + "/tokens", false));
      if (!r["experts"].is_number_integer() || r["experts"].get<int64_t>() < 1 || r["experts"].get<int64_t>() > 65536)
        return Err(ptr + "/experts", "expected a positive number of experts");
      x.experts = r["experts"].get<int64_t>();
      for (int64_t e = 0; e < x.experts; ++e)
        if (g_.FindSymbol("routed" + std::to_string(l) + "_e" + std::to_string(e)) == kNone)
          return Err(ptr, "the graph has no symbol routed" + std::to_string(l) + "_e" + std::to_string(e) +
                              " (declare each expert's count in \"symbols\")");
      g_.routing.push_back(std::move(x));
    }
    return Status::OK();
  }

  /// A dimension: a non-negative integer, -1 if |allow_infer|, or "sym", "sym*4", "a*b".
  Result<DimExpr> Dim(const json& v, const std::string& ptr, bool allow_infer) {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxDim))
        return Err(ptr, "dimension " + Show(v) + " is too large");
      int64_t x = v.get<int64_t>();
      if (x > kMaxDim) return Err(ptr, "dimension " + Show(v) + " is too large");
      if (x < 0 && !(allow_infer && x == -1))
        return Err(ptr, "negative dimension " + Show(v));
      return DimExpr::Const(x);
    }
    if (v.is_string()) {
      DimExpr d;
      std::string s = v.get<std::string>();
      std::stringstream ss(s);
      std::string factor;
      bool any = false;
      while (std::getline(ss, factor, '*')) {
        any = true;
        if (!factor.empty() && std::all_of(factor.begin(), factor.end(), ::isdigit)) {
          std::optional<int64_t> c;
          if (factor.size() <= 13) c = CheckedMul(d.coeff, std::stoll(factor));
          if (!c || *c > kMaxDim)
            return Err(ptr, "dimension \"" + Excerpt(s) + "\" is too large (the product exceeds 2^40)");
          d.coeff = *c;
        } else if (IsSymbolName(factor)) {
          d.symbols.push_back(Symbol(factor));
        } else {
          return Err(ptr, "bad dimension \"" + Excerpt(s) + "\" (expected an integer, a symbol or a product such as \"batch*12\")");
        }
      }
      if (!any) return Err(ptr, "empty dimension");
      if (d.symbols.size() > 16) return Err(ptr, "more than 16 symbols in one dimension");
      return d;
    }
    if (v.is_number_float()) return Err(ptr, "dimension " + Show(v) + " is too large or not an integer");
    return Err(ptr, "expected a dimension (integer or symbol), got " + Show(v));
  }

  Result<SymShape> Shape(const json& v, const std::string& ptr) {
    if (!v.is_array()) return Err(ptr, "expected an array of dimensions");
    if (v.size() > 16) return Err(ptr, "more than 16 dimensions");
    SymShape s;
    for (size_t i = 0; i < v.size(); ++i) {
      MEMSIM_ASSIGN_OR_RETURN(DimExpr d, Dim(v[i], ptr + "/" + std::to_string(i), false));
      s.push_back(d);
    }
    return s;
  }

  Result<TensorId> NewTensor(const json& name, const std::string& ptr, Tensor t) {
    if (!name.is_string() || name.get<std::string>().empty())
      return Err(ptr, "expected a non-empty tensor name");
    t.name = name.get<std::string>();
    if (names_.count(t.name)) return Err(ptr, "duplicate tensor name \"" + t.name + "\"");
    t.pointer = ptr;
    names_[t.name] = TensorId(g_.tensors.size());
    g_.tensors.push_back(std::move(t));
    return TensorId(g_.tensors.size() - 1);
  }

  Result<TensorId> Ref(const json& name, const std::string& ptr) {
    if (!name.is_string()) return Err(ptr, "expected a tensor name");
    auto it = names_.find(name.get<std::string>());
    if (it == names_.end()) return Err(ptr, "unknown tensor \"" + name.get<std::string>() + "\"");
    return it->second;
  }

  Status Leaves(const json& doc, const char* key, TensorRole role, std::vector<TensorId>* out,
                bool required) {
    const std::string base = std::string("/") + key;
    auto it = doc.find(key);
    if (it == doc.end()) return required ? Err(base, "missing") : Status::OK();
    if (!it->is_array()) return Err(base, "expected an array of tensors");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& e = (*it)[i];
      const std::string ptr = base + "/" + std::to_string(i);
      if (!e.is_object()) return Err(ptr, "expected a tensor object {name, shape, dtype}");
      Tensor t;
      t.role = role;
      auto sh = e.find("shape");
      if (sh == e.end()) return Err(ptr + "/shape", "missing");
      // Shape errors name the tensor: "/inputs/0/shape/1: ... (tensor "x")".
      if (auto nm = e.find("name"); nm != e.end() && nm->is_string()) tensor_ = nm->get<std::string>();
      MEMSIM_ASSIGN_OR_RETURN(t.shape, Shape(*sh, ptr + "/shape"));
      tensor_.clear();
      if (auto dt = e.find("dtype"); dt != e.end()) {
        auto d = dt->is_string() ? ParseDtype(dt->get<std::string>()) : std::nullopt;
        if (!d) return Err(ptr + "/dtype", "unknown dtype " + Show(*dt));
        t.dtype = *d;
      }
      t.requires_grad = role == TensorRole::kParameter;
      if (auto rg = e.find("requires_grad"); rg != e.end()) {
        if (!rg->is_boolean()) return Err(ptr + "/requires_grad", "expected true or false");
        if (role != TensorRole::kParameter && rg->get<bool>())
          return Err(ptr + "/requires_grad", "only parameters may require grad");
        t.requires_grad = rg->get<bool>();
      }
      auto name = e.find("name");
      MEMSIM_ASSIGN_OR_RETURN(TensorId id,
                              NewTensor(name == e.end() ? json() : *name, ptr + "/name", t));
      out->push_back(id);
    }
    return Status::OK();
  }

  Result<AttrValue> Attr(const json& v, const std::string& ptr) {
    if (v.is_null()) return AttrValue(AttrNull{});
    if (v.is_boolean()) return AttrValue(v.get<bool>());
    if (v.is_number_float()) return AttrValue(v.get<double>());
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxDim))
        return Err(ptr, "integer " + Show(v) + " is too large");
      int64_t x = v.get<int64_t>();
      if (x > kMaxDim || x < -kMaxDim) return Err(ptr, "integer " + Show(v) + " is out of range");
      return AttrValue(DimExpr::Const(x));
    }
    if (v.is_string()) {
      // Size-valued scalar attributes may be symbolic ("seq", "batch*12"); other strings are text.
      static const char* kSizeKeys[] = {"end", "start", "split_size", "size", "index"};
      std::string key = ptr.substr(ptr.rfind('/') + 1);
      for (const char* k : kSizeKeys)
        if (key == k) {
          MEMSIM_ASSIGN_OR_RETURN(DimExpr d, Dim(v, ptr, false));
          return AttrValue(d);
        }
      return AttrValue(v.get<std::string>());
    }
    if (v.is_array()) {
      std::vector<DimExpr> list;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].is_number_integer() && !v[i].is_number_unsigned() && v[i].get<int64_t>() < 0 && v[i].get<int64_t>() >= -kMaxDim) {
          list.push_back(DimExpr::Const(v[i].get<int64_t>()));
          continue;
        }
        MEMSIM_ASSIGN_OR_RETURN(DimExpr d, Dim(v[i], ptr + "/" + std::to_string(i), true));
        list.push_back(d);
      }
      return AttrValue(list);
    }
    return Err(ptr, "unsupported attribute value " + Show(v));
  }

  Status Ops(const json& doc) {
    auto it = doc.find("ops");
    if (it == doc.end()) return Err(ops_pointer_, "missing");
    if (!it->is_array()) return Err(ops_pointer_, "expected an array of ops");
    // Pass 1: declare every output so an op may name a tensor produced by a later-listed op
    // (the order is then fixed by TopologicalOrder, and a cycle is reported there).
    for (size_t i = 0; i < it->size(); ++i) {
      const json& e = (*it)[i];
      const std::string ptr = ops_pointer_ + "/" + std::to_string(i);
      if (!e.is_object()) return Err(ptr, "expected an op object");
      auto kind_it = e.find("op");
      if (kind_it == e.end() || !kind_it->is_string()) return Err(ptr + "/op", "missing op kind");
      auto kind = ParseOpKind(kind_it->get<std::string>());
      if (!kind) return Err(ptr + "/op", "unknown op \"" + kind_it->get<std::string>() + "\"");
      Op op;
      op.kind = *kind;
      op.pointer = ptr;
      auto outs = e.find("outputs");
      if (outs == e.end() || !outs->is_array() || outs->empty())
        return Err(ptr + "/outputs", "expected a non-empty array of tensor names");
      for (size_t j = 0; j < outs->size(); ++j) {
        Tensor t;
        t.producer = OpId(g_.ops.size());
        MEMSIM_ASSIGN_OR_RETURN(TensorId id,
                                NewTensor((*outs)[j], ptr + "/outputs/" + std::to_string(j), t));
        op.outputs.push_back(id);
      }
      g_.ops.push_back(std::move(op));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& e = (*it)[i];
      Op& op = g_.ops[i];
      const std::string& ptr = op.pointer;
      if (auto ins = e.find("inputs"); ins != e.end()) {
        if (!ins->is_array()) return Err(ptr + "/inputs", "expected an array of tensor names");
        for (size_t j = 0; j < ins->size(); ++j) {
          MEMSIM_ASSIGN_OR_RETURN(TensorId t, Ref((*ins)[j], ptr + "/inputs/" + std::to_string(j)));
          if (std::find(op.outputs.begin(), op.outputs.end(), t) != op.outputs.end())
            return Err(ptr + "/inputs/" + std::to_string(j),
                       "op consumes its own output \"" + g_.tensors[t].name + "\" (a cycle)");
          op.inputs.push_back(t);
        }
      }
      if (auto a = e.find("attrs"); a != e.end()) {
        if (!a->is_object()) return Err(ptr + "/attrs", "expected an object");
        for (auto& [k, v] : a->items()) {
          if (k == "keep_alive") {
            if (!v.is_array()) return Err(ptr + "/attrs/keep_alive", "expected an array of tensor names");
            for (size_t j = 0; j < v.size(); ++j) {
              MEMSIM_ASSIGN_OR_RETURN(TensorId t, Ref(v[j], ptr + "/attrs/keep_alive/" + std::to_string(j)));
              op.keep_alive.push_back(t);
            }
            continue;
          }
          MEMSIM_ASSIGN_OR_RETURN(AttrValue av, Attr(v, ptr + "/attrs/" + k));
          op.attrs.Set(k, std::move(av));
        }
      }
      MEMSIM_ASSIGN_OR_RETURN(op.module, String(e, "module", "", false));
      MEMSIM_ASSIGN_OR_RETURN(op.name, String(e, "name", g_.tensors[op.outputs[0]].name, false));
    }
    return Status::OK();
  }

  /// Puts the ops in |order| and renumbers producers.
  void Reorder(const std::vector<OpId>& order) {
    bool identity = true;
    for (OpId i = 0; i < order.size(); ++i) identity &= order[i] == i;
    if (identity) return;
    std::vector<Op> ops;
    ops.reserve(order.size());
    for (OpId o : order) ops.push_back(std::move(g_.ops[o]));
    g_.ops = std::move(ops);
    for (OpId o = 0; o < g_.ops.size(); ++o)
      for (TensorId t : g_.ops[o].outputs) g_.tensors[t].producer = o;
  }

  Graph g_;
  std::string ops_pointer_ = "/ops";  ///< where the ops are read from, for messages
  std::map<std::string, TensorId> names_;
  std::string tensor_;  // the tensor whose shape is being read, for messages
};

}  // namespace

Result<Graph> ParseGraph(const std::string& text, const std::string& source) {
  MEMSIM_RETURN_IF_ERROR(CheckJsonDepth(text, source));
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::out_of_range& e) {
    return Status::ParseError(source + ": invalid JSON: a number is out of range (" +
                              Excerpt(e.what(), 200) + ")");
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the error; turn it into line:column.
    std::string what = e.what();
    if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
    const std::string where = LineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    if (text.empty()) what = "the file is empty";
    return Status::ParseError(source + ":" + where + ": invalid JSON: " + Excerpt(what, 200));
  }
  try {
    return GraphReader(source).Read(doc);
  } catch (const json::exception& e) {
    return Status::ParseError(source + ": " + Excerpt(e.what(), 200));
  }
}

Result<Graph> LoadGraph(const std::string& path) {
  MEMSIM_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path));
  // A pickle (protocol 2+ starts with PROTO, 0x80): torch.cuda.memory._dump_snapshot()'s output.
  if (!text.empty() && static_cast<unsigned char>(text[0]) == 0x80)
    return Status::ParseError(path + ": this is a memory snapshot (a pickle), not a graph: use memsim replay " + path);
  return ParseGraph(text, path);
}

}  // namespace memsim
