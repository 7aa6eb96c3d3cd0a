// The one option spec of the configuration commands: run, fit and advise take one value per
// option, sweep takes lists (a comma-separated list, or the option repeated) and varies every
// option given several values. Also the one --set parser. Bound (CLI11) by the command line
// (tools/memsim) and by the Python module (python/, from keyword arguments) alike, so both
// accept the same options with the same checks and messages.
#ifndef MEMSIM_SIM_OPTIONS_OPTIONS_H_
#define MEMSIM_SIM_OPTIONS_OPTIONS_H_

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/sweep.h"

namespace memsim::cli {

/// Parses --set SYMBOL=V[,V...] (values non-negative integers).
Result<std::pair<std::string, std::vector<int64_t>>> ParseSet(const std::string& s);

struct ConfigOptions {
  enum class Scope { kShapes, kFull };  ///< kShapes: graph, --batch, --set, --profile only

  std::string graph;
  std::vector<int64_t> batches;
  std::vector<std::string> sets;
  std::vector<std::string> optimizers = {"sgd"};
  std::vector<std::string> steps = {"first"};
  std::vector<std::string> profiles = {"cuda"};
  std::vector<std::string> torch = {"2.13"};  ///< --torch 1.13|2.13 (sweeps: a list)
  std::vector<std::string> inplace = {"keep"};
  std::vector<int64_t> freeze_params = {0};
  std::vector<std::string> freeze;
  std::vector<std::string> allocators = {"caching"};
  std::vector<std::string> alloc_confs = {""};
  std::vector<int64_t> accumulate;  ///< empty: 1 (and no sweep axis)
  double clip_grad_norm = 0;
  int64_t min_8bit_size = 4096;     ///< --min-8bit-size N (bitsandbytes 8-bit optimizers)
  std::vector<std::string> amp;  ///< --amp fp16|bf16|off (sweeps: a list)
  std::string grad_scaler;       ///< --grad-scaler on|off ("" = on with --amp fp16)
  std::string amp_loss = "inside";  ///< --amp-loss inside|outside
  std::string sdpa_backend;      ///< --sdpa-backend flash|efficient|cudnn|math ("" = PyTorch's choice)
  std::string cpu_isa;           ///< --cpu-isa avx2|avx512|amx ("" = the cpu profile's default, avx2)
  std::vector<std::string> dtype;  ///< --dtype fp32|fp16|bf16 (sweeps: a list)
  int num_steps = 1;               ///< --steps N
  std::string loop_holds = "none"; ///< --loop-holds output|none
  std::string zero_grad = "set-to-none";  ///< --zero-grad none|zeros|set-to-none
  std::vector<std::string> checkpoint;
  std::string checkpoint_impl = "non-reentrant";  ///< --checkpoint-impl reentrant|non-reentrant
  std::string checkpoint_early_stop;  ///< --checkpoint-early-stop on|off ("" = the release's default)
  std::string dispatch_mode = "off";  ///< --dispatch-mode on|off
  std::string sac;                    ///< --sac POLICY
  std::string save_on_cpu = "off";    ///< --save-on-cpu off|on|pin
  std::string offload_activations = "off";  ///< --offload-activations off|on|SPEC
  std::string moe_routing = "balanced";     ///< --moe-routing balanced|hot=F
  std::string optimizer_in_backward = "off";  ///< --optimizer-in-backward off|on
  std::vector<std::string> foreach_impl;  ///< empty: the profile's default (and no sweep axis)
  std::string gpu;
  std::string capacity;  ///< --capacity BYTES|24GB|80GiB ("" = the --gpu's)
  std::optional<int64_t> conv_workspace;    ///< --conv-workspace BYTES (absent: the profile's)
  std::optional<int64_t> cublas_workspace;  ///< --cublas-workspace BYTES (absent: the profile's or --gpu's)
  std::string cudnn_workspace;          ///< none|typical|max|BYTES; empty = the profile's (typical)
  std::optional<int64_t> context_bytes;  ///< replaces the CUDA context table
  bool cudnn_benchmark = false;
  int64_t ddp = 0;                  ///< --ddp WORLD (0: off)
  std::vector<int64_t> world;       ///< --world N (ZeRO); empty: --ddp's or 1 (and no sweep axis)
  std::vector<int64_t> zero;        ///< --zero 1|2; empty: off (and no sweep axis)
  double bucket_cap_mb = 25;
  bool gradient_as_bucket_view = false;
  int64_t zero_bucket_size = ParallelOptions{}.zero_bucket_elements;  ///< --zero-bucket-size N: reduce_bucket_size
  std::string zero_overlap_comm;              ///< --zero-overlap-comm on|off ("" = DeepSpeed's default)
  int64_t zero_persistence_threshold = ParallelOptions{}.zero_persistence_threshold;  ///< --zero-persistence-threshold N
  std::string fsdp;                 ///< --fsdp full|grad-op
  std::vector<std::string> wrap;    ///< --wrap GLOB (FSDP units)
  std::string offload;              ///< --offload optimizer|params
  std::string fsdp_mixed_precision; ///< --fsdp-mixed-precision fp16|bf16 (FSDP MixedPrecision)
  int64_t data_parallel = 0;        ///< --data-parallel N (0: off)
  std::string mesh;                 ///< --mesh dp_shard=S,tp=T,...: the N-D device mesh ("" = off)
  /// --config FILE: expanded into options before parsing (ExpandConfigFiles); bound for --help.
  std::string config_file;
  std::string reshard_after_forward;  ///< --reshard-after-forward true|false|N (FSDP2)
  std::string init;                 ///< --init device|meta (Note [Meta-device init]); "" = device
  std::string fsdp2_mp;             ///< --fsdp2-mp param=DTYPE[,reduce=DTYPE] (FSDP2 MixedPrecisionPolicy)
  std::string tp_plan = "layers";   ///< --tp-plan: the tensor-parallel plan (lib/ir/tensor_parallel.h)
  std::string sequence_parallel = "off";  ///< --sequence-parallel on|off (with tp in --mesh)
  std::string loss_parallel = "off";      ///< --loss-parallel on|off (with tp in --mesh)
  std::string pp_schedule;          ///< --pp-schedule NAME (with pp in --mesh; "" = 1f1b)
  int microbatches = 0;             ///< --microbatches M (with pp in --mesh; 0 = the stages)
  std::string pp_split;             ///< --pp-split N,N,...: blocks per stage ("" = torchtitan's)
  int pp_stages_per_rank = 0;       ///< --pp-stages-per-rank V (0: 2 for interleaved1f1b, else 1)
  std::string lora;                 ///< --lora SPEC: PEFT LoRA adapters (lib/ir/lora.h); "" = off
  std::string quantize_base;        ///< --quantize-base SPEC: bnb 4/8-bit base weights (lib/ir/quantized_base.h)
  std::string fp8;                  ///< --fp8 SPEC: torchao float8 Linears (lib/ir/fp8.h); "" = off
  std::string memory_budget;        ///< --memory-budget F: compiled regions' recorded program (lib/ir/compiled_budget.h)
  std::string compile;              ///< --compile on|off: compiled regions or the export's eager ops (lib/ir/compile_mode.h); "" = as read

