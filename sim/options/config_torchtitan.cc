// A torchtitan job config (TOML, torchtitan/config/job_config.py up to its April 2026 form, when
// configs moved to Python) as memsim options (Note [Config files]). Absent keys take
// job_config's defaults: local_batch_size 8, seq_len 2048, max_norm 1.0, AdamW fused,
// selective AC every 2nd layer, early_stop False.
#include <cctype>
#include <string>
#include <vector>

#include "sim/options/config_file.h"

namespace memsim::cli {
namespace {

/// Sections and keys with no effect on one step's memory.
constexpr const char* kNoEffect[] = {
    "/job", "/profiling", "/metrics", "/lr_scheduler", "/checkpoint", "/validation", "/comm", "/fault_tolerance",
    "/experimental", "/memory_estimation", "/model/name", "/model/flavor", "/model/hf_assets_path",
    "/model/tokenizer_path", "/model/print_after_conversion", "/optimizer/lr", "/optimizer/eps",
    "/optimizer/weight_decay", "/optimizer/beta1", "/optimizer/beta2", "/training/dataset", "/training/dataset_path",
    "/training/steps", "/training/gc_freq", "/training/gc_debug", "/training/dataloader", "/training/seed",
    "/training/deterministic", "/activation_checkpoint/preserve_rng_state", "/activation_checkpoint/determinism_check",
    "/activation_checkpoint/debug", "/activation_checkpoint/visualize_memory_budget_pareto",
    "/parallelism/context_parallel_load_balancer", "/parallelism/context_parallel_rotate_method",
    "/parallelism/expert_parallel_comm_backend", "/parallelism/pipeline_parallel_expert_parallel_overlap",
};

Status ReadMesh(ConfigTree* t, int64_t world, ConfigFile* out, bool* shard, int64_t* tp, int64_t* pp) {
  struct Dim { const char* key; const char* name; int64_t degree; };
  Dim dims[] = {{"/parallelism/pipeline_parallel_degree", "pp", 1},
                {"/parallelism/data_parallel_replicate_degree", "dp_replicate", 1},
                {"/parallelism/data_parallel_shard_degree", "dp_shard", -1},
                {"/parallelism/context_parallel_degree", "cp", 1},
                {"/parallelism/tensor_parallel_degree", "tp", 1},
                {"/parallelism/expert_parallel_degree", "ep", 1}};
  int64_t others = 1;
  for (Dim& d : dims) {
    MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> v, t->Int(d.key, -1, 1'000'000));
    if (v) d.degree = *v;
    if (d.degree == 0 || (d.degree == -1 && std::string(d.name) != "dp_shard"))
      return t->Error(d.key, std::to_string(d.degree) + ": expected a positive degree");
    if (d.degree > 0 && std::string(d.name) != "ep") others *= d.degree;
  }
  Dim& shard_dim = dims[2];
  if (shard_dim.degree == -1) {  // ParallelDims: the ranks the other dimensions leave
    if (world < 1)
      return t->Error(shard_dim.key, "-1 takes the ranks the other dimensions leave: give the number of GPUs as --world N");
    if (world % others != 0)
      return t->Error(shard_dim.key, "-1: --world " + std::to_string(world) + " is not a multiple of the other degrees' "
                                     "product " + std::to_string(others));
    shard_dim.degree = world / others;
  }
  std::string mesh;
  for (const Dim& d : dims)
    if (d.degree > 1) mesh += (mesh.empty() ? "" : ",") + std::string(d.name) + "=" + std::to_string(d.degree);
  if (!mesh.empty()) out->options.push_back({"--mesh", mesh});
  *shard = shard_dim.degree > 1;
  *pp = dims[0].degree;
  *tp = dims[4].degree;
  // torchtitan's trainer builds the model on the meta device, parallelizes it, then
  // materializes the shards (to_empty, init_weights): Note [Meta-device init].
  if (*shard || dims[4].degree > 1) out->options.push_back({"--init", "meta"});
  return Status::OK();
}

/// torchtitan's apply_tp (parallelize_llama): its whole plan with sequence parallelism, and
/// loss_parallel unless disabled; and the pipeline's schedule and microbatches (pipeline_llm).
Status ReadTpPp(ConfigTree* t, ConfigFile* out, int64_t tp, int64_t pp, int64_t local_batch) {
  const char* tp_keys[] = {"/parallelism/disable_loss_parallel", "/parallelism/enable_async_tensor_parallel"};
  if (tp > 1) {
    out->options.push_back({"--tp-plan", "torchtitan"});
    out->options.push_back({"--sequence-parallel", "on"});
    MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> no_loss_parallel, t->Bool(tp_keys[0]));
    if (!no_loss_parallel.value_or(false)) out->options.push_back({"--loss-parallel", "on"});
    MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> async_tp, t->Bool(tp_keys[1]));
    if (async_tp.value_or(false)) out->not_modelled.push_back(std::string(tp_keys[1]) + " (compiled micro-pipelining)");
  } else {
    for (const char* key : tp_keys) t->Skip(key, &out->no_effect);
  }
  const char* pp_keys[] = {"/parallelism/pipeline_parallel_schedule", "/parallelism/pipeline_parallel_microbatch_size",
                           "/parallelism/pipeline_parallel_layers_per_stage", "/parallelism/pipeline_parallel_schedule_csv",
                           "/parallelism/pipeline_parallel_split_points"};
  if (pp <= 1) {
    for (const char* key : pp_keys) t->Skip(key, &out->no_effect);
    return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> schedule, t->String(pp_keys[0]));
  std::string s = schedule.value_or("1F1B");
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  out->options.push_back({"--pp-schedule", s});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> mbs, t->Int(pp_keys[1], 1, int64_t{1} << 40));
  if (local_batch % mbs.value_or(1) != 0)
    return t->Error(pp_keys[1], std::to_string(*mbs) + " does not divide local_batch_size " + std::to_string(local_batch));
  out->options.push_back({"--microbatches", std::to_string(local_batch / mbs.value_or(1))});
  for (const char* key : {pp_keys[2], pp_keys[3], pp_keys[4]})
    if (t->Use(key)) out->not_modelled.push_back(std::string(key) + " (give --pp-split)");
  return Status::OK();
}

