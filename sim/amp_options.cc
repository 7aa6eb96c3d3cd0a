#include "sim/amp_options.h"

namespace memsim {

Status ApplyAmpOptions(const SimOptions& opt, SimPlan* plan) {
  if (opt.amp_loss != "inside" && opt.amp_loss != "outside")
    return Status::InvalidArgument("--amp-loss \"" + opt.amp_loss + "\": expected inside or outside");
  plan->bind.autocast_loss_outside = opt.amp_loss == "outside";
  if (opt.cpu_isa.empty()) return Status::OK();
  std::optional<bool> onednn = Bf16ConvOnednnForIsa(opt.cpu_isa);
  if (!onednn) return Status::InvalidArgument("--cpu-isa \"" + opt.cpu_isa + "\": expected avx2 or avx512");
  if (plan->profile.cuda) return Status::InvalidArgument("--cpu-isa applies to the cpu profile only");
  plan->profile.bf16_conv_onednn = *onednn;
  return Status::OK();
}

Result<SimResult> SimulateConfigured(const Graph& g, const SimOptions& opt) {
  SimPlan plan;
  MEMSIM_RETURN_IF_ERROR(PrepareSim(g, opt, &plan));
  MEMSIM_RETURN_IF_ERROR(ApplyAmpOptions(opt, &plan));
  MEMSIM_ASSIGN_OR_RETURN(Bindings b, BindingsOf(g, opt));
  MEMSIM_ASSIGN_OR_RETURN(BoundGraph bound, BindFor(g, plan, b));
  return SimulatePlanned(g, plan, std::move(bound), opt);
}

}  // namespace memsim
