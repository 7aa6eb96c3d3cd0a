#include "lib/onnx/model_check.h"

#include <onnx/defs/schema.h>

#include <exception>
#include <set>

#include "lib/util/checked.h"
#include "lib/util/text_limits.h"

namespace memsim::onnx_import {
namespace {

Status Bad(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(where + ": " + what);
}

int64_t ElementBytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 4;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::COMPLEX64:
      return 8;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
      return 2;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return 1;
    case onnx::TensorProto::COMPLEX128:
      return 16;
    default:
      return 0;  // strings and unknown types: no fixed size
  }
}

// Dims in [0, 2^40] with a product that fits; raw or typed data of exactly that many elements.
Status CheckTensor(const onnx::TensorProto& t, const std::string& where) {
  if (t.dims_size() > 16) return Bad(where, "more than 16 dimensions");
  int64_t n = 1;
  for (int k = 0; k < t.dims_size(); ++k) {
    const int64_t d = t.dims(k);
    if (d < 0 || d > kMaxOnnxDim)
      return Bad(where, "dimension " + std::to_string(k) + " is " + std::to_string(d) +
                            " (expected 0 .. 2^40)");
    std::optional<int64_t> m = CheckedMul(n, d);
    if (!m || *m > kMaxOnnxDim) return Bad(where, "element count exceeds 2^40");
    n = *m;
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return Status::OK();
  const int64_t eb = ElementBytes(t.data_type());
  if (t.has_raw_data()) {
    if (eb == 0) return Bad(where, "raw data of a type without a fixed element size");
    if (static_cast<int64_t>(t.raw_data().size()) != n * eb)
      return Bad(where, "raw data holds " + std::to_string(t.raw_data().size()) +
                            " bytes, the dims need " + std::to_string(n * eb));
    return Status::OK();
  }
  const int64_t typed = t.float_data_size() + t.int32_data_size() + t.int64_data_size() +
                        t.double_data_size() + t.uint64_data_size() + t.string_data_size();
  if (typed != 0 && typed != n && !(t.data_type() == onnx::TensorProto::COMPLEX64 && typed == 2 * n))
    return Bad(where, "holds " + std::to_string(typed) + " values, the dims need " +
                          std::to_string(n));
  return Status::OK();
}

// An INTS attribute whose every value must lie in [lo, hi].
Status CheckInts(const onnx::AttributeProto& a, int64_t lo, int64_t hi, const std::string& where) {
  if (a.ints_size() > 64) return Bad(where, "more than 64 values");
  for (int k = 0; k < a.ints_size(); ++k)
    if (a.ints(k) < lo || a.ints(k) > hi)
      return Bad(where, "value " + std::to_string(a.ints(k)) + " at index " + std::to_string(k) +
                            " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "]");
  return Status::OK();
}

Status CheckAttribute(const onnx::AttributeProto& a, const std::string& where) {
  const std::string& name = a.name();
  constexpr int64_t kBig = int64_t{1} << 31;
  if (name == "strides" || name == "dilations" || name == "kernel_shape")
    return CheckInts(a, 1, kBig, where);
  if (name == "pads" || name == "output_padding" || name == "output_shape")
    return CheckInts(a, 0, kBig, where);
  if (name == "group" || name == "blocksize" || name == "num_outputs")
    return a.i() >= 1 && a.i() <= kBig ? Status::OK() : Bad(where, "must be in [1, 2^31]");
  if (name == "axis" || name == "batch_axis" || name == "time_axis")
    return a.i() >= -64 && a.i() <= 64 ? Status::OK() : Bad(where, "must be in [-64, 64]");
  if (name == "axes") return CheckInts(a, -64, 64, where);
  if (name == "perm") {
    MEMSIM_RETURN_IF_ERROR(CheckInts(a, 0, a.ints_size() - 1, where));
    std::set<int64_t> seen(a.ints().begin(), a.ints().end());
    if (static_cast<int>(seen.size()) != a.ints_size()) return Bad(where, "not a permutation");
  }
  if (a.has_t()) MEMSIM_RETURN_IF_ERROR(CheckTensor(a.t(), where));
  for (int k = 0; k < a.tensors_size(); ++k)
    MEMSIM_RETURN_IF_ERROR(CheckTensor(a.tensors(k), where + "[" + std::to_string(k) + "]"));
  if (a.has_g() || a.graphs_size() > 0)
    return Bad(where, "subgraph attributes (If, Loop, Scan) are not supported");
  return Status::OK();
}

Status CheckValueInfo(const onnx::ValueInfoProto& v, const std::string& where) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return Status::OK();
  const auto& shape = v.type().tensor_type().shape();
  if (shape.dim_size() > 16) return Bad(where, "more than 16 dimensions");
  for (int k = 0; k < shape.dim_size(); ++k) {
    const auto& d = shape.dim(k);
    if (d.has_dim_value() && (d.dim_value() < 0 || d.dim_value() > kMaxOnnxDim))
      return Bad(where, "dimension " + std::to_string(k) + " is " +
                            std::to_string(d.dim_value()) + " (expected 0 .. 2^40)");
  }
  return Status::OK();
}

