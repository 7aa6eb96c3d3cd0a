// The ONNX importer's working state (internal to lib/onnx/): what every ONNX value has become
// (a memsim tensor, a folded constant, a not-yet-used initializer), the ops emitted so far, and
// the unsupported nodes found. importer.cc holds the framework (inputs, naming, emitting,
// assembling the graph); node_rules.cc maps each ONNX op type. One Importer per model.
#ifndef MEMSIM_LIB_ONNX_IMPORTER_H_
#define MEMSIM_LIB_ONNX_IMPORTER_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "lib/onnx/const_value.h"
#include "lib/onnx/onnx_import.h"
#include "lib/util/status.h"

namespace memsim::onnx_import {

using Json = nlohmann::ordered_json;

/// Input |k| of |n|, or "" when the node has no such input.
inline std::string NodeInput(const onnx::NodeProto& n, int k) { return n.input_size() > k ? n.input(k) : ""; }

/// The attribute |name| of |n|, or null.
inline const onnx::AttributeProto* NodeAttr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

/// What an ONNX value name stands for.
struct Value {
  enum class Kind { kTensor, kConst, kInit, kTransposedInit, kPoison };
  Kind kind = Kind::kPoison;
  std::string tensor;       ///< kTensor: memsim tensor name
  ConstValue cv;            ///< kConst
  int init = -1;            ///< kInit / kTransposedInit: index into graph.initializer
};

/// A dimension of a value's shape from ONNX shape inference; nullopt = unknown.
using ShapeDims = std::vector<std::optional<SymInt>>;

/// Where an initializer ends up.
struct InitUse {
  enum class Role { kUnused, kParameter, kBuffer };
  Role role = Role::kUnused;
  bool transposed = false;  ///< written with its two dimensions swapped (MatMul weight [in,out])
};

class Importer {
 public:
  Importer(onnx::ModelProto model, std::string source, OnnxImportOptions opt);
  Result<Json> Run();

  // ---- used by the node rules (node_rules.cc) ----
  const onnx::NodeProto& node(int i) const { return graph().node(i); }
  const onnx::GraphProto& graph() const { return model_.graph(); }
  int64_t opset() const { return opset_; }

  /// The value |name| refers to; a missing optional input ("") is nullptr.
  const Value* Find(const std::string& name) const;
  /// The memsim tensor for ONNX value |name|, materializing initializers and constants.
  Result<std::string> AsTensor(const std::string& name, InitUse::Role role = InitUse::Role::kParameter);
  /// Initializer |name| as a linear weight stored [in,out]: written as a parameter [out,in].
  Result<std::string> AsTransposedWeight(const std::string& name);
  /// Element type of |name| from the inputs or ONNX shape inference, or nullopt.
  std::optional<int32_t> TypeOf(const std::string& name) const;
  /// The folded constant |name| holds (Constant, small initializer, shape chain), or nullopt.
  std::optional<ConstValue> AsConst(const std::string& name) const;
  /// Shape of |name| from ONNX shape inference (or a constant's shape), or nullopt.
  std::optional<ShapeDims> ShapeOf(const std::string& name) const;
  /// Records the shape of |name| (the importer's own propagation, shape_fallback.cc).
  void SetShape(const std::string& name, ShapeDims dims) { shapes_[name] = std::move(dims); }
  /// Dims of initializer |name| if it is one.
  std::optional<std::vector<int64_t>> InitDims(const std::string& name) const;
  int InitIndex(const std::string& name) const;

  /// Emits one memsim op for the current node and returns its output tensor names. Output i is
  /// bound to ONNX value |onnx_outputs[i]| unless that is empty (an intermediate of a chain).
  std::vector<std::string> Emit(const std::string& op, const std::vector<std::string>& inputs, Json attrs,
                                const std::vector<std::string>& onnx_outputs);
  void BindConst(const std::string& name, ConstValue v);
  void BindAlias(const std::string& name, const std::string& from);
  /// Binds |name| to a new buffer of |shape| and |elem_type| (a Constant too large to fold).
  Status BindConstBuffer(const std::string& name, const std::vector<int64_t>& shape, int32_t elem_type);
  void BindTransposedInit(const std::string& name, int init);
  /// Marks node |i| as consumed by a fused pattern; its outputs get bound by the pattern.
  void MarkFused(int i) { fused_[i] = true; }
  bool IsFused(int i) const { return fused_[i]; }
  /// Node indices reading ONNX value |name|.
  const std::vector<int>& Consumers(const std::string& name) const;
  /// Adds a buffer ONNX lost (BatchNorm's num_batches_tracked), listed right after initializer |init|.
  void AddBufferAfterInit(int init, Json buffer) { extra_buffers_[init].push_back(std::move(buffer)); }
  /// Index of the node producing |name|, or -1.
  int Producer(const std::string& name) const {
    auto it = producer_.find(name);
    return it == producer_.end() ? -1 : it->second;
  }
  bool IsGraphOutput(const std::string& name) const { return graph_outputs_.count(name) > 0; }

 private:
  Status ReadInputs();
  Status ReadShapes();
  void ComputeModules();
  Status ConvertNode(int i);
  void FillShapes(int i);
  Result<Json> Assemble();
  std::string UniqueName(const std::string& base);
  std::optional<SymInt> DimOf(const onnx::TensorShapeProto_Dimension& d, bool first, bool is_input);

  onnx::ModelProto model_;
  std::string source_;
  OnnxImportOptions opt_;
  int64_t opset_ = 13;
  std::map<std::string, Value> values_;
  std::map<std::string, ShapeDims> shapes_;
  std::map<std::string, int32_t> types_;
  std::map<std::string, int> init_index_;
  std::vector<InitUse> init_use_;
  std::map<std::string, std::vector<int>> consumers_;
  std::map<std::string, int> producer_;
  std::set<std::string> graph_outputs_;
  std::vector<bool> fused_;
  std::vector<std::string> modules_;        // per node
  std::string module_;                      // of the node being converted
  std::set<std::string> used_names_;
  std::map<std::string, std::string> dim_params_;   // ONNX dim_param → memsim symbol
  std::vector<std::string> symbols_;                // in order of appearance
  Json inputs_ = Json::array();
  Json ops_ = Json::array();
  Json consts_ = Json::array();                     // buffers made from Constant nodes
  std::map<int, std::vector<Json>> extra_buffers_;  // by initializer index
  std::vector<std::string> errors_;
};

/// Shape of output |out| of |n| from its inputs' shapes and folded constants (shape_fallback.cc),
/// for values ONNX shape inference left (partly) unknown; nullopt if it cannot tell.
std::optional<ShapeDims> FallbackShape(Importer& im, const onnx::NodeProto& n, int out);

using Rule = std::function<Status(Importer&, const onnx::NodeProto&, int)>;
/// ConstantOfShape, Equal, Where (fold_rules.cc).
const std::map<std::string, Rule>& FoldRules();

/// Fuses torch.onnx's tanh-approximation GELU starting at Mul(x, x) (node |i|) into one `gelu`.
bool TryGeluTanhPattern(Importer& im, const onnx::NodeProto& sq, int i);

/// Converts node |i| (node_rules.cc). Unsupported forms return Status::Unsupported(reason).
Status ConvertNodeRule(Importer& im, int i);

}  // namespace memsim::onnx_import

#endif  // MEMSIM_LIB_ONNX_IMPORTER_H_
