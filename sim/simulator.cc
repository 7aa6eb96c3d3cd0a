#include "sim/simulator.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/setups/sharded.h"
#include "lib/autodiff/step.h"
#include "lib/ir/fp8.h"
#include "lib/ir/module_paths.h"
#include "lib/util/check.h"
#include "lib/util/checked.h"
#include "lib/util/text_limits.h"
#include "sim/routing.h"

namespace memsim {

namespace {

/// The module paths of |g| that |globs| name (every op's module and its dotted prefixes); an
/// error names |option| and the glob matching none.
Result<std::vector<std::string>> ModulesMatching(const Graph& g, const std::vector<std::string>& globs,
                                                 const std::string& option, bool outermost = false) {
  const std::set<std::string> paths = ModulePaths(g);
  std::vector<std::string> modules;
  for (const std::string& glob : globs) {
    if (glob.rfind('@', 0) == 0) {  // Note [Block selectors]
      std::optional<std::vector<std::string>> blocks = SelectBlocks(g, glob);
      if (!blocks)
        return Status::InvalidArgument(option + " \"" + Excerpt(glob) + "\": a selector is @blocks or @blocks%K=R (the repeated "
                                       "blocks whose index i has i % K == R)");
      if (blocks->empty()) return Status::InvalidArgument(option + " \"" + Excerpt(glob) + "\": " + g.name + " has no repeated blocks "
                                                          "(modules P.0, P.1, ...); give a glob");
      modules.insert(modules.end(), blocks->begin(), blocks->end());
      continue;
    }
    std::vector<std::string> matched;
    for (const std::string& p : paths)
      if (!p.empty() && fnmatch(glob.c_str(), p.c_str(), 0) == 0) matched.push_back(p);
    if (matched.empty()) return Status::InvalidArgument(option + " \"" + Excerpt(glob) + "\" matches no module of " + g.name);
    // --wrap: a glob wraps the outermost modules it matches (`model.layers.*` is each layer, not
    // also every Linear inside it, as the kit's fully_shard loop does); inner ones by a glob of
    // their own. (--checkpoint: a module inside another listed one is part of the outer one.)
    for (const std::string& p : matched)
      if (!outermost || std::none_of(matched.begin(), matched.end(), [&](const std::string& o) {
            return o != p && WithinModule(p, o);
          }))
        modules.push_back(p);
  }
  return modules;
}

/// The data-parallel options as the step runs them (Notes [DDP], [ZeRO], [FSDP]).
Result<ParallelOptions> CheckParallel(const Graph& g, ParallelOptions p, const Profile& profile) {
  if (p.world < 1 || p.world > 1'000'000) return Status::InvalidArgument("--world/--ddp must be 1 to 1000000");
  if (p.rank < 0 || p.rank >= p.world)
    return Status::InvalidArgument("rank " + std::to_string(p.rank) + " is outside 0.." + std::to_string(p.world - 1));
  if (!(p.bucket_cap_mb > 0) || p.bucket_cap_mb > 1e9)
    return Status::InvalidArgument("--bucket-cap-mb must be positive (at most 1e9)");
  if (p.zero_stage < 0 || p.zero_stage > 3)
    return Status::InvalidArgument("--zero " + std::to_string(p.zero_stage) + ": expected 1, 2 or 3");
  if (p.zero_stage >= 2 && profile.zero_whole_parameters)
    return Status::InvalidArgument("--zero " + std::to_string(p.zero_stage) +
                                   " on the cpu profile: PyTorch 1.13's ZeroRedundancyOptimizer is ZeRO-1 only");
  if (!p.fsdp.empty() && p.fsdp != "full" && p.fsdp != "grad-op")
    return Status::InvalidArgument("--fsdp \"" + p.fsdp + "\": expected full or grad-op");
  if (!p.fsdp.empty() && (p.zero_stage > 0 || p.ddp))
    return Status::InvalidArgument("--fsdp cannot be combined with --zero or --ddp");
  // Note [ZeRO]: on cuda --zero is DeepSpeed, whose engine reduces the gradients itself (no DDP).
  if (p.ddp && p.zero_stage > 0 && !profile.zero_whole_parameters)
    return Status::InvalidArgument("--zero " + std::to_string(p.zero_stage) + " (DeepSpeed) reduces the gradients "
                                   "itself: drop --ddp and give the ranks as --world " + std::to_string(p.world));
  if (!p.offload.empty() && p.offload != "optimizer" && p.offload != "params")
    return Status::InvalidArgument("--offload \"" + p.offload + "\": expected optimizer or params");
  if (!p.offload.empty() && (profile.zero_whole_parameters || (p.zero_stage == 0 && p.fsdp.empty() && p.mesh.dp_shard <= 1)))
    return Status::InvalidArgument("--offload needs --zero (cuda profile, DeepSpeed), --fsdp or --mesh dp_shard=N");
  if (p.offload == "optimizer" && p.mesh.dp_shard > 1)
    return Status::InvalidArgument("FSDP2's CPUOffloadPolicy offloads parameters, grads and optimizer together: "
                                   "use --offload params");
  if (p.offload == "params" && p.zero_stage > 0 && p.zero_stage < 3)
    return Status::InvalidArgument("--offload params needs --zero 3 (ZeRO-Infinity)");
  if (p.offload == "optimizer" && !p.fsdp.empty())
    return Status::InvalidArgument("--fsdp offloads parameters, grads and optimizer together: use --offload params");
  if (!p.wrap_modules.empty() && p.fsdp.empty() && p.mesh.dp_shard <= 1)
    return Status::InvalidArgument("--wrap needs --fsdp or --mesh dp_shard=N");
  if (p.data_parallel && (p.ddp || p.zero_stage > 0 || !p.fsdp.empty()))
    return Status::InvalidArgument("--data-parallel cannot be combined with --ddp, --zero or --fsdp");
  if (p.data_parallel && g.FindSymbol("batch") == kNone)
    return Status::InvalidArgument("--data-parallel: " + g.name + " has no batch symbol to scatter");
  if (!p.fsdp.empty() || p.mesh.dp_shard > 1) {
    MEMSIM_ASSIGN_OR_RETURN(p.wrap_modules, ModulesMatching(g, p.wrap_modules, "--wrap", /*outermost=*/true));
  }
  // 1.13 CPU: ZeRO-1 is ZeroRedundancyOptimizer under DDP, as the PyTorch documentation shows.
  if (p.zero_stage == 1 && profile.zero_whole_parameters) p.ddp = true;
  return p;
}

/// Which precision options combine with the data-parallel setups (Notes [ZeRO mixed precision],
/// [FSDP mixed precision]); the CLI refuses the same with its option names first.
Status CheckParallelPrecision(const SimOptions& opt) {
  const std::string& mp = opt.parallel.fsdp_mixed_precision;
  if (!mp.empty()) {
    if (opt.parallel.fsdp.empty()) return Status::InvalidArgument("FSDP mixed precision needs FSDP (--fsdp)");
    if (mp != "fp16" && mp != "bf16")
      return Status::InvalidArgument("--fsdp-mixed-precision \"" + mp + "\": expected fp16 or bf16");
    if (opt.dtype != mp)
      return Status::InvalidArgument("FSDP mixed precision " + mp + " computes in " + mp + ": the model dtype must be " +
                                     mp + " (the shards stay fp32), not \"" + opt.dtype + "\"");
  }
  const bool low_dtype = opt.dtype == "fp16" || opt.dtype == "bf16";
  const bool autocast = opt.amp == "fp16" || opt.amp == "bf16";
  if (opt.parallel.zero_stage > 0 && low_dtype && autocast)
    return Status::InvalidArgument("--zero with --dtype fp16|bf16 is DeepSpeed's fp16/bf16 mode (module converted, fp32 "
                                   "master partition); it does not combine with --amp (torch.autocast)");
  return Status::OK();
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
  if (opt.loop_holds != "output" && opt.loop_holds != "step" && opt.loop_holds != "none" && opt.loop_holds != "loss")
    return Status::InvalidArgument("--loop-holds \"" + opt.loop_holds + "\": expected output, step, none or loss");
  cfg->loop_drops_output = opt.loop_holds == "loss";
  cfg->loop_holds_output = opt.loop_holds == "output";
  cfg->loop_holds_step = opt.loop_holds == "step";
  if (opt.zero_grad == "set-to-none") cfg->zero_grad = StepConfig::ZeroGrad::kSetToNone;
  else if (opt.zero_grad == "zeros") cfg->zero_grad = StepConfig::ZeroGrad::kZeros;
  else if (opt.zero_grad == "none") cfg->zero_grad = StepConfig::ZeroGrad::kNone;
  else return Status::InvalidArgument("--zero-grad \"" + opt.zero_grad + "\": expected none, zeros or set-to-none");
  return Status::OK();
}

/// nn.DataParallel: --batch is the whole batch (0 without --data-parallel).
int64_t DataParallelTotal(const SimOptions& opt) {
  if (!opt.parallel.data_parallel) return 0;
  auto it = opt.symbols.find("batch");
  return it == opt.symbols.end() ? 0 : it->second;
}

// --amp-loss and --cpu-isa (Note [Autocast], Note [bf16 convolutions on CPU] in docs/op-rules.md).
Status ApplyAmpOptions(const SimOptions& opt, SimPlan* plan) {
  if (opt.amp_loss != "inside" && opt.amp_loss != "outside")
    return Status::InvalidArgument("--amp-loss \"" + opt.amp_loss + "\": expected inside or outside");
  plan->bind.autocast_loss_outside = opt.amp_loss == "outside";
  if (opt.cpu_isa.empty()) return Status::OK();
  if (plan->profile.cuda) return Status::InvalidArgument("--cpu-isa applies to the cpu profile only");
  if (!ApplyCpuIsa(opt.cpu_isa, &plan->profile))
    return Status::InvalidArgument("--cpu-isa \"" + opt.cpu_isa + "\": expected avx2, avx512 or amx");
  return Status::OK();
}

/// The training setups |opt| enables, as data (MakeSetups makes the objects for every simulated
/// step); |plan| has the profile and the binding options resolved.
/// What --optimizer-in-backward cannot be combined with, as torchtune refuses it: gradients that
/// must outlive their own update (accumulation, clipping, a GradScaler's unscale_), sharded or
/// reduced gradients, an optimizer memsim replays as a whole-model program.
Status CheckOptimizerInBackward(const SimOptions& opt, const SetupOptions& setup) {
  auto refuse = [](const std::string& what) {
    return Status::InvalidArgument("--optimizer-in-backward steps each parameter as its grad is ready: it cannot be "
                                   "combined with " + what);
  };
  if (opt.accumulate > 1) return refuse("--accumulate (torchtune: gradient_accumulation_steps must be 1)");
  if (opt.clip_grad_norm > 0) return refuse("--clip-grad-norm (the norm needs every grad at once)");
  if (setup.grad_scaler) return refuse("a GradScaler (--amp fp16 unscales every grad first; use --amp bf16)");
  if (setup.parallel.enabled()) return refuse("--ddp, --zero, --fsdp or --data-parallel");
  if (opt.optimizer == "recorded" || opt.optimizer == "none") return refuse("--optimizer " + opt.optimizer);
  return Status::OK();
}

Result<SetupOptions> SetupsOf(const Graph& g, const SimOptions& opt, const SimPlan& plan) {
  SetupOptions setup;
  setup.clip_grad_norm = opt.clip_grad_norm;
  setup.autocast = plan.bind.autocast.has_value();
  setup.grad_scaler = opt.grad_scaler.empty() ? opt.amp == "fp16" : opt.grad_scaler == "on";
  MEMSIM_ASSIGN_OR_RETURN(setup.checkpoint_modules, ModulesMatching(g, opt.checkpoint_globs, "--checkpoint"));
  if (opt.checkpoint_impl == "reentrant") setup.checkpoint_impl = CheckpointImpl::kReentrant;
  else if (opt.checkpoint_impl == "non-reentrant") setup.checkpoint_impl = CheckpointImpl::kNonReentrant;
  else return Status::InvalidArgument("--checkpoint-impl \"" + opt.checkpoint_impl + "\": expected reentrant or non-reentrant");
  if (!opt.sac.empty()) {
    if (setup.checkpoint_modules.empty())
      return Status::InvalidArgument("--sac " + opt.sac + " selects ops inside checkpointed modules: add --checkpoint GLOB");
    if (setup.checkpoint_impl == CheckpointImpl::kReentrant)
      return Status::InvalidArgument("--sac needs --checkpoint-impl non-reentrant (create_selective_checkpoint_contexts is not supported by use_reentrant=True)");
    MEMSIM_ASSIGN_OR_RETURN(setup.sac, ParseSacPolicy(opt.sac));
  }
  if (opt.save_on_cpu != "off" && opt.save_on_cpu != "on" && opt.save_on_cpu != "pin")
    return Status::InvalidArgument("--save-on-cpu \"" + opt.save_on_cpu + "\": expected off, on or pin");
  if (opt.save_on_cpu != "off") setup.save_on_cpu = opt.save_on_cpu == "pin" ? "pin" : "on";
  if (opt.offload_activations != "off") {
    if (!setup.save_on_cpu.empty())
      return Status::InvalidArgument("--offload-activations with --save-on-cpu: use one of them (both are saved-tensor hooks "
                                     "around the forward; the inner one would take every tensor)");
    MEMSIM_ASSIGN_OR_RETURN(setup.offload_activations, ParseOffloadActivations(opt.offload_activations));
  }
  MEMSIM_ASSIGN_OR_RETURN(setup.parallel, CheckParallel(g, opt.parallel, plan.profile));
  if (setup.parallel.mesh.pp > 1) {  // Note [Pipeline parallel]
    if (opt.accumulate > 1)
      return Status::InvalidArgument("--accumulate with --mesh pp: the schedule's --microbatches accumulate the grads");
    // Setups that keep per-pass state across a microbatch's forward and backward: not yet
    // interleaved with the other microbatches in flight (checkpointing keys its state by the
    // pass slot; its recomputation inside a split backward is not transcribed).
    if (!setup.save_on_cpu.empty() || setup.offload_activations || setup.autocast || opt.optimizer_in_backward)
      return Status::Unsupported("--mesh pp with --save-on-cpu, --offload-activations, --amp or --optimizer-in-backward is not "
                                 "simulated yet");
    const std::optional<PpSchedule> schedule = ParsePpSchedule(setup.parallel.pp_schedule);
    if (!schedule)
      return Status::InvalidArgument("--pp-schedule \"" + setup.parallel.pp_schedule + "\": expected gpipe, 1f1b, interleaved1f1b, interleavedzerobubble, zbvzerobubble or dualpipev");
    // A split backward recomputes a checkpointed module once per torch.autograd.grad call (Note
    // [Activation checkpointing]); SAC's cache is taken by the first recomputation only.
    if ((!opt.sac.empty() || setup.checkpoint_impl == CheckpointImpl::kReentrant) && *schedule != PpSchedule::kGPipe &&
        *schedule != PpSchedule::k1F1B && *schedule != PpSchedule::kInterleaved1F1B)
      return Status::Unsupported("--sac or --checkpoint-impl reentrant with --pp-schedule " + setup.parallel.pp_schedule +
                                 " (a split backward) is not simulated yet; full non-reentrant --checkpoint is");
    const int stages = setup.parallel.mesh.pp, stage = CoordOf(setup.parallel.mesh, setup.parallel.rank).pp;
    const int per_rank = setup.parallel.pp_stages_per_rank;
    if (const std::optional<PpMulti> multi = MultiStage(*schedule)) {  // as the schedule's constructor raises
      const std::string refused = PpCheck(*multi, stages, per_rank, setup.parallel.pp_microbatches);
      if (!refused.empty()) return Status::InvalidArgument("--pp-schedule " + setup.parallel.pp_schedule + ": " + refused);
    }
    MEMSIM_ASSIGN_OR_RETURN(PipelineStagePlan p,
                            PlanPipelineStage(g, *schedule, stages, per_rank, stage, setup.parallel.pp_split));
    p.microbatches = setup.parallel.pp_microbatches;
    p.fsdp = setup.parallel.mesh.dp_shard > 1;  // Note [FSDP2]: each stage module fully_shard'ed
    if (p.schedule == PpSchedule::k1F1B && p.microbatches < stages)
      return Status::InvalidArgument("--pp-schedule 1f1b needs --microbatches at least the stages (" +
                                     std::to_string(stages) + "), as Schedule1F1B checks");
    setup.pipeline = std::move(p);
  }
  if (opt.optimizer_in_backward) MEMSIM_RETURN_IF_ERROR(CheckOptimizerInBackward(opt, setup));
  setup.optimizer_in_backward = opt.optimizer_in_backward;
  return setup;
}

}  // namespace

namespace {

/// Note [Work budget]: the events of a run are kept in memory, and their number follows the
/// flags (--steps × --accumulate × the graph's ops, plus a recorded optimizer's ops × the
/// parameters per step), not the input's size: a budget on the op runs, checked before any.
constexpr int64_t kMaxOpRuns = 20'000'000;

Status CheckWork(const Graph& g, const SimOptions& opt) {
  const int64_t ops = static_cast<int64_t>(g.ops.size()), params = static_cast<int64_t>(g.parameters.size());
  int64_t program_ops = 0;
  if (opt.optimizer == "recorded" && g.optimizer)
    for (const OptProgram* p : {&g.optimizer->first, &g.optimizer->steady})
      program_ops = std::max<int64_t>(program_ops, static_cast<int64_t>(p->before.size() + p->body.size() + p->end.size()));
  std::optional<int64_t> pass = CheckedMul(std::max(opt.accumulate, 1), ops);
  std::optional<int64_t> optimizer = CheckedMul(program_ops, params);
  std::optional<int64_t> step = pass && optimizer ? CheckedAdd(*pass, *optimizer) : std::nullopt;
  std::optional<int64_t> total = step ? CheckedMul(*step, std::max(opt.steps, 1)) : std::nullopt;
  if (total && *total <= kMaxOpRuns) return Status::OK();
  const std::string runs = total ? std::to_string(*total) : "more than 2^63";
  if (optimizer && *optimizer > kMaxOpRuns / 2)
    return Status::InvalidArgument("the recorded optimizer's " + std::to_string(program_ops) + " ops per parameter × " +
                                   std::to_string(params) + " parameters of " + g.name + " are " +
                                   std::to_string(*optimizer) + " op runs per step: more than memsim simulates (" +
                                   std::to_string(kMaxOpRuns) + "); record a shorter optimizer program");
  return Status::InvalidArgument("--steps " + std::to_string(opt.steps) + " × --accumulate " +
                                 std::to_string(opt.accumulate) + " × " + std::to_string(ops) + " ops of " + g.name +
                                 " = " + runs + " op runs: more than memsim simulates (" + std::to_string(kMaxOpRuns) +
                                 "); lower --steps or --accumulate");
}

/// Context parallel: the whole sequence (--set seq or the graph's default), which cp must divide.
Result<int64_t> WholeSequence(const Graph& g, const SimOptions& opt) {
  const uint32_t s = g.FindSymbol("seq");
  if (s == kNone)
    return Status::InvalidArgument("--mesh cp: " + g.name + " has no seq symbol (context parallelism shards the sequence)");
  auto it = opt.symbols.find("seq");
  const int64_t seq = it != opt.symbols.end() ? it->second : g.DefaultBindings()[s].value_or(0);
  const int cp = opt.parallel.mesh.cp;
  if (seq <= 0 || seq % cp != 0)
    return Status::InvalidArgument("--mesh cp=" + std::to_string(cp) + " does not divide seq " + std::to_string(seq) +
                                   " (set the whole sequence with --set seq=S, a multiple of cp)");
  return seq;
}

}  // namespace

Status PrepareSim(const Graph& g, const SimOptions& opt, SimPlan* plan) {
  MEMSIM_RETURN_IF_ERROR(CheckWork(g, opt));
  SimPlan& r = *plan;
  auto profile = FindProfile(opt.profile, opt.torch);
  if (!profile)
    return Status::InvalidArgument("unknown profile \"" + opt.profile + "\" or --torch \"" + opt.torch +
                                   "\" (expected cuda or cpu, and 1.13 or 2.13)");
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
  if (opt.gpu_sm_count > 0) r.profile.gpu_sm_count = opt.gpu_sm_count;
  if (opt.gpu_max_threads_per_sm > 0) r.profile.gpu_max_threads_per_sm = opt.gpu_max_threads_per_sm;
  r.profile.sdpa_backend = opt.sdpa_backend;
  if (!opt.sdpa_backend.empty() && opt.sdpa_backend != "math" &&
      (!r.profile.fused_sdpa || (!r.profile.cuda && opt.sdpa_backend != "flash")))
    return Status::InvalidArgument("--sdpa-backend " + opt.sdpa_backend + ": not a backend of this profile (" +
                                   (r.profile.fused_sdpa ? "the CPU has flash and math" : "1.13 has math only") + ")");
  r.profile.cudnn_benchmark_trials = r.profile.cuda && opt.cudnn_benchmark && opt.first_step;
  if (opt.checkpoint_early_stop) r.profile.checkpoint_early_stop = *opt.checkpoint_early_stop;
  r.profile.dispatch_mode = opt.dispatch_mode;
  auto optimizer = FindOptimizer(opt.optimizer);
  if (!optimizer)
    return Status::InvalidArgument("unknown optimizer \"" + opt.optimizer + "\" (expected one of: " + OptimizerNames() + ")");
  r.optimizer = *optimizer;
  if (opt.min_8bit_size < 0) return Status::InvalidArgument("--min-8bit-size must be non-negative (bitsandbytes' default is 4096)");
  r.optimizer.min_8bit_size = opt.min_8bit_size;
  if (r.optimizer.name == "recorded") {
    if (!g.optimizer)
      return Status::InvalidArgument(g.source + " has no recorded optimizer (export the graph with tools/export_torch.py "
                                     "--optimizer FILE.py:CLASS, Note [Recorded optimizers])");
    r.optimizer.program = &*g.optimizer;
  }
  if (r.optimizer.family != OptimizerFamily::kTorch && !opt.parallel.offload.empty())
    return Status::InvalidArgument("--offload with --optimizer " + opt.optimizer +
                                   ": offloaded state is DeepSpeed's CPU Adam (or FSDP's fp32 copy); use adam or adamw");
  if (r.optimizer.family != OptimizerFamily::kTorch && (opt.optimizer_impl == "on" || opt.optimizer_impl == "fused"))
    return Status::InvalidArgument("--foreach " + opt.optimizer_impl + ": memsim models " + opt.optimizer +
                                   "'s per-parameter loop only (drop --foreach)");
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
  if (const int cp = opt.parallel.mesh.cp; cp > 1) {  // Note [Context parallel]: this rank of the ring
    MEMSIM_ASSIGN_OR_RETURN(int64_t seq, WholeSequence(g, opt));
    r.profile.cp = {cp, CoordOf(opt.parallel.mesh, opt.parallel.rank).cp, seq % (2 * cp) == 0};
  }
  if (opt.freeze_params < 0 || opt.freeze_params > static_cast<int64_t>(g.parameters.size()))
    return Status::InvalidArgument("--freeze-params " + std::to_string(opt.freeze_params) + " is outside 0.." +
                                   std::to_string(g.parameters.size()));
  r.frozen.assign(g.parameters.size(), false);
  // A parameter the graph declares requires_grad false (LoRA's base model, Note [LoRA]) is frozen.
  for (size_t k = 0; k < g.parameters.size(); ++k) r.frozen[k] = !g.tensors[g.parameters[k]].requires_grad;
  for (int64_t k = 0; k < opt.freeze_params; ++k) r.frozen[k] = true;
  for (const std::string& glob : opt.freeze_globs) {
    bool matched = false;
    for (size_t k = 0; k < g.parameters.size(); ++k)
      if (fnmatch(glob.c_str(), g.tensors[g.parameters[k]].name.c_str(), 0) == 0) {
        r.frozen[k] = true;
        matched = true;
      }
    if (!matched) return Status::InvalidArgument("--freeze \"" + Excerpt(glob) + "\" matches no parameter of " + g.name);
  }
  r.bind.profile = &r.profile;
  r.bind.inplace_override = opt.inplace;
  MEMSIM_RETURN_IF_ERROR(ApplyPrecision(opt, &r.bind));
  MEMSIM_RETURN_IF_ERROR(ApplyAmpOptions(opt, &r));
  if (!g.fp8.empty() && opt.amp == "fp16")  // the fp8 rule takes the autocast dtype as bf16 (Note [FP8 training])
    return Status::InvalidArgument("--fp8 with --amp fp16: memsim models float8 training under bf16 autocast only; "
                                   "use --amp bf16");
  if (IsTransformerEngine(g.fp8) && !r.profile.cuda)  // Note [Transformer Engine]
    return Status::InvalidArgument("--fp8 te: Transformer Engine runs on CUDA only; use --profile cuda");
  r.explain = opt.explain;
  StepConfig& cfg = r.step;
  cfg.profile = &r.profile;
  cfg.optimizer = r.optimizer;
  cfg.first_step = opt.first_step;
  cfg.frozen = r.frozen;
  if (opt.accumulate < 1) return Status::InvalidArgument("--accumulate must be at least 1");
  if (!(opt.clip_grad_norm >= 0)) return Status::InvalidArgument("--clip-grad-norm must be non-negative");
  cfg.passes = opt.accumulate;
  MEMSIM_RETURN_IF_ERROR(ApplyLoop(opt, &cfg));
  MEMSIM_ASSIGN_OR_RETURN(r.setup, SetupsOf(g, opt, r));
  MEMSIM_RETURN_IF_ERROR(CheckParallelPrecision(opt));
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
  // Pipeline parallel: --batch is the whole batch; each microbatch's step runs on its share.
  if (opt.parallel.mesh.pp > 1) {
    const int m = opt.parallel.pp_microbatches;
    auto it = opt.symbols.find("batch");
    uint32_t s = g.FindSymbol("batch");
    if (m < 1) return Status::InvalidArgument("--microbatches must be at least 1");
    if (s == kNone) return Status::InvalidArgument("--mesh pp: " + g.name + " has no batch symbol to split into microbatches");
    const int64_t batch = it != opt.symbols.end() ? it->second : b[s].value_or(0);
    if (batch % m != 0)
      return Status::InvalidArgument("--microbatches " + std::to_string(m) + " does not divide --batch " +
                                     std::to_string(batch) + " (uneven microbatches are not simulated)");
    b[s] = batch / m;
  }
  // Context parallel: --set seq is the whole sequence; every rank runs its seq/cp shard.
  if (opt.parallel.mesh.cp > 1) {
    MEMSIM_ASSIGN_OR_RETURN(int64_t seq, WholeSequence(g, opt));
    b[g.FindSymbol("seq")] = seq / opt.parallel.mesh.cp;
  }
  // nn.DataParallel: --batch is the whole batch; this device's step runs on its chunk.
  if (opt.parallel.data_parallel) {
    if (!opt.symbols.count("batch")) return Status::InvalidArgument("--data-parallel needs --batch (the whole batch)");
    if (uint32_t s = g.FindSymbol("batch"); s != kNone)
      b[s] = DataParallelChunk(opt.symbols.at("batch"), opt.parallel.world, opt.parallel.rank);
  }
  MEMSIM_RETURN_IF_ERROR(BindRouting(g, opt, &b));
  return b;
}

Result<BoundGraph> BindFor(const Graph& g, const SimPlan& plan, const Bindings& b) {
  return BindGraph(g, b, plan.bind);
}

namespace {

/// One simulated step of |plan| for |opt|: the plan's StepConfig with a fresh set of the plan's
/// training setups, which this object owns and the StepConfig points at (they keep per-step
/// state, and one plan serves the configurations a sweep evaluates concurrently). Without
/// setups it is the plan's own StepConfig. Outlives the SimulateStep / ExplainAtEvent call it is
/// made for.
class PlannedStep {
 public:
  PlannedStep(const SimPlan& plan, const SimOptions& opt) : cfg_(&plan.step) {
    MEMSIM_CHECK(plan.step.setups.empty());  // a plan's setups are data (SimPlan::setup)
    if (!plan.setup.parallel.data_parallel) {
      owned_ = MakeSetups(plan.setup, plan.profile);
    } else {  // nn.DataParallel: the whole batch is a per-configuration value
      SetupOptions setup = plan.setup;
      setup.parallel.dp_total_batch = DataParallelTotal(opt);
      owned_ = MakeSetups(setup, plan.profile);
    }
    if (owned_.empty()) return;  // cfg_ points at plan.step (and so at plan.profile)
    copy_ = plan.step;
    for (const auto& s : owned_) copy_.setups.push_back(s.get());
    if (plan.setup.pipeline) copy_.pipeline = &*plan.setup.pipeline;
    cfg_ = &copy_;
  }
  PlannedStep(const PlannedStep&) = delete;
  PlannedStep& operator=(const PlannedStep&) = delete;
  const StepConfig& config() const { return *cfg_; }