  /// Adds the options to |cmd|; |lists| words the help for sweep.
  void Bind(CLI::App* cmd, bool lists, Scope scope = Scope::kFull);
  /// The base configuration and one axis per option (first axis slowest) for |command|. Errors
  /// name the option; an option that would change nothing (--world without --zero or --fsdp,
  /// except for advise) is refused.
  Result<SweepSpec> Spec(const std::string& command = "sweep") const;
  /// The one configuration run, fit and advise take (every option with a single value).
  Result<RunConfig> Single(const std::string& command) const;
  /// The graph these options run: |g| itself, or its rewrites: --fp8 (ApplyFp8), then --lora
  /// (ApplyLora), then --quantize-base (ApplyQuantizedBase).
  Result<Graph> Adapt(Graph g) const;
  /// Every option Bind added to |cmd| that its command line gave, in a canonical form:
  /// "--name=v1,v2" sorted by name, space-separated (the graph's path left out). Two runs with
  /// the same canonical options and graph content make the same configurations (sweep
  /// fingerprints).
  std::string Canonical(const CLI::App& cmd) const;

 private:
  void BindOptions(CLI::App* cmd, bool lists, Scope scope);
  std::vector<std::string> bound_;  ///< the names of the options Bind added

 private:
  /// Every integer option in its range (Note [Numeric options]); the error names the option.
  Status CheckNumbers() const;
  /// --dtype / --amp / --fsdp-mixed-precision with --zero / --fsdp: refuses the combinations
  /// that mean nothing (Notes [ZeRO mixed precision], [FSDP mixed precision]).
  Status CheckMixedPrecision() const;
  /// --reshard-after-forward, --fsdp2-mp into |sim| under --mesh dp_shard=N (Note [FSDP2]).
  Status ApplyFsdp2(SimOptions* sim) const;
  /// --reshard-after-forward true|false|N into |parallel| (Note [FSDP2]).
  Status ApplyReshardAfterForward(ParallelOptions* parallel) const;
  /// --mesh: parses it into |parallel| (world = the mesh's ranks); refuses it beside the 1-D
  /// data-parallel options and the dimensions not simulated yet (Note [Device mesh]).
  Status ApplyMesh(ParallelOptions* parallel) const;
  /// --pp-schedule, --microbatches, --pp-split, --pp-stages-per-rank under --mesh pp=N (Note
  /// [Pipeline parallel]); refuses the schedules not simulated.
  Status ApplyPipeline(ParallelOptions* parallel) const;
};

}  // namespace memsim::cli

#endif  // MEMSIM_SIM_OPTIONS_OPTIONS_H_
