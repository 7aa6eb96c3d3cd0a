// The simulator: one configuration of one graph → the event stream of a training step and its
// peak analysis. Parse the graph once (LoadGraph) and call Simulate per configuration; the
// graph is shared read-only, so configurations can run concurrently.
#ifndef MEMSIM_SIM_SIMULATOR_H_
#define MEMSIM_SIM_SIMULATOR_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/ops/bind.h"
#include "lib/stream/events.h"
#include "lib/analysis/peak.h"
#include "lib/autodiff/optimizer.h"
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/step.h"
#include "lib/ir/graph.h"
#include "lib/ops/profile.h"
#include "lib/util/status.h"

namespace memsim {

struct SimOptions {
  std::map<std::string, int64_t> symbols;  ///< --batch N (symbol "batch") and --set SYM=V
  /// --moe-routing balanced|hot=F: the tokens per expert of each MoE routing whose counts
  /// --set leaves unset (Note [Routed token counts]).
  std::string moe_routing = "balanced";
  std::string optimizer = "sgd";
  bool first_step = true;                  ///< --step first|steady
  std::string profile = "cuda";
  std::string torch = std::string(kDefaultTorch);  ///< --torch 1.13|2.13: the release whose rules apply
  std::vector<std::string> freeze_globs;   ///< parameter-name globs (fnmatch) to freeze
  int64_t freeze_params = 0;               ///< freeze the first K parameter tensors
  std::optional<bool> inplace;             ///< --inplace-activations on|off; unset = keep
  std::optional<int64_t> cublas_workspace_bytes;  ///< overrides the profile (e.g. 32 MiB on H100)
  std::string optimizer_impl;              ///< --foreach on|off|fused; "" = the profile's default
  int accumulate = 1;                      ///< --accumulate K: K forward+backward passes per step
  double clip_grad_norm = 0;               ///< --clip-grad-norm MAX (0: no clipping)
  int64_t min_8bit_size = 4096;            ///< --min-8bit-size N: bitsandbytes' 8-bit threshold (elements)
  std::vector<std::string> checkpoint_globs;  ///< --checkpoint GLOB: module paths (fnmatch) to checkpoint
  std::string checkpoint_impl = "non-reentrant";  ///< --checkpoint-impl reentrant|non-reentrant
  std::optional<bool> checkpoint_early_stop;  ///< --checkpoint-early-stop on|off; unset = the release's
  bool dispatch_mode = false;  ///< --dispatch-mode on: the step runs under a TorchDispatchMode (Profile::dispatch_mode)
  std::string sac;  ///< --sac POLICY: selective checkpointing in the --checkpoint regions ("" = off)
  std::string save_on_cpu = "off";  ///< --save-on-cpu off|on|pin (Note [Activation offloading])
  /// --offload-activations off|on|min_size=BYTES,... (torchtune's OffloadActivations; same Note)
  std::string offload_activations = "off";
  bool optimizer_in_backward = false;  ///< --optimizer-in-backward on (Note [Optimizer in backward])
  std::optional<int64_t> conv_workspace_bytes;    ///< cuDNN workspace per conv call (cuda): kFixed
  std::optional<ConvWorkspacePolicy> conv_workspace_policy;  ///< --cudnn-workspace (cuda; default typical)
  std::string gpu_arch;                    ///< --gpu's architecture, for the typical workspaces
  int64_t gpu_sm_count = 0;                ///< --gpu's SM count (0: the profile's default)
  int64_t gpu_max_threads_per_sm = 0;      ///< --gpu's threads per SM (0: the profile's default)
  bool cudnn_benchmark = false;            ///< --cudnn-benchmark: trial workspaces in the first step
  bool explain = false;                    ///< also find what keeps each buffer alive at the peak
  /// --ddp WORLD, --zero 1|2 --world N, --bucket-cap-mb, --gradient-as-bucket-view; the rank
  /// simulated (sim/ranks.h runs every distinct one).
  ParallelOptions parallel;
  std::string amp;                         ///< --amp fp16|bf16: torch.autocast around forward and loss; "" = off
  std::string grad_scaler;                 ///< --grad-scaler on|off; "" = on with --amp fp16
  std::string dtype;                       ///< --dtype fp32|fp16|bf16: model.half()/.bfloat16(); "" = the graph's
  int steps = 1;                           ///< --steps N: consecutive training steps
  std::string loop_holds = "none";         ///< --loop-holds output|none
  std::string zero_grad = "set-to-none";   ///< --zero-grad none|zeros|set-to-none
  /// --amp-loss inside|outside: the loss under autocast with the model, or after the region
  /// (applied by PrepareSim).
  std::string amp_loss = "inside";
  /// --cpu-isa avx2|avx512|amx (cpu profile): the machine's ISA (ApplyCpuIsa); "" =
  /// the profile's default (avx2).
  std::string cpu_isa;
  /// --sdpa-backend flash|efficient|cudnn|math: every SDPA op on that backend ("" = PyTorch's choice).
  std::string sdpa_backend;
};

struct SimResult {
  Profile profile;
  OptimizerRule optimizer;
  BoundGraph bound;
  std::vector<bool> frozen;                ///< per Graph::parameters entry
  EventStream events;
  PeakReport peak;
  std::vector<Retention> at_peak;          ///< with SimOptions::explain: who holds what at the peak
};

/// Validates |opt| against |g| (unknown symbol or optimizer, bad profile, a glob matching no
/// parameter) and simulates one step.
Result<SimResult> Simulate(const Graph& g, const SimOptions& opt);

/// What SimOptions fixes before the symbols are bound: resolved and validated once per
/// structural option set (Note [Compiled step] in docs/sweeps.md). Not copyable: |step| points
/// at |profile|. Shared read-only by the configurations evaluated from it, concurrently in a
/// sweep: the training setups are here as data (|setup|), and every simulated step makes its
/// own set of setup objects from it (they keep per-step state).
struct SimPlan {
  SimPlan() = default;
  SimPlan(const SimPlan&) = delete;
  SimPlan& operator=(const SimPlan&) = delete;

