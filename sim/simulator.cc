#include "sim/simulator.h"

#include <fnmatch.h>

#include <set>

#include "lib/autodiff/step.h"

namespace memsim {

namespace {

/// The module paths of |g| that |globs| name (every op's module and its dotted prefixes).
Result<std::vector<std::string>> CheckpointModules(const Graph& g, const std::vector<std::string>& globs) {
  std::set<std::string> paths;
  for (const Op& op : g.ops) {
    const std::string& m = op.module;
    for (size_t end = m.find('.');; end = m.find('.', end + 1)) {
      paths.insert(m.substr(0, end));
      if (end == std::string::npos) break;
    }
  }
  std::vector<std::string> modules;
  for (const std::string& glob : globs) {
    bool matched = false;
    for (const std::string& p : paths)
      if (!p.empty() && fnmatch(glob.c_str(), p.c_str(), 0) == 0) {
        modules.push_back(p);
        matched = true;
      }
    if (!matched) return Status::InvalidArgument("--checkpoint \"" + glob + "\" matches no module of " + g.name);
  }
  return modules;
}

/// --dtype (model.half()) and --amp (torch.autocast) into the binding options.
Status ApplyPrecision(const SimOptions& opt, BindOptions* bo) {
  if (opt.dtype == "fp16" || opt.dtype == "bf16") {
    bo->model_dtype = opt.dtype == "fp16" ? Dtype::kFloat16 : Dtype::kBFloat16;
  } else if (!opt.dtype.empty() && opt.dtype != "fp32") {
    return Status::InvalidArgument("--dtype \"" + opt.dtype + "\": expected fp32, fp16 or bf16");
  }
  if (opt.amp == "fp16" || opt.amp == "bf16") {
    bo->autocast = opt.amp == "fp16" ? Dtype::kFloat16 : Dtype::kBFloat16;
  } else if (!opt.amp.empty() && opt.amp != "off") {
    return Status::InvalidArgument("--amp \"" + opt.amp + "\": expected fp16, bf16 or off");
  }
  if (!opt.grad_scaler.empty() && opt.grad_scaler != "on" && opt.grad_scaler != "off")
    return Status::InvalidArgument("--grad-scaler \"" + opt.grad_scaler + "\": expected on or off");
  return Status::OK();
}

/// --steps, --loop-holds, --zero-grad (Note [Training loop]).
Status ApplyLoop(const SimOptions& opt, StepConfig* cfg) {
  if (opt.steps < 1 || opt.steps > 1000) return Status::InvalidArgument("--steps must be 1 to 1000");
  cfg->steps = opt.steps;
  if (opt.loop_holds != "output" && opt.loop_holds != "none")
    return Status::InvalidArgument("--loop-holds \"" + opt.loop_holds + "\": expected output or none");
  cfg->loop_holds_output = opt.loop_holds == "output";
  if (opt.zero_grad == "set-to-none") cfg->zero_grad = StepConfig::ZeroGrad::kSetToNone;
  else if (opt.zero_grad == "zeros") cfg->zero_grad = StepConfig::ZeroGrad::kZeros;
  else if (opt.zero_grad == "none") cfg->zero_grad = StepConfig::ZeroGrad::kNone;
  else return Status::InvalidArgument("--zero-grad \"" + opt.zero_grad + "\": expected none, zeros or set-to-none");
  return Status::OK();
}

}  // namespace

Result<SimResult> Simulate(const Graph& g, const SimOptions& opt) {
  SimResult r;
  auto profile = FindProfile(opt.profile);
  if (!profile) return Status::InvalidArgument("unknown profile \"" + opt.profile + "\" (expected cuda or cpu)");
  r.profile = *profile;
  if (opt.cublas_workspace_bytes) {
    if (*opt.cublas_workspace_bytes < 0) return Status::InvalidArgument("the cuBLAS workspace size must be non-negative");
    if (r.profile.cuda) r.profile.cublas_workspace_bytes = *opt.cublas_workspace_bytes;
  }
  if (opt.conv_workspace_bytes) {
    if (*opt.conv_workspace_bytes < 0) return Status::InvalidArgument("--conv-workspace must be non-negative");
    if (r.profile.cuda) {
      r.profile.conv_workspace_policy = ConvWorkspacePolicy::kFixed;
      r.profile.conv_workspace_bytes = *opt.conv_workspace_bytes;
    }
  }
  if (opt.conv_workspace_policy && r.profile.cuda) r.profile.conv_workspace_policy = *opt.conv_workspace_policy;
  if (!opt.gpu_arch.empty()) r.profile.gpu_arch = opt.gpu_arch;
  r.profile.cudnn_benchmark_trials = r.profile.cuda && opt.cudnn_benchmark && opt.first_step;
  auto optimizer = FindOptimizer(opt.optimizer);
  if (!optimizer)
    return Status::InvalidArgument("unknown optimizer \"" + opt.optimizer + "\" (expected one of: " + OptimizerNames() + ")");
  r.optimizer = *optimizer;
  if (opt.optimizer_impl == "on" || opt.optimizer_impl == "off") {
    r.profile.optimizer_foreach = opt.optimizer_impl == "on";
  } else if (opt.optimizer_impl == "fused") {
    if (!HasFusedImplementation(r.optimizer))
      return Status::InvalidArgument("--foreach fused: PyTorch has no fused " + opt.optimizer + " (SGD and Adam(W) only)");
    r.profile.optimizer_fused = true;
  } else if (!opt.optimizer_impl.empty()) {
    return Status::InvalidArgument("--foreach \"" + opt.optimizer_impl + "\": expected on, off or fused");
  }

  Bindings b = g.DefaultBindings();
  for (const auto& [name, value] : opt.symbols) {
    uint32_t s = g.FindSymbol(name);
    if (s == kNone) {
      if (name == "batch") continue;  // --batch on a graph without a batch symbol is harmless
      return Status::InvalidArgument(g.source + ": the graph has no symbol \"" + name + "\"");
    }
    if (value < 0) return Status::InvalidArgument("symbol \"" + name + "\" must be non-negative");
    b[s] = value;
  }

  if (opt.freeze_params < 0 || opt.freeze_params > static_cast<int64_t>(g.parameters.size()))
    return Status::InvalidArgument("--freeze-params " + std::to_string(opt.freeze_params) + " is outside 0.." +
                                   std::to_string(g.parameters.size()));
  r.frozen.assign(g.parameters.size(), false);
  for (int64_t k = 0; k < opt.freeze_params; ++k) r.frozen[k] = true;
  for (const std::string& glob : opt.freeze_globs) {
    bool matched = false;
    for (size_t k = 0; k < g.parameters.size(); ++k)
      if (fnmatch(glob.c_str(), g.tensors[g.parameters[k]].name.c_str(), 0) == 0) {
        r.frozen[k] = true;
        matched = true;
      }
    if (!matched) return Status::InvalidArgument("--freeze \"" + glob + "\" matches no parameter of " + g.name);
  }

  BindOptions bo;
  bo.profile = &r.profile;
  bo.inplace_override = opt.inplace;
  MEMSIM_RETURN_IF_ERROR(ApplyPrecision(opt, &bo));
  MEMSIM_ASSIGN_OR_RETURN(r.bound, BindGraph(g, b, bo));
  StepConfig cfg;
  cfg.profile = &r.profile;
  cfg.optimizer = r.optimizer;
  cfg.first_step = opt.first_step;
  cfg.frozen = r.frozen;
  if (opt.accumulate < 1) return Status::InvalidArgument("--accumulate must be at least 1");
  if (!(opt.clip_grad_norm >= 0)) return Status::InvalidArgument("--clip-grad-norm must be non-negative");
  cfg.passes = opt.accumulate;
  MEMSIM_RETURN_IF_ERROR(ApplyLoop(opt, &cfg));
  cfg.setup.clip_grad_norm = opt.clip_grad_norm;
  cfg.setup.autocast = bo.autocast.has_value();
  cfg.setup.grad_scaler = opt.grad_scaler.empty() ? opt.amp == "fp16" : opt.grad_scaler == "on";
  MEMSIM_ASSIGN_OR_RETURN(cfg.setup.checkpoint_modules, CheckpointModules(g, opt.checkpoint_globs));
  MEMSIM_ASSIGN_OR_RETURN(r.events, SimulateStep(g, r.bound, cfg));
  r.peak = AnalyzePeak(r.events);
  if (opt.explain && !r.events.events.empty()) r.at_peak = ExplainAtEvent(g, r.bound, cfg, r.peak.peak_event);
  return r;
}

}  // namespace memsim
