#include "lib/ops/op_rules.h"

#include <array>

#include "lib/util/check.h"

namespace memsim {
namespace {

constexpr size_t kNumKinds = kNumOpKinds;

std::array<const OpRule*, kNumKinds> BuildIndex() {
  std::array<const OpRule*, kNumKinds> idx{};
  for (const auto* table : {&kNnRules, &kPointwiseRules, &kShapeRules, &kLlmRules})
    for (const OpRule& r : *table) idx[static_cast<size_t>(r.kind)] = &r;
  return idx;
}

}  // namespace

bool RuleCtx::inplace() const {
  switch (op.kind) {
    case OpKind::kRelu: case OpKind::kRelu6: case OpKind::kLeakyRelu: case OpKind::kSilu:
    case OpKind::kSigmoid: case OpKind::kTanh: case OpKind::kHardswish:
    case OpKind::kHardsigmoid:
      if (inplace_override) return *inplace_override;
      break;
    default:
      break;
  }
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

bool IsGemm(OpKind kind) {
  switch (kind) {
    case OpKind::kLinear: case OpKind::kMatmul: case OpKind::kMm: case OpKind::kBmm:
    case OpKind::kBaddbmm:
      return true;
    default:
      return false;
  }
}

Status RuleError(const RuleCtx& c, const std::string& msg) {
  return Status::InvalidArgument(c.op.pointer + ": " + std::string(OpKindName(c.op.kind)) +
                                 " \"" + c.op.name + "\": " + msg);
}

int64_t Bytes(const TensorMeta& m) { return m.bytes(); }

}  // namespace memsim
