// A DeepSpeed configuration (ds_config.json) as memsim options (Note [Config files]): the
// micro-batch, accumulation, clipping, ZeRO stage and offload, fp16/bf16, the optimizer. Keys
// from deepspeed/runtime/constants.py and deepspeed/runtime/zero/config.py.
#include <cctype>
#include <string>
#include <vector>

#include "sim/options/config_file.h"

namespace memsim::cli {
namespace {

/// Keys with no effect on one step's memory: logging, schedules, hyperparameters.
constexpr const char* kNoEffect[] = {
    "/steps_per_print", "/wall_clock_breakdown", "/dump_state", "/scheduler", "/optimizer/params",
    "/tensorboard", "/wandb", "/csv_monitor", "/comet", "/comms_logger", "/flops_profiler", "/train_batch_size",
    "/prescale_gradients", "/gradient_predivide_factor", "/zero_allow_untested_optimizer", "/seed",
    "/memory_breakdown", "/fp16/loss_scale", "/fp16/initial_scale_power", "/fp16/loss_scale_window",
    "/fp16/hysteresis", "/fp16/consecutive_hysteresis", "/fp16/min_loss_scale", "/fp16/auto_cast",
    "/zero_optimization/offload_optimizer/pin_memory", "/zero_optimization/offload_param/pin_memory",
    "/zero_optimization/offload_optimizer/nvme_path", "/zero_optimization/offload_param/nvme_path",
    "/zero_optimization/offload_optimizer/buffer_count", "/zero_optimization/offload_optimizer/fast_init",
    "/zero_optimization/offload_optimizer/ratio", "/zero_optimization/stage3_gather_16bit_weights_on_model_save",
    "/zero_optimization/gather_16bit_weights_on_model_save",
    "/zero_optimization/allgather_partitions", "/zero_optimization/reduce_scatter",
    "/zero_optimization/round_robin_gradients", "/zero_optimization/load_from_fp32_weights",
    "/zero_optimization/elastic_checkpoint", "/zero_optimization/ignore_unused_parameters",
    // all_gather_into_tensor writes the updated partitions into the flat buffer: no bucket.
    "/zero_optimization/allgather_bucket_size",
    "/zero_optimization/zero_hpz_partition_size", "/checkpoint", "/data_efficiency", "/elasticity", "/aio",
};

/// ZeRO settings memsim simulates at DeepSpeed's default only (Note [ZeRO]): another value is
/// not modelled, and said so.
struct Defaulted {
  const char* key;
  double value;
};
constexpr Defaulted kAtDefault[] = {
    {"/zero_optimization/stage3_prefetch_bucket_size", 5e7},
    {"/zero_optimization/stage3_max_live_parameters", 1e9},
    {"/zero_optimization/stage3_max_reuse_distance", 1e9},
    {"/zero_optimization/sub_group_size", 1e9},
};

Status ReadZero(ConfigTree* t, ConfigFile* out, int64_t* stage) {
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> s, t->Int("/zero_optimization/stage", 0, 3));
  *stage = s.value_or(0);
  if (*stage > 0) out->options.push_back({"--zero", std::to_string(*stage)});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> opt_dev, t->String("/zero_optimization/offload_optimizer/device"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> par_dev, t->String("/zero_optimization/offload_param/device"));
  for (const auto* dev : {&opt_dev, &par_dev})
    if (dev->has_value() && **dev != "cpu" && **dev != "nvme" && **dev != "none")
      return t->Error(dev == &opt_dev ? "/zero_optimization/offload_optimizer/device" : "/zero_optimization/offload_param/device",
                      "\"" + **dev + "\": expected cpu, nvme or none");
  const bool off_opt = opt_dev && *opt_dev != "none", off_par = par_dev && *par_dev != "none";
  if (off_par) {  // ZeRO-Infinity: the parameters and the optimizer on the host
    out->options.push_back({"--offload", "params"});
    if (!off_opt) out->not_modelled.push_back("/zero_optimization/offload_param without offload_optimizer (simulated with both)");
  } else if (off_opt) {
    out->options.push_back({"--offload", "optimizer"});
  }
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> contiguous, t->Bool("/zero_optimization/contiguous_gradients"));
  if (contiguous && !*contiguous)
    out->not_modelled.push_back("/zero_optimization/contiguous_gradients=false (simulated as true, the default)");
  MEMSIM_ASSIGN_OR_RETURN(std::optional<double> bucket, t->Number("/zero_optimization/reduce_bucket_size"));
  if (bucket && *bucket != 5e8) {
    if (*bucket < 1 || *bucket > 1e12) return t->Error("/zero_optimization/reduce_bucket_size", "expected 1 to 1e12 elements");
    out->options.push_back({"--zero-bucket-size", std::to_string(static_cast<int64_t>(*bucket))});
  }
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> overlap, t->Bool("/zero_optimization/overlap_comm"));
  if (overlap && *stage > 0) out->options.push_back({"--zero-overlap-comm", *overlap ? "on" : "off"});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<double> persist, t->Number("/zero_optimization/stage3_param_persistence_threshold"));
  if (persist && *persist != 1e5) {
    if (*persist < 0 || *persist > 1e12)
      return t->Error("/zero_optimization/stage3_param_persistence_threshold", "expected 0 to 1e12 elements");
    out->options.push_back({"--zero-persistence-threshold", std::to_string(static_cast<int64_t>(*persist))});
  }
  for (const Defaulted& d : kAtDefault) {
    MEMSIM_ASSIGN_OR_RETURN(std::optional<double> v, t->Number(d.key));
    if (v && *v != d.value) out->not_modelled.push_back(std::string(d.key) + " (simulated at DeepSpeed's default)");
  }
  return Status::OK();
}

