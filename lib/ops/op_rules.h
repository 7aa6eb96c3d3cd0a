// Op rules: for each OpKind, one row saying how PyTorch runs it — output shapes (and whether an
// output aliases an input: views, in-place ops), what the forward allocates and which tensors
// autograd saves given which inputs require grad, and what its backward allocates.
// Rows live in per-family tables (rules_nn.cc, rules_pointwise.cc, rules_shape.cc, rules_llm.cc,
// rules_attention.cc, rules_activation.cc, rules_fp8.cc, rules_collective.cc, rules_compiled.cc,
// rules_conv_transpose.cc, rules_view_write.cc, rules_unfold.cc, rules_grid.cc, rules_loss.cc, rules_recorded.cc,
// rules_rnn_onednn.cc). Per-op facts (grad alias layout, in-place capable,
// GEMM) are columns of the row. docs/op-rules.md
// summarises the table and holds the Notes the rules cite.
// All functions are pure: safe to call concurrently.
#ifndef MEMSIM_LIB_OPS_OP_RULES_H_
#define MEMSIM_LIB_OPS_OP_RULES_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ops/profile.h"
#include "lib/ops/rg_mask.h"
#include "lib/ops/tensor_meta.h"
#include "lib/util/status.h"

namespace memsim {

/// What a rule sees of one op in one configuration.
struct RuleCtx {
  const Op& op;
  const Bindings& bindings;
  const Profile& profile;
  std::vector<const TensorMeta*> in;   ///< input metas
  std::vector<const TensorMeta*> out;  ///< output metas (empty during shape inference)
  RgMask rg;                           ///< bit i set: input i requires grad
  std::optional<bool> inplace_override;  ///< --inplace-activations on|off (unset = keep)
  /// Backward only: the incoming grad of output 0 as the engine holds it (its layout), or null.
  const TensorMeta* grad_out = nullptr;
  /// The op runs inside a torch.autocast region (its input casts are already applied to |in|).
  bool autocast = false;
  /// Backward only: the incoming grad of each output as the engine holds it (null: undefined, as
  /// for an output nothing differentiable used); grad_outs[0] is grad_out.
  std::vector<const TensorMeta*> grad_outs = {};

  bool rg_in(size_t i) const { return rg.test(i); }
  int64_t num_in() const { return static_cast<int64_t>(in.size()); }
  /// The op's `inplace` attribute, after --inplace-activations.
  bool inplace() const;
};

/// Shape inference result: one meta per output, and for each output the input whose storage
/// it shares (-1: fresh storage).
struct InferOut {
  std::vector<TensorMeta> metas;
  std::vector<int> alias_of;
  int overflow = -1;  ///< the first fresh output whose byte size overflows 64 bits (the binder refuses it)
  void Fresh(TensorMeta m) { metas.push_back(std::move(m)); alias_of.push_back(-1); }
  /// A fresh contiguous output (TensorMeta::Contiguous); nullopt records it in |overflow|.
  void Fresh(std::optional<TensorMeta> m) {
    if (!m && overflow < 0) overflow = static_cast<int>(metas.size());
    Fresh(m ? std::move(*m) : TensorMeta{});
  }
  void Alias(TensorMeta m, int input) { metas.push_back(std::move(m)); alias_of.push_back(input); }
};

/// A tensor a node keeps for backward.
struct SavedRef {
  enum Kind : uint8_t { kInput, kOutput, kExtra } kind;
  int index;
  /// The node saves a transposed 2-D view of it (linear's Wᵀ): what a copy of it costs
  /// (Note [Activation offloading]).
  bool transposed = false;
  /// Where a saved-tensor hook packs it: after this many of the plan's actions (a composite
  /// whose inner node saves between its kernels, FwdPlan::SaveNow); -1: an input before the
  /// kernel, an output or extra after it.
  int pack_after = -1;
  /// Held by an autograd.Function's ctx as a plain attribute (`ctx.A = A`, bitsandbytes'
  /// MatMul8bitFp), not through save_for_backward: no saved-tensor hook packs it, so a node whose
  /// saving the hooks took over (checkpointing) still keeps it.
  bool ctx_attribute = false;
};

/// What the forward of one op does to memory, in order. New outputs that no action allocates
/// are allocated first; extras (hidden outputs such as max-pool indices, dropout noise,
/// norm statistics, and scratch buffers) that are neither saved nor freed are freed at the end.
struct FwdPlan {
  struct Action {
    /// kReleaseUnsaved: the composite's local that extra |index| was ends here, so it dies now
    /// unless the node keeps it (no saving under checkpointing: freed here, not at the op's end).
    enum Kind : uint8_t { kAllocOutput, kAllocExtra, kFreeExtra, kReleaseUnsaved, kHoldUntilUse } kind;
    int index;
    /// kAllocOutput: the storage's bytes when larger than the output's sizes (a kernel that
    /// resize_s its result smaller keeps the storage); 0: the output's own bytes.
    int64_t storage_bytes = 0;
  };
  struct Extra {
    int64_t bytes;
    std::string_view label;
    /// A Python number's wrapped tensor: the node keeps it even where saved-tensor hooks pack
    /// everything else (checkpointing), as SavedVariable never hands a wrapped number to hooks.
    bool wrapped_number = false;
  };
  std::vector<Action> actions;
  std::vector<Extra> extras;
  std::vector<SavedRef> saved;

