#include "lib/autodiff/setups/sac.h"

#include <algorithm>
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

Status Bad(const std::string& path, const std::string& pointer, const std::string& what) {
  return Status::InvalidArgument(path + ": " + pointer + ": " + what);
}

/// {"recorded": {MODULE: [{NAME: [bool, ...]}, ...]}}: the decisions of a policy_fn, per call.
Result<SacPolicy> ReadRecorded(const std::string& path, const nlohmann::json& rec) {
  const std::string expected = "expected {\"recorded\": {\"MODULE\": [{\"mm\": [true, false], ...}, ...]}}";
  if (!rec.is_object() || rec.empty()) return Bad(path, "/recorded", expected);
  SacPolicy p;
  for (const auto& [module, calls] : rec.items()) {
    const std::string at = "/recorded/" + module;
    if (!calls.is_array()) return Bad(path, at, "expected a list of the module's calls");
    for (size_t c = 0; c < calls.size(); ++c) {
      if (!calls[c].is_object()) return Bad(path, at + "/" + std::to_string(c), "expected {\"ATEN_OP\": [bool, ...]}");
      SacPolicy::CallDecisions call;
      for (const auto& [aten, bits] : calls[c].items()) {
        const std::string ptr = at + "/" + std::to_string(c) + "/" + aten;
        if (!bits.is_array()) return Bad(path, ptr, "expected a list of true/false, one per call of the op");
        for (const auto& b : bits) {
          if (!b.is_boolean()) return Bad(path, ptr, "expected true or false for each call of the op");
          call[aten].push_back(b.get<bool>());
        }
      }
      p.recorded[module].push_back(std::move(call));
    }
  }
  return p;
}

Result<SacPolicy> ReadPolicyFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::InvalidArgument("--sac " + path + ": cannot read it (expected torchtitan, ops:NAME,... or a JSON policy file)");
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("recorded")) {
    if (j.contains("save")) return Bad(path, "/save", "a recorded policy has no save list: remove one of the two");
    return ReadRecorded(path, j["recorded"]);
  }
  if (!j.is_object() || !j.contains("save") || !j["save"].is_array())
    return Status::InvalidArgument(path + ": /save: expected {\"save\": [\"mm\", ...], \"every_other_mm\": false}"
                                   " or a recorded policy {\"recorded\": {...}}");
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

bool SacPolicy::Saves(const std::string& module, size_t call, const std::string& aten, size_t occurrence) const {
  if (aten.empty()) return false;
  if (!recorded.empty()) {
    auto m = recorded.find(module);
    if (m == recorded.end() || call >= m->second.size()) return false;
    auto bits = m->second[call].find(aten);
    return bits != m->second[call].end() && occurrence < bits->second.size() && bits->second[occurrence];
  }
  if (std::find(save.begin(), save.end(), aten) == save.end()) return false;
  return aten != "mm" || !every_other_mm || occurrence % 2 == 0;
}

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
