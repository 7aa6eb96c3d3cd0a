#include "lib/ops/op_rules.h"

#include <array>

#include "lib/util/check.h"

namespace memsim {
namespace {

constexpr size_t kNumKinds = kNumOpKinds;

std::array<const OpRule*, kNumKinds> BuildIndex() {
  std::array<const OpRule*, kNumKinds> idx{};
  for (const auto* table : {&kNnRules, &kConvRules, &kConvTransposeRules, &kPointwiseRules, &kShapeRules, &kLlmRules, &kAttentionRules, &kActivationRules,
                            &kQuantizedRules, &kFp8Rules, &kCollectiveRules,
                            &kCompiledRules, &kViewWriteRules, &kUnfoldRules, &kGridRules, &kLossRules, &kRecordedRules, &kMoeRules, &kRnnOneDnnRules,
                            &kNnExtraRules})
    for (const OpRule& r : *table) idx[static_cast<size_t>(r.kind)] = &r;
  return idx;
}

}  // namespace

bool RuleCtx::inplace() const {
  // `inplace_fixed`: the code calls the in-place method itself (`x.sigmoid_()`, ATen's RNN cells,
  // Note [Recurrent layers]); --inplace-activations changes the modules' choice only.
  if (inplace_override && RuleFor(op.kind).inplace_capable && !op.attrs.GetBool("inplace_fixed", false))
    return *inplace_override;
  return op.attrs.GetBool("inplace", false);
}

int FwdPlan::AddExtra(int64_t bytes, std::string_view label) {
  extras.push_back({bytes, label});
  int k = static_cast<int>(extras.size()) - 1;
  actions.push_back({Action::kAllocExtra, k});
  return k;
}

const OpRule& RuleFor(OpKind kind) {
  static const std::array<const OpRule*, kNumKinds> idx = BuildIndex();
  const OpRule* r = idx[static_cast<size_t>(kind)];
  MEMSIM_CHECK(r != nullptr);
  return *r;
}

bool IsGemm(OpKind kind) { return RuleFor(kind).gemm; }

std::optional<TensorMeta> AliasGrad(const Op& op, const Bindings& b, const TensorMeta& grad, const TensorMeta& in) {
  AliasGradFn f = RuleFor(op.kind).alias_grad;
  return f ? f(op, b, grad, in) : AliasGradView(op, b, grad, in);
}

std::optional<TensorMeta> AliasGradSame(const Op&, const Bindings&, const TensorMeta& grad, const TensorMeta&) {
  return grad;
}

std::optional<TensorMeta> AliasGradView(const Op&, const Bindings&, const TensorMeta& grad, const TensorMeta& in) {
  auto st = ViewStrides(grad.sizes, grad.strides, in.sizes);
  if (!st) return std::nullopt;
  TensorMeta m = grad;
  m.sizes = in.sizes;
  m.strides = *st;
  return m;
}

Status RuleError(const RuleCtx& c, const std::string& msg) {
  return Status::InvalidArgument(c.op.pointer + ": " + std::string(OpKindName(c.op.kind)) +
                                 " \"" + c.op.name + "\": " + msg);
}

Status NeedInputs(const RuleCtx& c, size_t lo, size_t hi) {
  if (c.in.size() < lo || c.in.size() > hi)
    return RuleError(c, "expected " + std::to_string(lo) + (lo == hi ? "" : "-" + std::to_string(hi)) +
                            " inputs, got " + std::to_string(c.in.size()));
  return Status::OK();
}

std::optional<std::vector<int64_t>> SpatialAttr(const RuleCtx& c, const char* name, size_t n,
                                                std::optional<std::vector<int64_t>> dflt) {
  auto v = c.op.attrs.GetInts(name, c.bindings);
  if (!v) v = dflt;
  if (!v) return std::nullopt;
  if (v->size() == 1) v->resize(n, (*v)[0]);
  if (v->size() != n) return std::nullopt;
  return v;
}

int64_t WindowOut(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t dil, bool ceil) {
  int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + pad) --out;
  return out;
}

int64_t Bytes(const TensorMeta& m) { return m.bytes(); }

}  // namespace memsim