// The op has a schema, required attributes of the schema are present and every attribute the schema knows has
// the schema's type (a Concat without `axis` crashed libonnx's shape inference).
Status CheckAgainstSchema(const onnx::NodeProto& n, int opset, const std::string& where) {
  // An op without a schema leaves its outputs untyped, and libonnx's shape inference of the
  // nodes that consume them dereferences the missing type: such a model is refused here.
  const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
  const onnx::OpSchema* schema =
      onnx_domain ? onnx::OpSchemaRegistry::Schema(n.op_type(), opset, onnx::ONNX_DOMAIN)
                  : nullptr;
  // Exporters use ops newer than the declared opset (HardSwish at opset 13): accepted, unchecked.
  if (schema == nullptr && onnx_domain &&
      onnx::OpSchemaRegistry::Schema(n.op_type(), onnx::ONNX_DOMAIN) != nullptr)
    return Status::OK();
  if (schema == nullptr)
    return Bad(where, "unknown ONNX op (no schema for '" + Excerpt(n.op_type()) + "' in domain '" +
                          Excerpt(n.domain()) + "' at opset " + std::to_string(opset) + ")");
  // Input and output counts within the schema's (node rules read n.output(0) and the required
  // inputs; onnx_import_fuzz: an Add with no output read past the end of its outputs).
  if (n.input_size() < schema->min_input() || n.input_size() > schema->max_input())
    return Bad(where, std::to_string(n.input_size()) + " inputs; the op takes " +
                          std::to_string(schema->min_input()) + " to " + std::to_string(schema->max_input()));
  if (n.output_size() < schema->min_output() || n.output_size() > schema->max_output())
    return Bad(where, std::to_string(n.output_size()) + " outputs; the op makes " +
                          std::to_string(schema->min_output()) + " to " + std::to_string(schema->max_output()));
  for (const auto& [name, attr] : schema->attributes()) {
    const onnx::AttributeProto* given = nullptr;
    for (const auto& a : n.attribute())
      if (a.name() == name) given = &a;
    if (given == nullptr) {
      if (attr.required) return Bad(where, "required attribute '" + name + "' is missing");
      continue;
    }
    if (given->type() != attr.type && given->type() != onnx::AttributeProto::UNDEFINED)
      return Bad(where, "attribute '" + name + "' has the wrong type");
  }
  return Status::OK();
}

}  // namespace

Status CheckOnnxModel(const onnx::ModelProto& model, const std::string& source) {
  const onnx::GraphProto& g = model.graph();
  int opset = 1;
  for (const auto& op : model.opset_import()) {
    if (op.version() < 1 || op.version() > 1000)
      return Bad(source, "opset version " + std::to_string(op.version()) + " is out of range");
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = static_cast<int>(op.version());
  }
  for (int i = 0; i < g.initializer_size(); ++i)
    MEMSIM_RETURN_IF_ERROR(CheckTensor(
        g.initializer(i), source + ": initializer \"" + Excerpt(g.initializer(i).name()) + "\""));
  for (const auto& v : g.input())
    MEMSIM_RETURN_IF_ERROR(CheckValueInfo(v, source + ": input \"" + Excerpt(v.name()) + "\""));
  for (const auto& v : g.output())
    MEMSIM_RETURN_IF_ERROR(CheckValueInfo(v, source + ": output \"" + Excerpt(v.name()) + "\""));
  for (const auto& v : g.value_info())
    MEMSIM_RETURN_IF_ERROR(CheckValueInfo(v, source + ": value_info \"" + Excerpt(v.name()) + "\""));
  // Every node input must be a graph input, an initializer or an earlier node's output (ONNX
  // shape inference dereferences the type of each input: an undefined one crashes libonnx).
  std::set<std::string> defined;
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    const std::string where = source + ": node " + std::to_string(i) + " " + Excerpt(n.op_type()) +
                              " \"" + Excerpt(n.name()) + "\"";
    for (const std::string& in : n.input())
      if (!in.empty() && !defined.count(in))
        return Bad(where, "input \"" + Excerpt(in) + "\" is not defined before the node");
    for (const auto& a : n.attribute())
      MEMSIM_RETURN_IF_ERROR(CheckAttribute(a, where + " attribute " + Excerpt(a.name())));
    MEMSIM_RETURN_IF_ERROR(CheckAgainstSchema(n, opset, where));
    for (const std::string& out : n.output())
      if (!out.empty()) defined.insert(out);
  }
  return Status::OK();
}

}  // namespace memsim::onnx_import