  void AllocOutput(int j, int64_t storage_bytes = 0) { actions.push_back({Action::kAllocOutput, j, storage_bytes}); }
  int AddExtra(int64_t bytes, std::string_view label);
  void FreeExtra(int k) { actions.push_back({Action::kFreeExtra, k}); }
  void ReleaseUnsaved(int k) { actions.push_back({Action::kReleaseUnsaved, k}); }
  /// Extra |k| outlives the op: an asynchronous collective's work keeps it until output 0 is first
  /// read (funcol's AsyncCollectiveTensor waits then), or the forward pass ends.
  void HoldUntilUse(int k) { actions.push_back({Action::kHoldUntilUse, k}); }
  void Save(SavedRef::Kind kind, int index, bool transposed = false) { saved.push_back({kind, index, transposed}); }
  /// Kept as a ctx attribute (SavedRef::ctx_attribute).
  void KeepAsCtxAttribute(SavedRef::Kind kind, int index) { saved.push_back({kind, index, false, -1, true}); }
  /// Saved by an inner node of a composite at this point of the plan (SavedRef::pack_after).
  void SaveNow(SavedRef::Kind kind, int index) {
    saved.push_back({kind, index, false, static_cast<int>(actions.size())});
  }
};

/// What the backward node of one op does, in order. The engine then reduces broadcast grads
/// (validate_outputs), drops the incoming grads and releases the saved tensors.
struct BwdPlan {
  struct Action {
    enum Kind : uint8_t {
      kGradNew,       ///< a new contiguous grad for input |index| (input-sized; |bytes| > 0: its storage's size)
      kGradAlias,     ///< grad of input |index| = incoming grad of output 0, reshaped/permuted
      kTemp,          ///< scratch of |bytes|, freed by kFreeTemp or at the node's end
      kFreeTemp,      ///< frees temp number |index|
      kReleaseSaved,  ///< drops saved tensor number |index| early (composite ops)
      kReleaseGradOut,  ///< drops the incoming grads now (the first node of a composite used them)
      kGradNewLike,   ///< a new grad for input |index| laid out as layouts[bytes] (same sizes)
      kGradNewView,   ///< as kGradNew, returned as a view of the new buffer (`.t()`: Grad::view)
    } kind;
    int index;
    int64_t bytes = 0;
    std::string_view label;
  };
  std::vector<Action> actions;
  std::vector<TensorMeta> layouts;  ///< the layouts of kGradNewLike actions
  int num_temps = 0;

