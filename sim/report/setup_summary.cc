#include "sim/report/setup_summary.h"

#include <nlohmann/json.hpp>

namespace memsim {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

void AddParallel(const ParallelOptions& p, std::vector<std::pair<std::string, std::string>>* out) {
  auto add = [&](const char* k, const std::string& v) { out->emplace_back(k, v); };
  const ParallelOptions d;  // the defaults
  if (p.mesh.enabled()) add("mesh", p.mesh.ToString());
  if (p.ddp) add("ddp", std::to_string(p.world));
  if (p.data_parallel) add("data_parallel", std::to_string(p.world));
  if (p.zero_stage > 0) add("zero", std::to_string(p.zero_stage));
  if (p.zero_bucket_elements != d.zero_bucket_elements) add("zero_bucket_size", std::to_string(p.zero_bucket_elements));
  if (p.zero_overlap_comm) add("zero_overlap_comm", *p.zero_overlap_comm ? "on" : "off");
  if (p.zero_persistence_threshold != d.zero_persistence_threshold) add("zero_persistence_threshold", std::to_string(p.zero_persistence_threshold));
  if (!p.fsdp.empty()) add("fsdp", p.fsdp);
  if ((p.zero_stage > 0 || !p.fsdp.empty()) && !p.ddp) add("world", std::to_string(p.world));
  if (!p.wrap_modules.empty()) add("wrap", Join(p.wrap_modules));
  if (!p.offload.empty()) add("offload", p.offload);
  if (!p.fsdp_mixed_precision.empty()) add("fsdp_mixed_precision", p.fsdp_mixed_precision);
  if (p.mesh.dp_shard > 1 && !p.fsdp2_reshard_after_forward) add("reshard_after_forward", "false");
  if (p.fsdp2_post_forward_world > 1) add("reshard_after_forward", std::to_string(p.fsdp2_post_forward_world));
  if (p.meta_init) add("init", "meta");
  if (!p.fsdp2_param_dtype.empty())
    add("fsdp2_mp", "param=" + p.fsdp2_param_dtype + (p.fsdp2_reduce_dtype.empty() ? "" : ",reduce=" + p.fsdp2_reduce_dtype));
  if (p.ddp && p.bucket_cap_mb != d.bucket_cap_mb) add("bucket_cap_mb", nlohmann::json(p.bucket_cap_mb).dump());
  if (p.ddp && p.gradient_as_bucket_view != d.gradient_as_bucket_view) add("gradient_as_bucket_view", "on");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> NonDefaultSetup(const SimOptions& o) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const char* k, const std::string& v) { out.emplace_back(k, v); };
  if (!o.freeze_globs.empty()) add("freeze", Join(o.freeze_globs));
  if (!o.checkpoint_globs.empty()) {
    add("checkpoint", Join(o.checkpoint_globs));
    if (o.checkpoint_impl != "non-reentrant") add("checkpoint_impl", o.checkpoint_impl);
  }
  if (o.checkpoint_early_stop) add("checkpoint_early_stop", *o.checkpoint_early_stop ? "on" : "off");
  if (!o.sac.empty()) add("sac", o.sac);
  if (o.accumulate != 1) add("accumulate", std::to_string(o.accumulate));
  if (o.clip_grad_norm > 0) add("clip_grad_norm", nlohmann::json(o.clip_grad_norm).dump());
  if (!o.optimizer_impl.empty()) add("foreach", o.optimizer_impl);
  if (o.optimizer_in_backward) add("optimizer_in_backward", "on");
  if (o.save_on_cpu != "off") add("save_on_cpu", o.save_on_cpu);
  if (o.offload_activations != "off") add("offload_activations", o.offload_activations);
  if (o.moe_routing != "balanced") add("moe_routing", o.moe_routing);
  if (!o.grad_scaler.empty()) add("grad_scaler", o.grad_scaler);
  if (!o.amp.empty() && o.amp_loss != "inside") add("amp_loss", o.amp_loss);
  if (o.steps != 1) add("steps", std::to_string(o.steps));
  if (o.loop_holds == "loss" || (o.steps != 1 && o.loop_holds != "none")) add("loop_holds", o.loop_holds);
  if (o.steps != 1 && o.zero_grad != "set-to-none") add("zero_grad", o.zero_grad);
  if (o.cudnn_benchmark) add("cudnn_benchmark", "on");
  if (o.dispatch_mode) add("dispatch_mode", "on");
  AddParallel(o.parallel, &out);
  return out;
}

}  // namespace memsim
