// --amp-loss and --cpu-isa: the mixed-precision settings applied to a prepared plan after
// PrepareSim (Note [Autocast], Note [bf16 convolutions on CPU] in docs/op-rules.md). Every
// path that prepares a plan (CompileStep, SimulateConfigured) calls it.
#ifndef MEMSIM_SIM_AMP_OPTIONS_H_
#define MEMSIM_SIM_AMP_OPTIONS_H_

#include "lib/util/status.h"
#include "sim/simulator.h"

namespace memsim {

/// Sets plan->bind.autocast_loss_outside and plan->profile.bf16_conv_onednn from |opt|; error
/// (naming the option): a bad value, or --cpu-isa on the cuda profile.
Status ApplyAmpOptions(const SimOptions& opt, SimPlan* plan);

/// Simulate (sim/simulator.h) with ApplyAmpOptions applied.
Result<SimResult> SimulateConfigured(const Graph& g, const SimOptions& opt);

}  // namespace memsim

#endif  // MEMSIM_SIM_AMP_OPTIONS_H_