Status ReadActivationCheckpoint(ConfigTree* t, ConfigFile* out) {
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> mode, t->String("/activation_checkpoint/mode"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> option, t->String("/activation_checkpoint/selective_ac_option"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> early, t->Bool("/activation_checkpoint/early_stop"));
  const std::string m = mode.value_or("selective"), o = option.value_or("2");
  if (m == "none") return Status::OK();
  if (m == "full") {
    out->options.push_back({"--checkpoint", "@blocks"});
  } else if (m == "selective" && o == "op") {
    out->options.push_back({"--checkpoint", "@blocks"});
    out->options.push_back({"--sac", "torchtitan"});
  } else if (m == "selective" && !o.empty() && o.size() < 7 && o.find_first_not_of("0123456789") == std::string::npos) {
    const int64_t k = std::stoll(o);  // _layer_sac_count % ac_freq == 0, counted from 1; 0 = every layer
    out->options.push_back({"--checkpoint", k <= 1 ? "@blocks" : "@blocks%" + o + "=" + std::to_string(k - 1)});
  } else if (m == "memory_budget") {
    return t->Error("/activation_checkpoint/mode", "memory_budget is the compiled partitioner's: not simulated yet; "
                                                   "use full or selective");
  } else {
    return t->Error(m == "selective" ? "/activation_checkpoint/selective_ac_option" : "/activation_checkpoint/mode",
                    "\"" + (m == "selective" ? o : m) + "\": expected none, full, selective with \"op\" or a layer count");
  }
  out->options.push_back({"--checkpoint-early-stop", early.value_or(false) ? "on" : "off"});
  return Status::OK();
}

}  // namespace

