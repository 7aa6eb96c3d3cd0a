#include "lib/onnx/importer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <fstream>
#include <regex>
#include <sstream>

#include "lib/ops/bind.h"
#include "lib/io/graph_json.h"
#include "lib/onnx/contained_inference.h"
#include "lib/onnx/model_check.h"
#include "lib/util/text_limits.h"
#include "lib/ops/profile.h"

namespace memsim::onnx_import {
namespace {

constexpr int64_t kDefaultBatch = 32;
constexpr size_t kMaxFoldedElems = 4096;  // initializers larger than this are never read

/// A symbol name the graph format accepts: [A-Za-z_][A-Za-z0-9_]*.
std::string SanitizeSymbol(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "s_" + out;
  return out;
}

/// "/layer1/layer1.0/conv1/Conv" → "layer1.0.conv1"; a component that repeats the path so far
/// ("layer1.0" under "layer1") replaces it. Names without '/' have no module.
std::string ModuleOf(const std::string& node_name) {
  if (node_name.empty() || node_name[0] != '/') return "";
  std::vector<std::string> parts;
  std::stringstream ss(node_name);
  std::string p;
  while (std::getline(ss, p, '/'))
    if (!p.empty()) parts.push_back(p);
  if (!parts.empty()) parts.pop_back();  // the op's own name ("Conv", "Add_1")
  std::string path;
  for (const std::string& c : parts) {
    if (!path.empty() && c.rfind(path + ".", 0) == 0) path = c;
    else path = path.empty() ? c : path + "." + c;
  }
  return path;
}

}  // namespace

Importer::Importer(onnx::ModelProto model, std::string source, OnnxImportOptions opt)
    : model_(std::move(model)), source_(std::move(source)), opt_(std::move(opt)) {}

const Value* Importer::Find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

int Importer::InitIndex(const std::string& name) const {
  auto it = init_index_.find(name);
  return it == init_index_.end() ? -1 : it->second;
}

std::optional<std::vector<int64_t>> Importer::InitDims(const std::string& name) const {
  const Value* v = Find(name);
  if (!v || v->kind != Value::Kind::kInit) return std::nullopt;
  const auto& t = graph().initializer(v->init);
  return std::vector<int64_t>(t.dims().begin(), t.dims().end());
}

std::optional<ConstValue> Importer::AsConst(const std::string& name) const {
  const Value* v = Find(name);
  if (!v) return std::nullopt;
  if (v->kind == Value::Kind::kConst) return v->cv;
  if (v->kind == Value::Kind::kInit) return ReadTensor(graph().initializer(v->init), kMaxFoldedElems);
  return std::nullopt;
}

std::optional<ShapeDims> Importer::ShapeOf(const std::string& name) const {
  const Value* v = Find(name);
  if (v && (v->kind == Value::Kind::kConst || v->kind == Value::Kind::kInit ||
            v->kind == Value::Kind::kTransposedInit)) {
    std::vector<int64_t> dims;
    if (v->kind == Value::Kind::kConst) dims = v->cv.shape;
    else dims.assign(graph().initializer(v->init).dims().begin(), graph().initializer(v->init).dims().end());
    if (v->kind == Value::Kind::kTransposedInit && dims.size() == 2) std::swap(dims[0], dims[1]);
    ShapeDims s;
    for (int64_t d : dims) s.push_back(SymInt::Const(d));
    return s;
  }
  auto it = shapes_.find(name);
  if (it == shapes_.end()) return std::nullopt;
  return it->second;
}

const std::vector<int>& Importer::Consumers(const std::string& name) const {
  static const std::vector<int> kEmpty;
  auto it = consumers_.find(name);
  return it == consumers_.end() ? kEmpty : it->second;
}

std::string Importer::UniqueName(const std::string& base) {
  std::string b = base.empty() ? "t" : base;
  if (std::isdigit(static_cast<unsigned char>(b[0]))) b = "_" + b;  // "_0", as torch.fx names Sequential children
  if (!graph_outputs_.count(b) && used_names_.insert(b).second) return b;
  for (int k = 1;; ++k) {
    std::string n = b + "_" + std::to_string(k);
    if (!graph_outputs_.count(n) && used_names_.insert(n).second) return n;
  }
}

std::vector<std::string> Importer::Emit(const std::string& op, const std::vector<std::string>& inputs, Json attrs,
                                        const std::vector<std::string>& onnx_outputs) {
  std::vector<std::string> outs;
  for (const std::string& o : onnx_outputs) {
    std::string name;
    if (!o.empty() && IsGraphOutput(o) && !used_names_.count(o)) {
      name = o;
      used_names_.insert(o);
    } else {
      std::string base = module_;
      for (char& c : base)
        if (c == '.') c = '_';
      name = UniqueName(base.empty() ? op : base);
    }
    outs.push_back(name);
    if (!o.empty()) {
      Value v;
      v.kind = Value::Kind::kTensor;
      v.tensor = name;
      values_[o] = v;
    }
  }
  Json j;
  j["op"] = op;
  if (!module_.empty()) j["module"] = module_;
  j["inputs"] = inputs;
  j["outputs"] = outs;
  if (!attrs.is_null() && !attrs.empty()) j["attrs"] = std::move(attrs);
  ops_.push_back(std::move(j));
  return outs;
}

void Importer::BindConst(const std::string& name, ConstValue v) {
  Value val;
  val.kind = Value::Kind::kConst;
  val.cv = std::move(v);
  values_[name] = std::move(val);
}

Status Importer::BindConstBuffer(const std::string& name, const std::vector<int64_t>& shape, int32_t elem_type) {
  auto dt = DtypeName(elem_type);
  if (!dt) return Status::Unsupported("constant \"" + name + "\" has an element type memsim does not know");
  std::string bname = UniqueName(SanitizeSymbol(name));
  consts_.push_back(Json{{"name", bname}, {"shape", shape}, {"dtype", *dt}});
  Value v;
  v.kind = Value::Kind::kTensor;
  v.tensor = bname;
  values_[name] = v;
  ShapeDims dims;
  for (int64_t d : shape) dims.push_back(SymInt::Const(d));
  shapes_[name] = dims;
  types_[name] = elem_type;
  return Status::OK();
}

void Importer::BindAlias(const std::string& name, const std::string& from) {
  const Value* v = Find(from);
  if (v) values_[name] = *v;
}

void Importer::BindTransposedInit(const std::string& name, int init) {
  Value v;
  v.kind = Value::Kind::kTransposedInit;
  v.init = init;
  values_[name] = v;
}

Result<std::string> Importer::AsTensor(const std::string& name, InitUse::Role role) {
  auto it = values_.find(name);
  if (it == values_.end()) return Status::Unsupported("input \"" + name + "\" is not produced by any earlier node");
  Value& v = it->second;
  switch (v.kind) {
    case Value::Kind::kTensor:
      return v.tensor;
    case Value::Kind::kPoison:
      return Status::Internal("poison");
    case Value::Kind::kInit: {
      InitUse& u = init_use_[v.init];
      if (u.transposed) return Status::Unsupported("initializer \"" + name + "\" is used both transposed and not");
      int32_t et = graph().initializer(v.init).data_type();
      if (u.role == InitUse::Role::kUnused)
        u.role = (et == onnx::TensorProto::FLOAT || et == onnx::TensorProto::FLOAT16 ||
                  et == onnx::TensorProto::BFLOAT16 || et == onnx::TensorProto::DOUBLE)
                     ? role
                     : InitUse::Role::kBuffer;
      return graph().initializer(v.init).name();
    }
    case Value::Kind::kTransposedInit: {
      // Transpose(weight) used as an ordinary operand: the weight, then a permute.
      int init = v.init;
      const std::string& wname = graph().initializer(init).name();
      if (init_use_[init].transposed) return Status::Unsupported("initializer \"" + wname + "\" is used both transposed and not");
      if (init_use_[init].role == InitUse::Role::kUnused) init_use_[init].role = role;
      auto outs = Emit("permute", {wname}, Json{{"dims", {1, 0}}}, {""});
      v.kind = Value::Kind::kTensor;
      v.tensor = outs[0];
      return outs[0];
    }
    case Value::Kind::kConst: {
      // A constant used as a tensor operand becomes a buffer.
      if (v.cv.numel() > kMaxFoldedElems) return Status::Unsupported("constant \"" + name + "\" is too large");
      auto dt = DtypeName(v.cv.elem_type);
      if (!dt) return Status::Unsupported("constant \"" + name + "\" has an element type memsim does not know");
      for (const SymInt& s : v.cv.ints)
        if (!s.is_const()) return Status::Unsupported("shape value \"" + name + "\" used as a tensor");
      std::string bname = UniqueName(SanitizeSymbol(name));
      Json b;
      b["name"] = bname;
      b["shape"] = v.cv.shape;
      b["dtype"] = *dt;
      consts_.push_back(b);
      v.kind = Value::Kind::kTensor;
      v.tensor = bname;
      return bname;
    }
  }
  return Status::Internal("unreachable");
}

Result<std::string> Importer::AsTransposedWeight(const std::string& name) {
  const Value* v = Find(name);
  if (!v || v->kind != Value::Kind::kInit) return Status::Internal("not an initializer: " + name);
  InitUse& u = init_use_[v->init];
  if (u.role != InitUse::Role::kUnused && !u.transposed)
    return Status::Unsupported("initializer \"" + name + "\" is used both transposed and not");
  u.role = InitUse::Role::kParameter;
  u.transposed = true;
  return name;
}

std::optional<int32_t> Importer::TypeOf(const std::string& name) const {
  const Value* v = Find(name);
  if (v && v->kind == Value::Kind::kConst) return v->cv.elem_type;
  if (v && v->kind == Value::Kind::kInit) return graph().initializer(v->init).data_type();
  auto it = types_.find(name);
  if (it == types_.end()) return std::nullopt;
  return it->second;
}

std::optional<SymInt> Importer::DimOf(const onnx::TensorShapeProto_Dimension& d, bool first, bool is_input) {
  if (d.has_dim_value()) return SymInt::Const(d.dim_value());
  if (d.has_dim_param() && !d.dim_param().empty()) {
    auto it = dim_params_.find(d.dim_param());
    if (it != dim_params_.end()) return SymInt{1, {it->second}};
    if (!is_input) return std::nullopt;
    std::string sym = first ? opt_.batch_symbol : SanitizeSymbol(d.dim_param());
    dim_params_[d.dim_param()] = sym;
    if (std::find(symbols_.begin(), symbols_.end(), sym) == symbols_.end()) symbols_.push_back(sym);
    return SymInt{1, {sym}};
  }
  if (is_input && first) {
    if (std::find(symbols_.begin(), symbols_.end(), opt_.batch_symbol) == symbols_.end())
      symbols_.push_back(opt_.batch_symbol);
    return SymInt{1, {opt_.batch_symbol}};
  }
  return std::nullopt;
}

Status Importer::ReadInputs() {
  const auto& g = graph();
  for (int i = 0; i < g.initializer_size(); ++i) {
    init_index_[g.initializer(i).name()] = i;
    Value v;
    v.kind = Value::Kind::kInit;
    v.init = i;
    values_[g.initializer(i).name()] = v;
    used_names_.insert(g.initializer(i).name());
  }
  init_use_.assign(g.initializer_size(), InitUse{});
  for (int i = 0; i < g.input_size(); ++i) {
    const auto& in = g.input(i);
    if (init_index_.count(in.name())) continue;  // keep_initializers_as_inputs
    const std::string where = source_ + ": graph input " + std::to_string(i) + " \"" + in.name() + "\"";
    if (!in.type().has_tensor_type()) return Status::Unsupported(where + ": not a tensor");
    const auto& tt = in.type().tensor_type();
    auto dt = DtypeName(tt.elem_type());
    if (!dt) return Status::Unsupported(where + ": element type " + std::to_string(tt.elem_type()) + " has no memsim dtype");
    if (!tt.has_shape()) return Status::Unsupported(where + ": no shape");
    Json shape = Json::array();
    ShapeDims dims;
    for (int k = 0; k < tt.shape().dim_size(); ++k) {
      // An unnamed first dimension is the batch: name it so shape inference carries it along.
      auto* md = model_.mutable_graph()->mutable_input(i)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(k);
      if (k == 0 && !md->has_dim_value() && md->dim_param().empty()) md->set_dim_param(opt_.batch_symbol);
      auto d = DimOf(tt.shape().dim(k), k == 0, true);
      if (!d) return Status::Unsupported(where + ": dimension " + std::to_string(k) + " has no size or name");
      shape.push_back(d->ToJson());
      dims.push_back(*d);
    }
    shapes_[in.name()] = dims;
    types_[in.name()] = tt.elem_type();
    used_names_.insert(in.name());
    Value v;
    v.kind = Value::Kind::kTensor;
    v.tensor = in.name();
    values_[in.name()] = v;
    Json j;
    j["name"] = in.name();
    j["shape"] = shape;
    j["dtype"] = *dt;
    inputs_.push_back(j);
  }
  for (const auto& o : g.output()) {
    graph_outputs_.insert(o.name());
  }
  return Status::OK();
}

Status Importer::ReadShapes() {
  // ONNX shape inference fills value_info; a failure there only leaves shapes unknown. It runs
  // in a child process: Note [Contained ONNX shape inference].
  auto inferred = InferShapesContained(model_, source_);
  if (!inferred.ok()) return inferred.status();
  onnx::GraphProto* g = model_.mutable_graph();
  *g->mutable_value_info() = std::move(*inferred->mutable_value_info());
  if (inferred->output_size() == g->output_size()) *g->mutable_output() = std::move(*inferred->mutable_output());
  auto take = [&](const onnx::ValueInfoProto& vi) {
    if (shapes_.count(vi.name()) || !vi.type().has_tensor_type()) return;
    types_[vi.name()] = vi.type().tensor_type().elem_type();
    if (!vi.type().tensor_type().has_shape()) return;
    ShapeDims dims;
    for (const auto& d : vi.type().tensor_type().shape().dim()) dims.push_back(DimOf(d, false, false));
    shapes_[vi.name()] = dims;
  };
  for (const auto& vi : graph().value_info()) take(vi);
  for (const auto& vi : graph().output()) take(vi);
  return Status::OK();
}

void Importer::ComputeModules() {
  std::set<std::string> seen;
  static const std::regex kRepeat("^(.*)_([0-9]+)$");
  for (const auto& n : graph().node()) {
    std::string m = ModuleOf(n.name());
    // torch.onnx suffixes a module's second call "relu_1": fold it back when "relu" ran before.
    std::smatch sm;
    if (std::regex_match(m, sm, kRepeat) && seen.count(sm[1].str())) m = sm[1].str();
    seen.insert(m);
    modules_.push_back(m);
  }
}

Status Importer::ConvertNode(int i) {
  const auto& n = node(i);
  for (const std::string& in : n.input()) {
    const Value* v = Find(in);
    if (!in.empty() && v && v->kind == Value::Kind::kPoison) return Status::Internal("poison");
  }
  module_ = modules_[i];
  Status st = ConvertNodeRule(*this, i);
  if (st.ok()) FillShapes(i);
  return st;
}

void Importer::FillShapes(int i) {
  // ONNX shape inference does not see through Slices with computed bounds (torch.onnx's
  // nn.MultiheadAttention): propagate such shapes ourselves.
  const auto& n = node(i);
  for (int k = 0; k < n.output_size(); ++k) {
    const std::string& o = n.output(k);
    const Value* v = Find(o);
    // Unbound outputs are intermediates of a fused pattern (MatMul before its bias Add).
    if (o.empty() || (v && v->kind != Value::Kind::kTensor)) continue;
    auto known = shapes_.find(o);
    bool complete = known != shapes_.end();
    if (complete)
      for (const auto& d : known->second) complete = complete && d.has_value();
    if (complete) continue;
    auto f = FallbackShape(*this, n, k);
    if (!f) continue;
    if (known != shapes_.end() && known->second.size() == f->size())
      for (size_t d = 0; d < f->size(); ++d)
        if (!(*f)[d]) (*f)[d] = known->second[d];
    shapes_[o] = *f;
  }
}

Result<Json> Importer::Run() {
  for (const auto& op : model_.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  if (!model_.has_graph()) return Status::ParseError(source_ + ": no graph (not an ONNX model?)");
  MEMSIM_RETURN_IF_ERROR(ReadInputs());
  MEMSIM_RETURN_IF_ERROR(ReadShapes());
  ComputeModules();
  fused_.assign(graph().node_size(), false);
  for (int i = 0; i < graph().node_size(); ++i)
  {
    for (const std::string& in : node(i).input()) consumers_[in].push_back(i);
    for (const std::string& out : node(i).output()) producer_[out] = i;
  }
  for (int i = 0; i < graph().node_size(); ++i) {
    if (fused_[i]) {
      FillShapes(i);  // bound by the pattern that fused it
      continue;
    }
    Status st = ConvertNode(i);
    if (!st.ok()) {
      for (const std::string& o : node(i).output()) values_[o] = Value{};  // poison
      if (st.code() == Status::Code::kInternal && st.message() == "poison") continue;
      const auto& n = node(i);
      errors_.push_back("node " + std::to_string(i) + " " + n.op_type() + " \"" + n.name() + "\": " + st.message());
    }
  }
  if (!errors_.empty()) {
    std::string msg = source_ + ": " + std::to_string(errors_.size()) + " unsupported ONNX node" +
                      (errors_.size() == 1 ? "" : "s") + ": ";
    for (size_t k = 0; k < errors_.size(); ++k) msg += (k ? "; " : "") + errors_[k];
    return Status::Unsupported(msg);
  }
  return Assemble();
}

Result<Json> Importer::Assemble() {
  const std::string where = source_ + ": ";
  Json g;
  g["format"] = "memsim-graph";
  g["version"] = 1;
  g["name"] = !opt_.name.empty() ? opt_.name : (!graph().name().empty() ? graph().name() : "model");
  g["provenance"] = !opt_.provenance.empty() ? opt_.provenance : "imported from " + source_ + " by memsim import-onnx";
  Json symbols = Json::object();
  for (const std::string& s : symbols_) {
    auto it = opt_.sets.find(s);
    if (it != opt_.sets.end()) symbols[s] = it->second;
    else if (s == opt_.batch_symbol) symbols[s] = kDefaultBatch;
    else
      return Status::InvalidArgument(where + "symbol \"" + s + "\" (an input dim_param) has no default: pass --set " + s + "=N");
  }
  for (const auto& [k, v] : opt_.sets)
    if (std::find(symbols_.begin(), symbols_.end(), k) == symbols_.end())
      return Status::InvalidArgument(where + "--set " + k + "=" + std::to_string(v) + ": the model has no symbol \"" + k + "\"");
  g["symbols"] = symbols;

  // Outputs and the loss.
  Json outputs = Json::array();
  std::string primary;
  std::optional<ShapeDims> primary_shape;
  int32_t primary_type = onnx::TensorProto::FLOAT;
  for (const auto& o : graph().output()) {
    const Value* v = Find(o.name());
    if (!v || v->kind != Value::Kind::kTensor) continue;
    outputs.push_back(v->tensor);
    if (primary.empty()) {
      primary = v->tensor;
      primary_shape = ShapeOf(o.name());
      if (o.type().has_tensor_type()) primary_type = o.type().tensor_type().elem_type();
    }
  }
  if (outputs.empty()) return Status::Unsupported(where + "the graph has no tensor output");
  Json inputs = inputs_;
  std::string loss;
  if (opt_.loss != "none") {
    if (used_names_.count("target")) return Status::InvalidArgument(where + "a tensor is already named \"target\"");
    if (!primary_shape) return Status::Unsupported(where + "the shape of output \"" + primary + "\" is unknown; cannot add the loss");
    Json shape = Json::array();
    for (const auto& d : *primary_shape) {
      if (!d) return Status::Unsupported(where + "the shape of output \"" + primary + "\" is not static or symbolic; cannot add the loss");
      shape.push_back(d->ToJson());
    }
    std::string lname = primary, tname = "target";
    if (opt_.loss == "cross_entropy") {
      if (shape.size() < 2) return Status::Unsupported(where + "cross_entropy needs [batch, classes] logits; output \"" + primary + "\" has rank " + std::to_string(shape.size()));
      Json tshape = Json::array();
      tshape.push_back(shape[0]);
      if (shape.size() > 2) {
        for (size_t k = 1; k + 1 < shape.size(); ++k) tshape.push_back(shape[k]);
      }
      inputs.push_back(Json{{"name", "target"}, {"shape", tshape}, {"dtype", "int64"}});
      if (shape.size() > 2) {
        ops_.push_back(Json{{"op", "view"}, {"module", "loss"}, {"inputs", {lname}}, {"outputs", {"loss:logits"}},
                            {"attrs", {{"shape", {-1, shape.back()}}}}});
        ops_.push_back(Json{{"op", "view"}, {"module", "loss"}, {"inputs", {"target"}}, {"outputs", {"loss:target"}},
                            {"attrs", {{"shape", {-1}}}}});
        lname = "loss:logits";
        tname = "loss:target";
      }
      ops_.push_back(Json{{"op", "cross_entropy"}, {"module", "loss"}, {"inputs", {lname, tname}}, {"outputs", {"loss"}},
                          {"attrs", {{"reduction", "mean"}, {"label_smoothing", 0.0}}}});
    } else if (opt_.loss == "mse") {
      inputs.push_back(Json{{"name", "target"}, {"shape", shape}, {"dtype", DtypeName(primary_type).value_or("float32")}});
      ops_.push_back(Json{{"op", "mse_loss"}, {"module", "loss"}, {"inputs", {lname, "target"}}, {"outputs", {"loss"}},
                          {"attrs", {{"reduction", "mean"}}}});
    } else {
      return Status::InvalidArgument("--loss \"" + opt_.loss + "\": expected cross_entropy, mse or none");
    }
    loss = "loss";
  }
  g["inputs"] = inputs;

  Json params = Json::array(), buffers = Json::array();
  for (int i = 0; i < graph().initializer_size(); ++i) {
    const InitUse& u = init_use_[i];
    if (u.role == InitUse::Role::kUnused) continue;
    const auto& t = graph().initializer(i);
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    if (u.transposed && dims.size() == 2) std::swap(dims[0], dims[1]);
    auto dt = DtypeName(t.data_type());
    if (!dt) return Status::Unsupported(where + "initializer \"" + t.name() + "\" has element type " + std::to_string(t.data_type()) + " (no memsim dtype)");
    Json j{{"name", t.name()}, {"shape", dims}, {"dtype", *dt}};
    (u.role == InitUse::Role::kParameter ? params : buffers).push_back(j);
    if (auto it = extra_buffers_.find(i); it != extra_buffers_.end())
      for (const Json& b : it->second) buffers.push_back(b);
  }
  for (const auto& c : consts_) buffers.push_back(c);
  g["parameters"] = params;
  g["buffers"] = buffers;
  g["ops"] = ops_;
  g["outputs"] = outputs;
  if (!loss.empty()) g["loss"] = loss;

  // Validate: the file must load and bind in memsim.
  const std::string text = GraphJsonText(g);
  auto parsed = ParseGraph(text, source_ + " (imported graph)");
  if (!parsed.ok()) return Status::InvalidArgument("import produced an invalid graph: " + parsed.status().message());
  auto profile = FindProfile("cuda");
  if (!profile) return Status::Internal("no cuda profile");
  BindOptions bo;
  bo.profile = &*profile;
  auto bound = BindGraph(*parsed, parsed->DefaultBindings(), bo);
  if (!bound.ok()) return Status::Unsupported("the imported graph does not bind: " + bound.status().message());
  return g;
}

}  // namespace memsim::onnx_import

namespace memsim {

Result<nlohmann::ordered_json> ImportOnnx(const std::string& bytes, const std::string& source,
                                          const OnnxImportOptions& opt) {
  onnx::ModelProto model;
  bool parsed = false;
  try {
    parsed = model.ParseFromString(bytes);
  } catch (const std::exception& e) {
    parsed = false;
  }
  if (!parsed) {
    return Status::ParseError(source + ": not a valid ONNX model (protobuf parse failed after reading " +
                              std::to_string(bytes.size()) + " bytes; truncated or not ONNX?)");
  }
  if (!model.has_graph() || model.graph().node_size() == 0)
    return Status::ParseError(source + ": the ONNX model has no graph nodes (truncated or not ONNX?)");
  // Nothing interprets the model (ONNX shape inference included) before it is validated.
  MEMSIM_RETURN_IF_ERROR(onnx_import::CheckOnnxModel(model, source));
  try {
    onnx_import::Importer im(std::move(model), source, opt);
    return im.Run();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source + ": ONNX import failed: " + Excerpt(e.what(), 200));
  }
}

Result<nlohmann::ordered_json> ImportOnnxFile(const std::string& path, const OnnxImportOptions& opt) {
  MEMSIM_ASSIGN_OR_RETURN(std::string bytes, ReadInputFile(path));
  return ImportOnnx(bytes, path, opt);
}

namespace {

/// json.dumps(v, separators=(", ", ": ")) as the Python exporter writes it.
std::string Compact(const nlohmann::ordered_json& v) {
  if (v.is_object()) {
    std::string s = "{";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      s += (first ? "" : ", ") + nlohmann::ordered_json(it.key()).dump() + ": " + Compact(it.value());
      first = false;
    }
    return s + "}";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + Compact(v[i]);
    return s + "]";
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    // The range test first: converting a double beyond int64 is undefined (onnx_import_fuzz).
    if (std::abs(d) < 1e15 && d == static_cast<double>(static_cast<int64_t>(d))) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", d);
      return buf;
    }
  }
  return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

std::string GraphJsonText(const nlohmann::ordered_json& g) {
  std::string s = "{\n";
  size_t i = 0;
  for (auto it = g.begin(); it != g.end(); ++it, ++i) {
    const auto& v = it.value();
    const std::string comma = i + 1 < g.size() ? "," : "";
    const std::string key = nlohmann::ordered_json(it.key()).dump();
    bool list_of_objects = v.is_array() && !v.empty();
    for (const auto& x : v.is_array() ? v : nlohmann::ordered_json::array())
      if (!x.is_object()) list_of_objects = false;
    if (list_of_objects) {
      s += "  " + key + ": [\n";
      for (size_t k = 0; k < v.size(); ++k) s += "    " + Compact(v[k]) + (k + 1 < v.size() ? "," : "") + "\n";
      s += "  ]" + comma + "\n";
    } else {
      s += "  " + key + ": " + Compact(v) + comma + "\n";
    }
  }
  return s + "}\n";
}

}  // namespace memsim