Status ReadOptimizer(ConfigTree* t, ConfigFile* out) {
  MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> type, t->String("/optimizer/type"));
  if (!type) return Status::OK();
  std::string low = *type;
  for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string name;
  if (low == "adam" || low == "adamw" || low == "fusedadam" || low == "cpuadam") name = "adamw";
  else if (low == "adagrad") name = "adagrad";
  else if (low == "sgd") {
    const nlohmann::json* m = t->Use("/optimizer/params/momentum");
    name = m && m->is_number() && m->get<double>() != 0 ? "momentum" : "sgd";
  }
  if (name.empty())
    return t->Error("/optimizer/type", "\"" + *type + "\" is not simulated; memsim has Adam, AdamW, Adagrad and SGD "
                                       "from DeepSpeed: give --optimizer to stand in for it");
  out->options.push_back({"--optimizer", name});
  return Status::OK();
}

}  // namespace

Status ReadDeepSpeed(ConfigTree* t, ConfigFile* out) {
  out->format = "DeepSpeed";
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> micro, t->Int("/train_micro_batch_size_per_gpu", 1, int64_t{1} << 40));
  if (micro) out->options.push_back({"--batch", std::to_string(*micro)});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<int64_t> accum, t->Int("/gradient_accumulation_steps", 1, 1'000'000));
  if (accum && *accum > 1) out->options.push_back({"--accumulate", std::to_string(*accum)});
  MEMSIM_ASSIGN_OR_RETURN(std::optional<double> clip, t->Number("/gradient_clipping"));
  if (clip && *clip > 0) out->options.push_back({"--clip-grad-norm", nlohmann::json(*clip).dump()});
  int64_t stage = 0;
  MEMSIM_RETURN_IF_ERROR(ReadZero(t, out, &stage));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> fp16, t->Bool("/fp16/enabled"));
  MEMSIM_ASSIGN_OR_RETURN(std::optional<bool> bf16, t->Bool("/bf16/enabled"));
  if (fp16.value_or(false) && bf16.value_or(false)) return t->Error("/bf16/enabled", "fp16 and bf16 are both enabled");
  if (fp16.value_or(false) || bf16.value_or(false)) {
    // Note [ZeRO mixed precision]: the module converted, fp32 master weights in the partition.
    if (stage == 0)
      return t->Error(fp16.value_or(false) ? "/fp16/enabled" : "/bf16/enabled",
                      "DeepSpeed's 16-bit mode without ZeRO keeps fp32 master weights outside ZeRO, which memsim does "
                      "not simulate: use zero_optimization stage 1 (the same memory on one rank) or --amp");
    out->options.push_back({"--dtype", fp16.value_or(false) ? "fp16" : "bf16"});
  }
  MEMSIM_RETURN_IF_ERROR(ReadOptimizer(t, out));
  if (t->Use("/activation_checkpointing")) {
    out->not_modelled.push_back("/activation_checkpointing (applies where the model calls "
                                "deepspeed.checkpointing.checkpoint: give --checkpoint)");
  }
  if (t->Use("/communication_data_type")) out->not_modelled.push_back("/communication_data_type");
  for (const char* key : kNoEffect) t->Skip(key, &out->no_effect);
  return Status::OK();
}

}  // namespace memsim::cli