  Profile profile;
  OptimizerRule optimizer;
  std::vector<bool> frozen;
  BindOptions bind;  ///< profile (points at |profile|), in-place override, --dtype, --amp
  bool explain = false;
  /// The step's configuration; its |setups| stay empty (each simulated step gets its own).
  StepConfig step;
  /// The training setups this configuration enables (MakeSetups makes them for each step).
  SetupOptions setup;
};
/// Validates everything of |opt| but the symbol values into |plan|.
Status PrepareSim(const Graph& g, const SimOptions& opt, SimPlan* plan);
/// The symbol values of |opt| over |g|'s defaults; error: an unknown or negative symbol.
Result<Bindings> BindingsOf(const Graph& g, const SimOptions& opt);
/// Binds |b| as |plan| says (profile, in-place override).
Result<BoundGraph> BindFor(const Graph& g, const SimPlan& plan, const Bindings& b);
/// Simulates one step of |plan| over |bound| (bound by BindFor). |names|: buffers carry names.
/// |opt|: the configuration (its whole --data-parallel batch).
Result<SimResult> SimulatePlanned(const Graph& g, const SimPlan& plan, BoundGraph bound, const SimOptions& opt,
                                  bool names = true,
                                  size_t reserve_buffers = 0, size_t reserve_events = 0);
/// Only the event stream of that step (no names, no peak analysis): a size schedule's probe.
/// |reserve_buffers|, |reserve_events|: capacity hints (the sizes of an earlier run).
Result<EventStream> SimulateEvents(const Graph& g, const SimPlan& plan, const BoundGraph& bound, const SimOptions& opt,
                                   size_t reserve_buffers = 0, size_t reserve_events = 0);

}  // namespace memsim

#endif  // MEMSIM_SIM_SIMULATOR_H_
