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

}  // namespace

Status PrepareSim(const Graph& g, const SimOptions& opt, SimPlan* plan) {
  SimPlan& r = *plan;
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
  MEMSIM_RETURN_IF_ERROR(BindingsOf(g, opt).status());
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
  r.inplace = opt.inplace;
  r.explain = opt.explain;
  StepConfig& cfg = r.step;
  cfg.profile = &r.profile;
  cfg.optimizer = r.optimizer;
  cfg.first_step = opt.first_step;
  cfg.frozen = r.frozen;
  if (opt.accumulate < 1) return Status::InvalidArgument("--accumulate must be at least 1");
  if (!(opt.clip_grad_norm >= 0)) return Status::InvalidArgument("--clip-grad-norm must be non-negative");
  cfg.passes = opt.accumulate;
  cfg.setup.clip_grad_norm = opt.clip_grad_norm;
  MEMSIM_ASSIGN_OR_RETURN(cfg.setup.checkpoint_modules, CheckpointModules(g, opt.checkpoint_globs));
  cfg.apply_order = ModuleApplyOrder(g);
  return Status::OK();
}

Result<Bindings> BindingsOf(const Graph& g, const SimOptions& opt) {
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
  return b;
}

Result<BoundGraph> BindFor(const Graph& g, const SimPlan& plan, const Bindings& b) {
  BindOptions bo{&plan.profile, plan.inplace};
  return BindGraph(g, b, bo);
}

Result<SimResult> SimulatePlanned(const Graph& g, const SimPlan& plan, BoundGraph bound, bool names,
                                  size_t reserve_buffers, size_t reserve_events) {
  SimResult r;
  r.profile = plan.profile;
  r.optimizer = plan.optimizer;
  r.frozen = plan.frozen;
  r.bound = std::move(bound);
  const StepConfig& cfg = plan.step;  // points at plan.profile, equal to r.profile
  MEMSIM_ASSIGN_OR_RETURN(r.events, SimulateStep(g, r.bound, cfg, StepRecording{names, reserve_buffers, reserve_events}));
  r.peak = AnalyzePeak(r.events);
  if (plan.explain && !r.events.events.empty()) r.at_peak = ExplainAtEvent(g, r.bound, cfg, r.peak.peak_event);
  return r;
}

Result<SimResult> Simulate(const Graph& g, const SimOptions& opt) {
  SimPlan plan;
  MEMSIM_RETURN_IF_ERROR(PrepareSim(g, opt, &plan));
  MEMSIM_ASSIGN_OR_RETURN(Bindings b, BindingsOf(g, opt));
  MEMSIM_ASSIGN_OR_RETURN(BoundGraph bound, BindFor(g, plan, b));
  return SimulatePlanned(g, plan, std::move(bound));
}

}  // namespace memsim