  void GradNew(int input) { actions.push_back({Action::kGradNew, input, 0, {}}); }
  /// A new grad for input |input| that is a view into a new |storage_bytes| buffer (a DTensor
  /// grad narrowed to its shard keeps the whole tensor it was narrowed from).
  void GradNewInStorage(int input, int64_t storage_bytes) { actions.push_back({Action::kGradNew, input, storage_bytes, {}}); }
  void GradNewView(int input) { actions.push_back({Action::kGradNewView, input, 0, {}}); }
  void GradAlias(int input) { actions.push_back({Action::kGradAlias, input, 0, {}}); }
  int Temp(int64_t bytes, std::string_view label) {
    actions.push_back({Action::kTemp, num_temps, bytes, label});
    return num_temps++;
  }
  void FreeTemp(int k) { actions.push_back({Action::kFreeTemp, k, 0, {}}); }
  void ReleaseSaved(int k) { actions.push_back({Action::kReleaseSaved, k, 0, {}}); }
  void ReleaseGradOut() { actions.push_back({Action::kReleaseGradOut, 0, 0, {}}); }
  void GradNewLike(int input, TensorMeta layout) {
    layouts.push_back(std::move(layout));
    actions.push_back({Action::kGradNewLike, input, static_cast<int64_t>(layouts.size()) - 1, {}});
  }
};

using InferFn = Status (*)(const RuleCtx&, InferOut*);
using FwdFn = void (*)(const RuleCtx&, FwdPlan*);
using BwdFn = void (*)(const RuleCtx&, BwdPlan*);
/// Layout of the grad a pass-through backward (BwdPlan::kGradAlias) hands to input |in| given
/// the incoming grad |grad|, or nullopt when PyTorch must copy (reshape of a non-viewable grad).
using AliasGradFn = std::optional<TensorMeta> (*)(const Op& op, const Bindings& b, const TensorMeta& grad,
                                                  const TensorMeta& in);

struct OpRule {
  OpKind kind;
  int min_inputs, max_inputs;
  uint32_t diff_inputs;  ///< bit i: input i is differentiable (indices, targets, stats are not); bit 31 also inputs 32 on
  InferFn infer;
  FwdFn forward;         ///< null: new outputs, nothing saved
  BwdFn backward;        ///< null: a new grad for every input that requires grad
  AliasGradFn alias_grad = nullptr;  ///< null: AliasGradView (grad viewed with the input's sizes)
  bool inplace_capable = false;      ///< --inplace-activations applies (nn.ReLU(inplace=True) & co.)
  bool gemm = false;                 ///< calls cuBLAS on CUDA (see Note [cuBLAS workspace])
  /// The input whose grad the engine hands on before the others' (-1: input order): the ATen
  /// node's first output. linear's bias is addmm's `self` (AddBackward's `other` on the matmul
  /// path): a bias used at every step of a recurrent layer is summed before the input's and the
  /// weight's grads (Note [Recurrent layers]).
  int8_t dispatch_first = -1;
};

/// The rule row of |kind|.
const OpRule& RuleFor(OpKind kind);

// Family tables, assembled by RuleFor.
extern const std::vector<OpRule> kNnRules;
extern const std::vector<OpRule> kConvRules;
extern const std::vector<OpRule> kConvTransposeRules;
extern const std::vector<OpRule> kPointwiseRules;
extern const std::vector<OpRule> kShapeRules;
extern const std::vector<OpRule> kLlmRules;
extern const std::vector<OpRule> kAttentionRules;
extern const std::vector<OpRule> kActivationRules;
extern const std::vector<OpRule> kQuantizedRules;
extern const std::vector<OpRule> kNnExtraRules;  // rules_nn_extra.cc
extern const std::vector<OpRule> kFp8Rules;
extern const std::vector<OpRule> kCollectiveRules;
extern const std::vector<OpRule> kCompiledRules;
extern const std::vector<OpRule> kViewWriteRules;
extern const std::vector<OpRule> kUnfoldRules;
extern const std::vector<OpRule> kGridRules;
extern const std::vector<OpRule> kLossRules;
extern const std::vector<OpRule> kRecordedRules;
extern const std::vector<OpRule> kMoeRules;
extern const std::vector<OpRule> kRnnOneDnnRules;

/// Whether input |i| of |rule|'s op is differentiable (OpRule::diff_inputs).
inline bool Differentiable(const OpRule& rule, size_t i) { return (rule.diff_inputs >> (i < 32 ? i : 31)) & 1u; }

/// True for ops that call cuBLAS (GEMMs) on CUDA: the row's |gemm| column.
bool IsGemm(OpKind kind);

/// The grad layout of a kGradAlias action for |op| (its row's alias_grad, or AliasGradView).
std::optional<TensorMeta> AliasGrad(const Op& op, const Bindings& b, const TensorMeta& grad, const TensorMeta& in);
/// Alias columns shared by several families: the grad as it is (same shape as the output;
/// validate_outputs reduces a broadcast input), and the default view with the input's sizes.
std::optional<TensorMeta> AliasGradSame(const Op& op, const Bindings& b, const TensorMeta& grad, const TensorMeta& in);
std::optional<TensorMeta> AliasGradView(const Op& op, const Bindings& b, const TensorMeta& grad, const TensorMeta& in);

/// Shared helpers for rule implementations.
Status RuleError(const RuleCtx& c, const std::string& msg);
/// Refuses an op with fewer than |lo| or more than |hi| inputs.
Status NeedInputs(const RuleCtx& c, size_t lo, size_t hi);
/// An int-or-list attribute |name| expanded to |n| spatial values (|dflt| when absent; unset when
/// neither, or when its length is neither 1 nor n).
std::optional<std::vector<int64_t>> SpatialAttr(const RuleCtx& c, const char* name, size_t n,
                                                std::optional<std::vector<int64_t>> dflt);
/// Positions of a sliding window (convolution, pooling) of size |k| over |in| with stride |s|,
/// padding |pad| and dilation |dil|; |ceil|: ceil_mode (the last window must start inside the
/// input or the left padding).
int64_t WindowOut(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t dil, bool ceil);
int64_t Bytes(const TensorMeta& m);
/// An embedding lookup's output (ids, weight [rows, dim]): the ids' sizes and dim, in the weight's
/// dtype (embedding, and a RowwiseParallel embedding's tp_embedding).
Status InferEmbedding(const RuleCtx& c, InferOut* o);
/// embedding_dense_backward of a [num_weights, D] table (Note [CUDA embedding backward]): the
/// grad (|grad_storage_bytes| > 0: a view of a buffer of that size) and the device's temporaries.
void EmbeddingDenseBackward(const RuleCtx& c, BwdPlan* p, int64_t num_weights, int64_t grad_storage_bytes);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_OP_RULES_H_
