// Hugging Face configurations as memsim options (Note [Config files]): TrainingArguments as
// JSON (transformers/training_args.py: the fields and their defaults, which apply to keys the
// file leaves out) and an accelerate config (accelerate/commands/config/, default_config.yaml).
// A DeepSpeed config they name is read with ReadDeepSpeed.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>
#include <vector>

#include "sim/options/config_file.h"

namespace memsim::cli {
namespace {

using nlohmann::json;

/// TrainingArguments.optim → memsim's --optimizer (and --foreach); "" = not simulated.
struct OptimRow {
  const char* hf;
  const char* optimizer;
  const char* foreach_impl;
};
constexpr OptimRow kOptims[] = {
    {"adamw_torch", "adamw", ""},       {"adamw_torch_fused", "adamw", "fused"}, {"adamw_apex_fused", "adamw", "fused"},
    {"adafactor", "adafactor", ""},     {"sgd", "sgd", ""},                      {"adagrad", "adagrad", ""},
    {"rmsprop", "rmsprop", ""},         {"adamw_bnb_8bit", "adamw8bit", ""},     {"adamw_8bit", "adamw8bit", ""},
    {"paged_adamw_8bit", "paged_adamw8bit", ""}, {"paged_adamw_32bit", "paged_adamw", ""},
    {"lion_8bit", "lion8bit", ""},      {"paged_lion_8bit", "paged_lion8bit", ""},
};

/// TrainingArguments fields with no effect on one step's memory (prefixes of their names).
constexpr const char* kHfNoEffect[] = {
    "output_dir", "overwrite_output_dir", "do_", "eval", "per_device_eval_batch_size", "prediction_loss_only",
    "learning_rate", "weight_decay", "adam_", "num_train_epochs", "max_steps", "lr_scheduler", "warmup", "log",
    "save", "seed", "data_seed", "run_name", "report_to", "push_to_hub", "hub_", "dataloader_", "remove_unused_columns",
    "label_names", "label_smoothing", "load_best_model_at_end", "metric_for_best_model", "greater_is_better",
    "ignore_data_skip", "resume_from_checkpoint", "disable_tqdm", "past_index", "tf32", "local_rank", "full_determinism",
    "use_cpu", "jit_mode_eval", "bf16_full_eval", "fp16_full_eval", "fp16_opt_level", "fp16_backend", "half_precision_backend",
    "group_by_length", "length_column_name", "optim_args", "optim_target_modules", "include_", "batch_eval_metrics",
    "average_tokens_across_devices", "use_liger_kernel", "neftune_noise_alpha", "auto_find_batch_size", "ray_scope",
    "ddp_timeout", "ddp_backend", "ddp_find_unused_parameters", "ddp_broadcast_buffers", "restore_callback_states_from_checkpoint",
    "skip_memory_metrics", "torch_empty_cache_steps", "project", "trackio_space_id", "prediction_", "gradient_checkpointing",
    "activation_checkpointing", "accelerator_config", "per_gpu_", "mp_parameters", "debug", "disable_", "split_batches",
    "use_legacy_prediction_loop", "dispatch_batches", "torchdynamo", "torch_compile_backend", "torch_compile_mode",
    "use_mps_device", "tpu_", "past_", "parallelism_config", "liger_kernel_config", "enable_jit_checkpoint",
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The DeepSpeed config |ref| names: an object inline, or a file path (as given, else beside |t|'s file).
Status ReadNestedDeepSpeed(ConfigTree* t, const std::string& pointer, ConfigFile* out) {
  const json* ref = t->Use(pointer);
  if (ref == nullptr) return Status::OK();
  ConfigFile ds;
  if (ref->is_object()) {
    ConfigTree inner(t->path() + " " + pointer, *ref);
    MEMSIM_RETURN_IF_ERROR(ReadDeepSpeed(&inner, &ds));
    for (const std::string& k : inner.Unused()) ds.unknown.push_back(pointer + k);
  } else if (ref->is_string()) {
    std::string path = ref->get<std::string>();
    const size_t slash = t->path().rfind('/');
    if (!std::ifstream(path) && slash != std::string::npos) path = t->path().substr(0, slash + 1) + path;
    MEMSIM_ASSIGN_OR_RETURN(ds, ReadConfigFile(path));
    if (ds.format != "DeepSpeed") return t->Error(pointer, path + " is not a DeepSpeed config");
  } else {
    return t->Error(pointer, "expected a DeepSpeed config (an object or a file path)");
  }
  out->options.insert(out->options.end(), ds.options.begin(), ds.options.end());
  for (auto list : {&ConfigFile::no_effect, &ConfigFile::not_modelled, &ConfigFile::unknown})
    for (const std::string& k : ds.*list) (out->*list).push_back(ds.path.empty() ? k : ds.path + ":" + k);
  return Status::OK();
}

bool Has(const ConfigFile& f, const std::string& flag) {
  return std::any_of(f.options.begin(), f.options.end(), [&](const auto& o) { return o.first == flag; });
}

/// FSDP (TrainingArguments.fsdp / accelerate's fsdp_sharding_strategy): --fsdp, --offload.
Status AddFsdp(ConfigTree* t, const std::string& at, const std::string& strategy, bool offload, int64_t version,
               ConfigFile* out) {
  if (version == 2)
    return t->Error(at, "FSDP2 (fsdp_version 2) is given to memsim as --mesh dp_shard=N --wrap @blocks: drop the "
                        "FSDP keys from the file and pass those");
  const std::string s = Lower(strategy);
  if (s == "full_shard" || s == "1") out->options.push_back({"--fsdp", "full"});
  else if (s == "shard_grad_op" || s == "2") out->options.push_back({"--fsdp", "grad-op"});
  else if (s == "no_shard" || s == "3") return t->Error(at, "NO_SHARD is DDP: give --ddp N instead");
  else return t->Error(at, "\"" + strategy + "\": memsim simulates FULL_SHARD and SHARD_GRAD_OP (hybrid sharding: --mesh)");
  out->options.push_back({"--wrap", "@blocks"});
  if (offload) out->options.push_back({"--offload", "params"});
  return Status::OK();
}

Status ReadHfCheckpointing(ConfigTree* t, ConfigFile* out) {
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> ac, t->Bool("/activation_checkpointing"));
  const bool new_name = ac.has_value();
  if (!ac) {
    MEMSIM_ASSIGN_OR_RETURN(ac, t->Bool("/gradient_checkpointing"));
  }
  const std::string kw = new_name ? "/activation_checkpointing_kwargs" : "/gradient_checkpointing_kwargs";
  if (!ac.value_or(false)) {
    t->Use("/activation_checkpointing_kwargs");
    t->Use("/gradient_checkpointing_kwargs");
    return Status::OK();
  }
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> every, t->Int(kw + "/every_n_layers", 1, 1'000'000));
  out->options.push_back({"--checkpoint", every.value_or(1) > 1 ? "@blocks%" + std::to_string(*every) + "=0" : "@blocks"});
  // transformers 5: use_reentrant defaults to False (modeling_utils._activation_checkpointing_enable).
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> reentrant, t->Bool(kw + "/use_reentrant"));
  if (reentrant.value_or(false)) out->options.push_back({"--checkpoint-impl", "reentrant"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> offload, t->Bool(kw + "/offload"));
  if (offload.value_or(false)) out->not_modelled.push_back(kw + "/offload (checkpoint inputs in pinned host memory)");
  t->Use("/activation_checkpointing_kwargs");
  t->Use("/gradient_checkpointing_kwargs");
  return Status::OK();
}

/// accelerate's fsdp_version 2: fully_shard on the transformer layers and the root over every
/// process (Note [FSDP2]); mixed_precision is MixedPrecisionPolicy(param_dtype, reduce_dtype).
Status ReadAccelerateFsdp2(ConfigTree* t, int64_t procs, const std::string& low, ConfigFile* out) {
  if (procs > 1) out->options.push_back({"--mesh", "dp_shard=" + std::to_string(procs)});
  out->options.push_back({"--wrap", "@blocks"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> reshard, t->Bool("/fsdp_config/fsdp_reshard_after_forward"));
  if (reshard && !*reshard) out->options.push_back({"--reshard-after-forward", "false"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> offload, t->Bool("/fsdp_config/fsdp_offload_params"));
  if (offload.value_or(false) && procs > 1) out->options.push_back({"--offload", "params"});  // CPUOffloadPolicy
  else if (offload.value_or(false)) out->not_modelled.push_back("/fsdp_config/fsdp_offload_params (one process: no FSDP2 mesh)");
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> ac, t->Bool("/fsdp_config/fsdp_activation_checkpointing"));
  if (ac.value_or(false)) out->options.push_back({"--checkpoint", "@blocks"});
  // accelerate FullyShardedDataParallelPlugin.set_mixed_precision: param_dtype = reduce_dtype = that dtype.
  if (!low.empty()) out->options.push_back({"--fsdp2-mp", "param=" + low + ",reduce=" + low});
  t->Use("/fsdp_config/fsdp_transformer_layer_cls_to_wrap");
  t->Skip("/fsdp_config", &out->no_effect);
  return Status::OK();
}

}  // namespace

Status ReadTrainingArguments(ConfigTree* t, ConfigFile* out) {
  out->format = "TrainingArguments";
  // Absent keys take TrainingArguments' defaults: batch 8, max_grad_norm 1.0, adamw_torch_fused (torch >= 2.8).
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> batch, t->Int("/per_device_train_batch_size", 1, int64_t{1} << 40));
  out->options.push_back({"--batch", std::to_string(batch.value_or(8))});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> accum, t->Int("/gradient_accumulation_steps", 1, 1'000'000));
  if (accum.value_or(1) > 1) out->options.push_back({"--accumulate", std::to_string(*accum)});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<double> clip, t->Number("/max_grad_norm"));
  if (clip.value_or(1.0) > 0) out->options.push_back({"--clip-grad-norm", json(clip.value_or(1.0)).dump()});
  MEMSIM_RETURN_IF_ERROR(ReadHfCheckpointing(t, out));
  MEMSIM_RETURN_IF_ERROR(ReadNestedDeepSpeed(t, "/deepspeed", out));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> bf16, t->Bool("/bf16"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> fp16, t->Bool("/fp16"));
  const std::string low = bf16.value_or(false) ? "bf16" : fp16.value_or(false) ? "fp16" : "";
  // fsdp: "full_shard auto_wrap offload" or a list of those words.
  std::vector<std::string> words;
  if (const json* f = t->Use("/fsdp")) {
    std::string text;
    if (f->is_array()) for (const json& w : *f) text += (w.is_string() ? w.get<std::string>() : w.dump()) + " ";
    else if (f->is_string()) text = f->get<std::string>();
    else return t->Error("/fsdp", "expected a string or a list of strings");
    for (size_t i = 0; i < text.size();) {
      size_t j = text.find(' ', i);
      if (j == std::string::npos) j = text.size();
      if (j > i) words.push_back(text.substr(i, j - i));
      i = j + 1;
    }
  }
  const bool fsdp = std::any_of(words.begin(), words.end(), [](const std::string& w) { return w != "offload" && w != "auto_wrap"; });
  if (fsdp) {
    MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> version, t->Int("/fsdp_config/fsdp_version", 1, 2));
    if (!version) { MEMSIM_ASSIGN_OR_RETURN(version, t->Int("/fsdp_config/version", 1, 2)); }
    const bool offload = std::find(words.begin(), words.end(), "offload") != words.end();
    const std::string strategy = *std::find_if(words.begin(), words.end(), [](const std::string& w) { return w != "offload" && w != "auto_wrap"; });
    MEMSIM_RETURN_IF_ERROR(AddFsdp(t, "/fsdp", strategy, offload, version.value_or(1), out));
    t->Use("/fsdp_config/transformer_layer_cls_to_wrap");  // the repeated blocks (--wrap @blocks)
    MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> fac, t->Bool("/fsdp_config/activation_checkpointing"));
    if (fac.value_or(false) && !Has(*out, "--checkpoint")) out->options.push_back({"--checkpoint", "@blocks"});
    if (!low.empty()) out->options.push_back({"--fsdp-mixed-precision", low});
    t->Skip("/fsdp_config", &out->no_effect);
  } else if (!low.empty()) {
    // Note [ZeRO mixed precision]: the Trainer fills DeepSpeed's "auto" fp16/bf16 from these.
    out->options.push_back(Has(*out, "--zero") ? std::pair<std::string, std::string>{"--dtype", low}
                                               : std::pair<std::string, std::string>{"--amp", low});
  }
  if (!Has(*out, "--optimizer")) {  // a DeepSpeed optimizer section wins over optim
    MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> optim, t->String("/optim"));
    const std::string name = optim.value_or("adamw_torch_fused");
    const OptimRow* row = std::find_if(std::begin(kOptims), std::end(kOptims), [&](const OptimRow& r) { return name == r.hf; });
    if (row == std::end(kOptims))
      return t->Error("/optim", "\"" + name + "\" is not simulated; give --optimizer to stand in for it");
    out->options.push_back({"--optimizer", row->optimizer});
    if (*row->foreach_impl) out->options.push_back({"--foreach", row->foreach_impl});
  } else {
    t->Skip("/optim", &out->no_effect);
  }
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> bucket, t->Int("/ddp_bucket_cap_mb", 1, 1'000'000'000));
  if (bucket) out->options.push_back({"--bucket-cap-mb", std::to_string(*bucket)});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> compile, t->Bool("/torch_compile"));
  if (compile.value_or(false)) out->not_modelled.push_back("/torch_compile (simulated as eager)");
  for (const auto& [key, value] : t->root().items())
    for (const char* prefix : kHfNoEffect)
      if (key.rfind(prefix, 0) == 0) t->Skip("/" + EscapeKey(key), &out->no_effect);
  return Status::OK();
}

