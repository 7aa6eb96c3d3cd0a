// The graph IR: one model's forward pass plus its loss, as parsed from a graph file.
// Tensors and ops are value types in vectors; ids are insertion indices. A Graph is immutable
// once built and is shared by const& across every configuration of a sweep: analyses keep their
// results in side tables indexed by id, never in the graph. Start here: docs/README.md.
#ifndef MEMSIM_LIB_IR_GRAPH_H_
#define MEMSIM_LIB_IR_GRAPH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/attrs.h"
#include "lib/ir/dim.h"
#include "lib/ir/dtype.h"
#include "lib/ir/lora_config.h"
#include "lib/ir/quantized_base_config.h"
#include "lib/ir/op_kind.h"
#include "lib/ir/optimizer_program.h"

namespace memsim {

using TensorId = uint32_t;
using OpId = uint32_t;
inline constexpr uint32_t kNone = UINT32_MAX;

/// What a tensor is. Inputs, parameters and buffers exist before the step; activations are
/// produced by ops.
enum class TensorRole : uint8_t { kInput, kParameter, kBuffer, kActivation };

struct Tensor {
  std::string name;
  TensorRole role = TensorRole::kActivation;
  Dtype dtype = Dtype::kFloat32;   ///< declared dtype (leaf tensors); inferred for activations
  SymShape shape;                  ///< declared shape (leaf tensors only)
  bool requires_grad = false;      ///< declared (parameters); activations get it from autodiff
  OpId producer = kNone;           ///< op that produces it (activations)
  std::string pointer;             ///< JSON pointer of its declaration, for messages
};

struct Op {
  OpKind kind;
  std::string name;     ///< unique label (defaults to the first output's name)
  std::string module;   ///< dotted nn.Module path, e.g. "layer3.1.conv2"
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  Attrs attrs;
  /// Tensors a Python name keeps alive at least until this op has run (attribute
  /// `keep_alive`), e.g. a module-local `x` still referenced while a child module runs.
  std::vector<TensorId> keep_alive;
  std::string pointer;  ///< JSON pointer of the op ("/ops/17"), for messages
};

struct Graph {
  std::string name;
  std::string provenance;
  std::string torch_version;  ///< torch.__version__ the exporter ran under ("" = not recorded)
  /// The float dtype the forward was recorded in, where the parameters are declared in another
  /// (a model built in fp32 that FSDP2's MixedPrecisionPolicy computes in bf16); nullopt: theirs.
  std::optional<Dtype> recorded_dtype;
  std::string source;                       ///< file it came from (messages)
  std::vector<std::string> symbols;         ///< symbol id → name
  std::vector<std::optional<int64_t>> symbol_defaults;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;                      ///< in execution order (topologically sorted)
  std::vector<TensorId> inputs;             ///< in file order
  std::vector<TensorId> parameters;         ///< model.parameters() registration order
  std::vector<TensorId> buffers;            ///< model.buffers() order
  std::vector<TensorId> outputs;            ///< held by the caller until after backward
  TensorId loss = kNone;
  /// A user's optimizer recorded by the exporter (`--optimizer FILE.py:CLASS`), if any.
  std::optional<OptimizerProgram> optimizer;
  /// The LoRA adapters the graph was rewritten with (ApplyLora, lib/ir/lora.h), if any.
  std::optional<LoraConfig> lora;
  size_t lora_adapters = 0;  ///< how many Linear modules got one
  /// The quantized base weights the graph was rewritten with (ApplyQuantizedBase,
  /// lib/ir/quantized_base.h), if any.
  std::optional<QuantizedBaseConfig> quantized_base;
  size_t quantized_linears = 0;  ///< how many Linear weights are quantized
  /// The torchao float8 spec the graph was rewritten with (ApplyFp8, lib/ir/fp8.h); "" = none.
  std::string fp8;
  size_t fp8_linears = 0;  ///< how many Linear modules became Float8Linear
  /// Tensor parallelism the graph was rewritten with (ApplyTensorParallel,
  /// lib/ir/tensor_parallel.h): the degree (1 = none), the plan's name, and each sharded
  /// parameter with its Shard dim, in the order parallelize_module distributes them.
  struct TpShard {
    TensorId param;
    int dim;
  };
  int tp_degree = 1;
  std::string tp_plan;
  std::vector<TpShard> tp_shards;
  /// Mixture-of-experts routings, in forward order (the "routing" key, Note [Routed token
  /// counts]): the routed elements (tokens × top-k) and the experts; routing L's per-expert
  /// counts are the symbols routed<L>_e<i>.
  struct Routing {
    DimExpr tokens;
    int64_t experts = 0;
  };
  std::vector<Routing> routing;
  /// Expert parallelism the graph was rewritten with (ApplyExpertParallel,
  /// lib/ir/expert_parallel.h): the degree (1 = none) and the experts' [E/N, ...] weights in
  /// the order ExpertParallel distributes them.
  int ep_degree = 1;
  std::vector<TensorId> ep_shards;
  /// torch.compile (lib/ir/compile_mode.h): the same model run the other way, as its export
  /// wrote it (a compiled graph's eager ops, the `compiled` section's `eager_ops`; under
  /// `--compile off`, the compiled graph), or null.
  std::shared_ptr<const Graph> compile_twin;

  /// Id of the tensor named |name|, or kNone.
  TensorId FindTensor(const std::string& name) const;
  /// Id of the symbol named |name|, or kNone.
  uint32_t FindSymbol(const std::string& name) const;
  /// The symbol values given in the file (unbound symbols are nullopt).
  Bindings DefaultBindings() const { return symbol_defaults; }
  /// Sets every activation's producer from the ops' outputs again (after a rewrite that adds,
  /// removes or reorders ops: LoRA, FP8, tensor parallel).
  void RelinkProducers();
};

/// Parameters and buffers in the order `model.to(device)` moves them: nn.Module._apply visits
/// the children first, then the module's own parameters, then its own buffers (a post-order
/// walk of the module tree implied by the dotted names).
std::vector<TensorId> ModuleApplyOrder(const Graph& g);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_GRAPH_H_