Status ReadTorchtitan(ConfigTree* t, ConfigFile* out, int64_t world) {
  out->format = "torchtitan";
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> local, t->Int("/training/local_batch_size", 1, int64_t{1} << 40));
  if (!local) { MEMSIM_ASSIGN_OR_RETURN(local, t->Int("/training/batch_size", 1, int64_t{1} << 40)); }
  out->options.push_back({"--batch", std::to_string(local.value_or(8))});
  // train_step: `pred = model(inputs); loss = loss_fn(pred, labels); del pred; loss.backward()`.
  out->options.push_back({"--loop-holds", "loss"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> seq, t->Int("/training/seq_len", 1, int64_t{1} << 40));
  out->options.push_back({"--set", "seq=" + std::to_string(seq.value_or(2048))});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<double> clip, t->Number("/training/max_norm"));
  if (clip.value_or(1.0) > 0) out->options.push_back({"--clip-grad-norm", nlohmann::json(clip.value_or(1.0)).dump()});
  bool shard = false;
  int64_t tp = 1, pp = 1;
  MEMSIM_RETURN_IF_ERROR(ReadMesh(t, world, out, &shard, &tp, &pp));
  MEMSIM_RETURN_IF_ERROR(ReadTpPp(t, out, tp, pp, local.value_or(8)));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> global, t->Int("/training/global_batch_size", -1, int64_t{1} << 40));
  if (global.value_or(-1) > 0) out->not_modelled.push_back("/training/global_batch_size (gradient accumulation: give --accumulate)");
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> dtype, t->String("/training/dtype"));
  if (dtype && *dtype == "bfloat16") out->options.push_back({"--dtype", "bf16"});
  // FSDP2 (Note [FSDP2]): fully_shard on every block, then the root, with MixedPrecisionPolicy.
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> mp, t->String("/training/mixed_precision_param"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> reduce, t->String("/training/mixed_precision_reduce"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> reshard, t->String("/parallelism/fsdp_reshard_after_forward"));
  if (shard) {
    out->options.push_back({"--wrap", "@blocks"});
    if (mp.value_or("bfloat16") == "bfloat16" && !(dtype && *dtype == "bfloat16"))
      out->options.push_back({"--fsdp2-mp", std::string("param=bf16,reduce=") +
                                                (reduce.value_or("float32") == "float32" ? "fp32" : "bf16")});
    // get_fsdp_reshard_after_forward_policy: "default" reshards unless pipeline parallel is on
    const std::string policy = reshard.value_or("default");
    if (policy == "never" || (policy == "default" && pp > 1)) out->options.push_back({"--reshard-after-forward", "false"});
  }
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> cpu_offload, t->Bool("/training/enable_cpu_offload"));
  if (cpu_offload.value_or(false) && shard) out->options.push_back({"--offload", "params"});  // CPUOffloadPolicy
  else if (cpu_offload.value_or(false)) out->not_modelled.push_back("/training/enable_cpu_offload (FSDP2 CPUOffloadPolicy: needs FSDP)");
  MEMSIM_RETURN_IF_ERROR(ReadActivationCheckpoint(t, out));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> name, t->String("/optimizer/name"));
  const std::string opt = name.value_or("AdamW");
  if (opt != "AdamW" && opt != "Adam")
    return t->Error("/optimizer/name", "\"" + opt + "\": memsim simulates torchtitan's Adam and AdamW; give --optimizer");
  out->options.push_back({"--optimizer", opt == "AdamW" ? "adamw" : "adam"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> impl, t->String("/optimizer/implementation"));
  const std::string i = impl.value_or("fused");
  if (i != "fused" && i != "foreach" && i != "for-loop")
    return t->Error("/optimizer/implementation", "\"" + i + "\": expected fused, foreach or for-loop");
  out->options.push_back({"--foreach", i == "fused" ? "fused" : i == "foreach" ? "on" : "off"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> in_bwd, t->Bool("/optimizer/early_step_in_backward"));
  if (in_bwd.value_or(false)) out->options.push_back({"--optimizer-in-backward", "on"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> compile, t->Bool("/compile/enable"));
  if (compile.value_or(false)) out->not_modelled.push_back("/compile/enable (simulated as eager)");
  t->Skip("/compile", &out->no_effect);
  if (t->Use("/float8") || t->Use("/quantize") || t->Use("/model/converters"))
    out->not_modelled.push_back("/float8, /quantize, /model/converters (give --fp8)");
  for (const char* key : kNoEffect) t->Skip(key, &out->no_effect);
  return Status::OK();
}

}  // namespace memsim::cli