 private:
  std::vector<std::unique_ptr<TrainingSetup>> owned_;
  StepConfig copy_;
  const StepConfig* cfg_;
};

}  // namespace

Result<EventStream> SimulateEvents(const Graph& g, const SimPlan& plan, const BoundGraph& bound, const SimOptions& opt,
                                   size_t reserve_buffers, size_t reserve_events) {
  PlannedStep step(plan, opt);
  return SimulateStep(g, bound, step.config(), StepRecording{/*names=*/false, reserve_buffers, reserve_events});
}

Result<SimResult> SimulatePlanned(const Graph& g, const SimPlan& plan, BoundGraph bound, const SimOptions& opt,
                                  bool names, size_t reserve_buffers, size_t reserve_events) {
  SimResult r;
  r.profile = plan.profile;
  r.optimizer = plan.optimizer;
  r.frozen = plan.frozen;
  r.bound = std::move(bound);
  {
    PlannedStep step(plan, opt);
    MEMSIM_ASSIGN_OR_RETURN(r.events,
                            SimulateStep(g, r.bound, step.config(), StepRecording{names, reserve_buffers, reserve_events}));
  }
  r.peak = AnalyzePeak(r.events);
  if (plan.explain && !r.events.events.empty()) {
    PlannedStep again(plan, opt);  // the step re-run, with setups of its own
    r.at_peak = ExplainAtEvent(g, r.bound, again.config(), r.peak.peak_event);
  }
  return r;
}

Result<SimResult> Simulate(const Graph& g, const SimOptions& opt) {
  SimPlan plan;
  MEMSIM_RETURN_IF_ERROR(PrepareSim(g, opt, &plan));
  MEMSIM_ASSIGN_OR_RETURN(Bindings b, BindingsOf(g, opt));
  MEMSIM_ASSIGN_OR_RETURN(BoundGraph bound, BindFor(g, plan, b));
  return SimulatePlanned(g, plan, std::move(bound), opt);
}

}  // namespace memsim
