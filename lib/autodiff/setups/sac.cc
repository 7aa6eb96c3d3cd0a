#include "lib/autodiff/setups/sac.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/ops/sdpa_backend.h"

namespace memsim {

namespace {

// torchtitan's `_save_list` (torchtitan/distributed/activation_checkpoint.py, op-level SAC) for
// what memsim simulates: mm, the fused attention kernels, max; reduce_scatter and _scaled_mm have
// no op here. Its policy recomputes every other mm of each checkpointed call.
const std::vector<std::string> kTorchtitanSave = {
    "mm", "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention", "max"};

std::vector<std::string> SplitNames(std::string_view list) {
  std::vector<std::string> out;
  std::stringstream ss{std::string(list)};
  for (std::string name; std::getline(ss, name, ',');)
    if (!name.empty()) out.push_back(name);
  return out;
}

Result<SacPolicy> ReadPolicyFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::InvalidArgument("--sac " + path + ": cannot read it (expected torchtitan, ops:NAME,... or a JSON policy file)");
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("save") || !j["save"].is_array())
    return Status::InvalidArgument(path + ": /save: expected {\"save\": [\"mm\", ...], \"every_other_mm\": false}");
  SacPolicy p;
  for (size_t i = 0; i < j["save"].size(); ++i) {
    if (!j["save"][i].is_string() || j["save"][i].get<std::string>().empty())
      return Status::InvalidArgument(path + ": /save/" + std::to_string(i) + ": expected an ATen op name");
    p.save.push_back(j["save"][i].get<std::string>());
  }
  if (j.contains("every_other_mm")) {
    if (!j["every_other_mm"].is_boolean()) return Status::InvalidArgument(path + ": /every_other_mm: expected true or false");
    p.every_other_mm = j["every_other_mm"].get<bool>();
  }
  if (p.save.empty()) return Status::InvalidArgument(path + ": /save: the policy saves no op");
  return p;
}

}  // namespace

Result<SacPolicy> ParseSacPolicy(const std::string& spec) {
  if (spec == "torchtitan") return SacPolicy{kTorchtitanSave, true};
  if (spec.rfind("ops:", 0) == 0) {
    SacPolicy p{SplitNames(std::string_view(spec).substr(4)), false};
    if (p.save.empty()) return Status::InvalidArgument("--sac ops: names no op (e.g. --sac ops:mm,addmm)");
    return p;
  }
  return ReadPolicyFile(spec);
}

std::string AtenOpOf(const RuleCtx& c) {
  switch (c.op.kind) {
    case OpKind::kLinear: return c.num_in() > 2 ? "addmm" : "mm";
    case OpKind::kMm: return "mm";
    case OpKind::kBmm: return "bmm";
    case OpKind::kBaddbmm: return "baddbmm";
    case OpKind::kMatmul: return c.in[0]->dim() >= 3 && c.in[1]->dim() >= 3 ? "bmm" : "mm";
    case OpKind::kSdpa:
      switch (SdpaBackendOfOp(c)) {
        case SdpaBackend::kFlash:
          return c.profile.cuda ? "_scaled_dot_product_flash_attention" : "_scaled_dot_product_flash_attention_for_cpu";
        case SdpaBackend::kEfficient: return "_scaled_dot_product_efficient_attention";
        case SdpaBackend::kCudnn: return "_scaled_dot_product_cudnn_attention";
        case SdpaBackend::kMath: return "";  // a composite: its bmm and softmax are not split here
      }
      return "";
    default: return std::string(OpKindName(c.op.kind));
  }
}

}  // namespace memsim
