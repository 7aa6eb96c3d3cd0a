#include "sim/simulator.h"

#include <fnmatch.h>

#include "lib/autodiff/step.h"

namespace memsim {

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

  BindOptions bo{&r.profile, opt.inplace};
  MEMSIM_ASSIGN_OR_RETURN(r.bound, BindGraph(g, b, bo));
  StepConfig cfg;
  cfg.profile = &r.profile;
  cfg.optimizer = r.optimizer;
  cfg.first_step = opt.first_step;
  cfg.frozen = r.frozen;
  MEMSIM_ASSIGN_OR_RETURN(r.events, SimulateStep(g, r.bound, cfg));
  r.peak = AnalyzePeak(r.events);
  if (opt.explain && !r.events.events.empty()) r.at_peak = ExplainAtEvent(g, r.bound, cfg, r.peak.peak_event);
  return r;
}

}  // namespace memsim