Status ReadAccelerate(ConfigTree* t, ConfigFile* out) {
  out->format = "accelerate";
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> type, t->String("/distributed_type"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> procs, t->Int("/num_processes", 1, 1'000'000));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> mp, t->String("/mixed_precision"));
  const std::string dist = type.value_or("NO"), low = mp && (*mp == "bf16" || *mp == "fp16") ? *mp : "";
  if (mp && *mp == "fp8") out->not_modelled.push_back("/mixed_precision fp8 (give --fp8)");
  const std::string world = std::to_string(procs.value_or(1));
  if (dist == "MULTI_GPU") {
    if (procs.value_or(1) > 1) out->options.push_back({"--ddp", world});
  } else if (dist == "FSDP") {
    MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> version, t->Int("/fsdp_config/fsdp_version", 1, 2));
    if (version.value_or(1) == 2) return ReadAccelerateFsdp2(t, procs.value_or(1), low, out);
    MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> strategy, t->String("/fsdp_config/fsdp_sharding_strategy"));
    if (!strategy) {  // written as a number by older accelerate versions
      MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> n, t->Int("/fsdp_config/fsdp_sharding_strategy", 1, 5));
      strategy = n ? std::optional<std::string>(std::to_string(*n)) : std::nullopt;
    }
    MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> offload, t->Bool("/fsdp_config/fsdp_offload_params"));
    MEMSIM_RETURN_IF_ERROR(AddFsdp(t, "/fsdp_config/fsdp_sharding_strategy", strategy.value_or("FULL_SHARD"),
                                   offload.value_or(false), version.value_or(1), out));
    out->options.push_back({"--world", world});
    MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> wrap, t->String("/fsdp_config/fsdp_auto_wrap_policy"));
    t->Use("/fsdp_config/fsdp_transformer_layer_cls_to_wrap");  // the repeated blocks (--wrap @blocks)
    if (wrap && *wrap != "TRANSFORMER_BASED_WRAP")
      out->not_modelled.push_back("/fsdp_config/fsdp_auto_wrap_policy " + *wrap + " (simulated as TRANSFORMER_BASED_WRAP)");
    MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> ac, t->Bool("/fsdp_config/fsdp_activation_checkpointing"));
    if (ac.value_or(false)) out->options.push_back({"--checkpoint", "@blocks"});
    if (!low.empty()) out->options.push_back({"--fsdp-mixed-precision", low});
    t->Skip("/fsdp_config", &out->no_effect);
  } else if (dist == "DEEPSPEED") {
    ConfigTree& d = *t;
    MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> file, d.String("/deepspeed_config/deepspeed_config_file"));
    if (file) {
      MEMSIM_RETURN_IF_ERROR(ReadNestedDeepSpeed(t, "/deepspeed_config/deepspeed_config_file", out));
    } else {
      MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> stage, d.Int("/deepspeed_config/zero_stage", 0, 3));
      if (stage.value_or(0) > 0) out->options.push_back({"--zero", std::to_string(*stage)});
      MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> od, d.String("/deepspeed_config/offload_optimizer_device"));
      MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> pd, d.String("/deepspeed_config/offload_param_device"));
      if (pd && *pd != "none") out->options.push_back({"--offload", "params"});
      else if (od && *od != "none") out->options.push_back({"--offload", "optimizer"});
      MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> accum, d.Int("/deepspeed_config/gradient_accumulation_steps", 1, 1'000'000));
      if (accum.value_or(1) > 1) out->options.push_back({"--accumulate", std::to_string(*accum)});
      MEMSIM_ASSIGN_OR_RETURN(std::optional<double> clip, d.Number("/deepspeed_config/gradient_clipping"));
      if (clip.value_or(0) > 0) out->options.push_back({"--clip-grad-norm", nlohmann::json(*clip).dump()});
    }
    if (Has(*out, "--zero")) out->options.push_back({"--world", world});
    if (!low.empty()) out->options.push_back({Has(*out, "--zero") ? "--dtype" : "--amp", low});
    t->Skip("/deepspeed_config", &out->no_effect);
  } else if (dist != "NO") {
    return t->Error("/distributed_type", "\"" + dist + "\": memsim simulates NO, MULTI_GPU, FSDP and DEEPSPEED");
  }
  if (dist != "FSDP" && dist != "DEEPSPEED" && !low.empty()) out->options.push_back({"--amp", low});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> dynamo, t->String("/dynamo_config/dynamo_backend"));
  if (dynamo && *dynamo != "NO") out->not_modelled.push_back("/dynamo_config/dynamo_backend " + *dynamo + " (simulated as eager)");
  for (const char* key : {"/compute_environment", "/debug", "/machine_rank", "/main_process_ip", "/main_process_port",
                          "/main_training_function", "/rdzv_backend", "/same_network", "/tpu_env", "/tpu_use_cluster",
                          "/tpu_use_sudo", "/use_cpu", "/downcast_bf16", "/enable_cpu_affinity", "/gpu_ids",
                          "/num_machines", "/dynamo_config", "/fsdp_config", "/deepspeed_config", "/megatron_lm_config"})
    t->Skip(key, &out->no_effect);
  return Status::OK();
}

}  // namespace memsim::cli
