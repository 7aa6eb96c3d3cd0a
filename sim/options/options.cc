#include "sim/options/options.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "lib/autodiff/optimizer.h"
#include "lib/autodiff/pipeline.h"
#include "lib/ir/expert_parallel.h"
#include "lib/ir/fp8.h"
#include "lib/ir/tensor_parallel.h"
#include "lib/ir/compile_mode.h"
#include "lib/ir/compiled_budget.h"
#include "lib/ir/lora.h"
#include "lib/ir/quantized_base.h"
#include "lib/util/checked.h"
#include "lib/util/option_check.h"
#include "lib/util/text_limits.h"

namespace memsim::cli {
namespace {

/// --amp / --dtype values as PyTorch names them too: float16, half, bfloat16, float32, float,
/// with or without "torch." (each maps to memsim's fp16 / bf16 / fp32); |names| are memsim's own.
std::map<std::string, std::string> TorchDtypeNames(std::initializer_list<const char*> names) {
  static const std::map<std::string, std::string> kTorch = {
      {"float16", "fp16"}, {"half", "fp16"}, {"bfloat16", "bf16"}, {"float32", "fp32"}, {"float", "fp32"}};
  std::map<std::string, std::string> out;
  for (const char* n : names) out[n] = n;
  for (const auto& [torch_name, ours] : kTorch)
    if (out.count(ours)) {
      out[torch_name] = ours;
      out["torch." + torch_name] = ours;
    }
  return out;
}

/// ep composes with dp_shard, HSDP's dp_replicate and pp (torchtitan's EP borrowing dp_shard on
/// each stage, Note [Expert parallel]); with the other dimensions it is not simulated yet.
bool EpWithUnsupported(const MeshDims& d) {
  return d.ep > 1 && (d.tp > 1 || d.cp > 1 || (d.pp > 1 && d.dp_shard <= 1) || (d.dp_replicate > 1 && d.dp_shard <= 1));
}

/// EP borrowing dp_shard: FSDP2 shards the experts on dim 1 when dp_shard·cp exceeds them, and
/// refuses an uneven dim-1 shard (_fsdp_param.py: "FSDP does not support uneven sharding on dim").
Status CheckExpertShards(const Graph& g, const MeshDims& d) {
  const int efsdp = EfsdpDegree(d);
  if (int64_t{d.dp_shard} * d.cp <= 1 || efsdp <= 1) return Status::OK();
  for (TensorId p : g.ep_shards) {
    const std::vector<DimExpr>& shape = g.tensors[p].shape;
    if (shape.size() < 2 || !shape[0].is_const() || !shape[1].is_const()) continue;
    const int64_t experts = shape[0].coeff * g.ep_degree;
    if (ExpertShardDim(efsdp, g.ep_degree, experts) == 1 && shape[1].coeff % efsdp != 0)
      return Status::InvalidArgument("--mesh " + d.ToString() + ": FSDP2 shards " + g.tensors[p].name + " on dim 1 (" +
                                     std::to_string(efsdp * g.ep_degree) + " ranks > " + std::to_string(experts) +
                                     " experts) over " + std::to_string(efsdp) + " ranks, which do not divide its " +
                                     std::to_string(shape[1].coeff) + " rows (torch refuses uneven Shard(1)); choose "
                                     "dp_shard so that dp_shard/ep divides them");
  }
  return Status::OK();
}

}  // namespace

Result<std::pair<std::string, std::vector<int64_t>>> ParseSet(const std::string& s) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    return Status::InvalidArgument("--set \"" + Excerpt(s) + "\": expected SYMBOL=non-negative integer (sweep: SYMBOL=V1,V2,...)");
  std::vector<int64_t> values;
  size_t pos = eq + 1;
  while (true) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || errno == ERANGE)
      return Status::InvalidArgument("--set \"" + Excerpt(s) + "\": \"" + Excerpt(item) + "\" is not a non-negative integer");
    if (v > (int64_t{1} << 40))  // Note [Numeric options]
      return Status::InvalidArgument("--set \"" + Excerpt(s) + "\": " + item + ": expected at most 2^40");
    values.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::make_pair(s.substr(0, eq), values);
}

void ConfigOptions::Bind(CLI::App* cmd, bool lists, Scope scope) {
  const size_t before = cmd->get_options().size();
  BindOptions(cmd, lists, scope);
  const std::vector<CLI::Option*> all = cmd->get_options();
  for (size_t i = before; i < all.size(); ++i)
    if (!all[i]->get_positional()) bound_.push_back(all[i]->get_name());
}

std::string ConfigOptions::Canonical(const CLI::App& cmd) const {
  std::vector<std::string> given;
  for (const std::string& name : bound_) {
    const CLI::Option* o = cmd.get_option_no_throw(name);
    if (!o || o->count() == 0) continue;
    std::string v;
    for (const std::string& r : o->results()) v += (v.empty() ? "" : ",") + r;
    given.push_back(o->get_name() + "=" + v);
  }
  std::sort(given.begin(), given.end());
  std::string out;
  for (const std::string& g : given) out += (out.empty() ? "" : " ") + g;
  return out;
}

void ConfigOptions::BindOptions(CLI::App* cmd, bool lists, Scope scope) {
  cmd->add_option("graph", graph, "graph file (JSON, see docs/graph-format.md)")->required();
  cmd->add_option("--batch", batches, lists ? "batch sizes: --batch 8,16,32" : "value of the symbol `batch`")
      ->delimiter(',');
  cmd->add_option("--set", sets, lists ? "symbol values: --set seq=128,512 (repeatable)"
                                       : "bind a symbol: --set seq=512 (repeatable)");
  cmd->add_option("--profile", profiles, "device profile: cuda or cpu (a CPU training step, as the oracle traces)")
      ->delimiter(',')
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--torch", torch, "the PyTorch release whose rules apply: 2.13 (default) or 1.13 (Note [Version profiles])")
      ->delimiter(',')
      ->check(CLI::IsMember({"1.13", "2.13"}));
  if (scope == Scope::kShapes) return;
  cmd->add_option("--optimizer", optimizers, OptimizerNames())->delimiter(',');
  cmd->add_option("--step", steps, "first (optimizer state created during the step) or steady")
      ->delimiter(',')
      ->check(CLI::IsMember({"first", "steady"}));
  cmd->add_option("--inplace-activations", inplace, "on, off, or keep the graph's in-place flags")
      ->delimiter(',')
      ->check(CLI::IsMember({"on", "off", "keep"}));
  cmd->add_option("--freeze-params", freeze_params, "freeze the first K parameter tensors (registration order)")
      ->delimiter(',');
  cmd->add_option("--freeze", freeze, "freeze parameters whose name matches this glob (repeatable)");
  cmd->add_option("--allocator", allocators, "caching (PyTorch's CUDA caching allocator), expandable, or ideal")
      ->delimiter(',')
      ->check(CLI::IsMember({"caching", "expandable", "ideal"}));
  cmd->add_option("--alloc-conf", alloc_confs, "the caching allocator's options, as PYTORCH_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF in 1.13) takes them, e.g. expandable_segments:True" +
                                                   std::string(lists ? " (repeat the option for several)" : ""));
  cmd->add_option("--accumulate", accumulate,
                  "gradient accumulation: K forward+backward passes per optimizer step (default 1)")
      ->delimiter(',');
  cmd->add_option("--min-8bit-size", min_8bit_size,
                  "bitsandbytes 8-bit optimizers: parameters with fewer elements keep fp32 states (their "
                  "min_8bit_size, default 4096)");
  cmd->add_option("--clip-grad-norm", clip_grad_norm,
                  "call clip_grad_norm_(params, MAX) before optimizer.step() (0: off)");
  cmd->add_option("--checkpoint", checkpoint,
                  "activation checkpointing (torch.utils.checkpoint; see --checkpoint-impl) of the modules whose path "
                  "matches this glob, e.g. 'layer?.*' (repeatable)");
  cmd->add_option("--checkpoint-impl", checkpoint_impl,
                  "torch.utils.checkpoint's use_reentrant: non-reentrant (use_reentrant=False, default) or "
                  "reentrant (use_reentrant=True: nested backward through the recomputation)")
      ->check(CLI::IsMember({"reentrant", "non-reentrant"}));
  cmd->add_option("--checkpoint-early-stop", checkpoint_early_stop,
                  "non-reentrant checkpoint: the recomputation stops after the last op that saves a tensor "
                  "(torch.utils.checkpoint.set_checkpoint_early_stop; default on under --torch 2.13, off under 1.13)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--sac", sac,
                  "selective activation checkpointing in the --checkpoint modules: torchtitan (save mm and fused "
                  "attention outputs, every other mm recomputed), ops:NAME,... (those ATen ops saved) or a JSON "
                  "policy file {\"save\": [...], \"every_other_mm\": false}");
  cmd->add_option("--save-on-cpu", save_on_cpu,
                  "activation offloading: forward and loss under torch.autograd.graph.save_on_cpu(pin_memory=False) "
                  "(on) or pin_memory=True (pin); checkpointed modules keep their own hooks")
      ->check(CLI::IsMember({"off", "on", "pin"}));
  cmd->add_option("--offload-activations", offload_activations,
                  "torchtune's activation offloading (OffloadActivations) around forward and loss: on (its "
                  "defaults) or min_size=BYTES,streams=on|off,pin=on|off,stash=K; off (default)");
  cmd->add_option("--moe-routing", moe_routing,
                  "mixture of experts: the tokens each expert receives where --set routed<L>_e<i>=N does not give "
                  "them: balanced (default), hot=F (the first expert F times the mean, the rest balanced; under "
                  "--mesh ep=N every rank routes so, and expert 0's rank receives the most) or ranks=C0:C1:... "
                  "(each rank's counts, as the kit's routed=: layers by '/', experts by ',')");
  cmd->add_option("--optimizer-in-backward", optimizer_in_backward,
                  "on: one optimizer per parameter, stepped by a post-accumulate-grad hook that then frees the grad "
                  "(torchtune optimizer_in_bwd); off (default)")
      ->check(CLI::IsMember({"off", "on"}));
  cmd->add_option("--foreach", foreach_impl,
                  "optimizer implementation: on (multi-tensor foreach), off (for-loop) or fused; default: the "
                  "profile's PyTorch default (cuda: foreach, cpu: for-loop)")
      ->delimiter(',')
      ->check(CLI::IsMember({"on", "off", "fused"}));
  cmd->add_option("--amp", amp,
                  "mixed precision: torch.autocast(dtype=fp16|bf16) around forward and loss (off: none)")
      ->delimiter(',')
      ->transform(CLI::CheckedTransformer(TorchDtypeNames({"off", "fp16", "bf16"}), CLI::ignore_case));
  cmd->add_option("--amp-loss", amp_loss,
                  "with --amp: inside (default: `with autocast(): out = model(x); loss = crit(out, y)`) or "
                  "outside (the loss after the autocast region, on the model's low-precision output)")
      ->check(CLI::IsMember({"inside", "outside"}));
  cmd->add_option("--sdpa-backend", sdpa_backend,
                  "the backend every F.scaled_dot_product_attention runs on, as torch.nn.attention.sdpa_kernel "
                  "forces it: flash, efficient, cudnn or math (default: PyTorch's choice for the device and inputs)")
      ->check(CLI::IsMember({"flash", "efficient", "cudnn", "math"}));
  cmd->add_option("--cpu-isa", cpu_isa,
                  "cpu profile: the machine's ISA, avx2 (default: bf16 convolutions through ATen's im2col "
                  "slow_conv2d), avx512 (AVX-512 BW/VL/DQ: through oneDNN) or amx (AMX-BF16: as avx512, and "
                  "2.x's oneDNN 3.x runs bf16 GEMMs on AMX, with their scratchpads)")
      ->check(CLI::IsMember({"avx2", "avx512", "amx"}));
  cmd->add_option("--dispatch-mode", dispatch_mode,
                  "on: the step runs under a TorchDispatchMode (a logging or checking mode): every tensor counts as "
                  "a subclass, so autograd sums multi-consumer grads out of place (default off: what a training "
                  "script runs; Note [InputBuffer])")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--dtype", dtype,
                  "model.half() / model.bfloat16(): parameters, buffers and inputs in fp16 or bf16 (default fp32)")
      ->delimiter(',')
      ->transform(CLI::CheckedTransformer(TorchDtypeNames({"fp32", "fp16", "bf16"}), CLI::ignore_case));
  cmd->add_option("--steps", num_steps, "N consecutive training steps, allocator state carried across (default 1)");
  cmd->add_option("--loop-holds", loop_holds,
                  "output: the loop's `out, loss` stay alive until the next forward rebinds them; step: until the "
                  "step ends (a train_step() function's locals, dropped after optimizer.step() and zero_grad()); "
                  "none: `del out, loss` after backward (default); loss: the loop names the loss alone "
                  "(`loss = loss_fn(model(x), y)`, torchtitan's `del pred`): the output dies after its last use")
      ->check(CLI::IsMember({"output", "step", "none", "loss"}));
  cmd->add_option("--zero-grad", zero_grad,
                  "after optimizer.step(): set-to-none (default, frees .grad), zeros (zero_grad(set_to_none=False)) "
                  "or none (no zero_grad: grads accumulate)")
      ->check(CLI::IsMember({"none", "zeros", "set-to-none"}));
  cmd->add_option("--grad-scaler", grad_scaler,
                  "torch.amp.GradScaler: scale(loss).backward(), step(), update() (default: on with --amp fp16)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--gpu", gpu, "device whose memory is the capacity (V100-16GB, A100-80GB, ...)");
  cmd->add_option("--capacity", capacity,
                  "device capacity: bytes, or with a unit (24GB, 80GiB; GB = 10^9 bytes, GiB = 2^30) (overrides --gpu)");
  cmd->add_option("--conv-workspace", conv_workspace,
                  "cuDNN workspace bytes per convolution call (same as --cudnn-workspace BYTES)");
  cmd->add_option("--cudnn-workspace", cudnn_workspace,
                  "cuDNN convolution workspaces: none, typical (default: what cuDNN's heuristics pick on the "
                  "GPU's generation), max (a safe upper bound) or BYTES per call");
  cmd->add_flag("--cudnn-benchmark", cudnn_benchmark,
                "torch.backends.cudnn.benchmark: in the first step each convolution call first tries every "
                "algorithm in one trial workspace (the max policy's size)");
  cmd->add_option("--context-bytes", context_bytes,
                  "CUDA context and library memory outside the caching allocator, in bytes (replaces the "
                  "per-architecture table; cuda profile)");
  cmd->add_option("--cublas-workspace", cublas_workspace,
                  "cuBLAS workspace bytes (cuda profile; default 8519680, 32 MiB with --gpu H100)");
  cmd->add_option("--ddp", ddp, "DistributedDataParallel over WORLD ranks (--batch is per rank); every rank "
                                "is simulated");
  cmd->add_option("--world", world, lists ? "world sizes (ranks) for --zero: --world 2,4,8" : "ranks for --zero")
      ->delimiter(',');
  cmd->add_option("--zero", zero,
                  "ZeRO stage 1 (optimizer state partitioned) or 2 (+ gradients); cpu profile: 1 = PyTorch's "
                  "ZeroRedundancyOptimizer under DDP, cuda: DeepSpeed")
      ->delimiter(',');
  cmd->add_option("--zero-bucket-size", zero_bucket_size,
                  "DeepSpeed ZeRO reduce_bucket_size: elements of each ipg gradient buffer (default 500000000, "
                  "whatever the model's size)");
  cmd->add_option("--zero-overlap-comm", zero_overlap_comm,
                  "DeepSpeed ZeRO overlap_comm: on gives stage 2 a second ipg buffer (default: DeepSpeed's, on for "
                  "stage 3 only, where it adds none)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--zero-persistence-threshold", zero_persistence_threshold,
                  "DeepSpeed ZeRO-3 stage3_param_persistence_threshold: parameters of at most this many elements "
                  "stay whole on every rank (default 100000)");
  cmd->add_option("--bucket-cap-mb", bucket_cap_mb, "DDP bucket_cap_mb (default 25; the first bucket is 1 MiB)");
  cmd->add_flag("--gradient-as-bucket-view", gradient_as_bucket_view,
                "DDP gradient_as_bucket_view=True: .grad is a view into its all-reduce bucket");
  cmd->add_option("--fsdp", fsdp, "FullyShardedDataParallel over --world N ranks: full (FULL_SHARD) or grad-op "
                                  "(SHARD_GRAD_OP)")
      ->check(CLI::IsMember({"full", "grad-op"}));
  cmd->add_option("--wrap", wrap, "FSDP: wrap the modules whose path matches this glob (repeatable; the root "
                                  "unit holds the rest)");
  cmd->add_option("--offload", offload, "with --zero (DeepSpeed), --fsdp or --mesh dp_shard=N: optimizer "
                                        "(ZeRO-Offload) or params (ZeRO-Infinity with --zero 3; FSDP CPUOffload; FSDP2 "
                                        "CPUOffloadPolicy): host memory instead")
      ->check(CLI::IsMember({"optimizer", "params"}));
  cmd->add_option("--fsdp-mixed-precision", fsdp_mixed_precision,
                  "with --fsdp on an fp32 model: MixedPrecision(param_dtype, reduce_dtype, buffer_dtype) all fp16 "
                  "or bf16: units gathered and computed in that dtype, shards, sharded grads and optimizer fp32")
      ->check(CLI::IsMember({"fp16", "bf16"}));
  cmd->add_option("--lora", lora,
                  "PEFT LoRA fine-tuning: r=R,alpha=A,targets=NAME[,NAME...][,dropout=P][,rslora=on]; adapters on the "
                  "Linear modules a target selects (a name matches a module path's end, a glob the whole path), the "
                  "base model frozen (Note [LoRA])");
  cmd->add_option("--quantize-base", quantize_base,
                  "bitsandbytes quantized frozen base weights (QLoRA's Linear4bit, LLM.int8's Linear8bitLt): "
                  "nf4|fp4|int8[,double_quant=on|off][,compute=fp32|bf16|fp16][,targets=NAME,...][,skip=NAME,...]; "
                  "every Linear but lm_head by default (Note [Quantized base weights])");
  cmd->add_option("--memory-budget", memory_budget,
                  "torch.compile: run the compiled regions' partitioner program for activation_memory_budget F, "
                  "one of those the export recorded (export_torch.py --compile --memory-budget 1,0.5,0)");
  cmd->add_option("--compile", compile,
                  "torch.compile on a graph exported with --compile: on runs its compiled regions (the default), off "
                  "the eager ops the export kept beside them (Note [Compiled regions])")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--fp8", fp8,
                  "torchao float8 training: tensorwise|rowwise[,fsdp_float8_all_gather][,targets=GLOB[,GLOB...]]; "
                  "Float8Linear on the Linear modules a glob selects (default: those with in and out features "
                  "multiples of 16); fsdp_float8_all_gather: FSDP2 (--mesh dp_shard=N) all-gathers the weights in "
                  "float8 (Note [FP8 training]); te[,amax_history=N][,targets=...]: Transformer Engine 1.x te.Linear "
                  "under fp8_autocast, modelled from its source, CUDA only (Note [Transformer Engine])");
  cmd->add_option("--data-parallel", data_parallel,
                  "nn.DataParallel over N devices: --batch is the whole batch, scattered; device 0 holds the "
                  "model, optimizer, gathered outputs and loss; every distinct device is reported");
  cmd->add_option("--config", config_file,
                  "a training config users already have: DeepSpeed or TrainingArguments .json, accelerate .yaml, "
                  "torchtitan .toml; read as the options it means, the command line's own options winning, every "
                  "key it ignores named (Note [Config files])");
  cmd->add_option("--mesh", mesh,
                  "the N-D device mesh of LLM parallelism: NAME=DEGREE,... with NAME pp, dp_replicate, dp_shard, cp, "
                  "tp, ep (torchtitan's ParallelDims; Note [Device mesh])");
  cmd->add_option("--reshard-after-forward", reshard_after_forward,
                  "with --mesh dp_shard=N: fully_shard(reshard_after_forward=...): true frees each unit's gathered "
                  "parameters after its forward (all-gathered again in backward), false keeps them, an integer K (a "
                  "divisor of the shard ranks) keeps a 1/K slice, all-gathered over K ranks in backward (Note [FSDP2])");
  cmd->add_option("--init", init,
                  "with tp or dp_shard in --mesh: where the model is built; device (default): whole on the device, "
                  "then sharded; meta: on the meta device, parallelized, then only the rank's shards materialized "
                  "(to_empty + init_weights, as torchtitan does; Note [Meta-device init])")
      ->check(CLI::IsMember({"device", "meta"}));
  cmd->add_option("--fsdp2-mp", fsdp2_mp,
                  "with --mesh dp_shard=N: MixedPrecisionPolicy as param=fp16|bf16[,reduce=fp32|fp16|bf16]: units "
                  "gathered and computed in param, grads reduce-scattered in reduce (default param), shards fp32");
  cmd->add_option("--tp-plan", tp_plan,
                  "with tp in --mesh: the parallelize_module plan; layers = the decoder layers' attention q/k/v "
                  "ColwiseParallel, o RowwiseParallel, MLP gate/up ColwiseParallel, down RowwiseParallel; "
                  "torchtitan = those and the embedding RowwiseParallel, the output head ColwiseParallel with "
                  "replicated logits, as torchtitan's parallelize_llama (Note [Tensor parallel])")
      ->check(CLI::IsMember({"layers", "torchtitan"}));
  cmd->add_option("--sequence-parallel", sequence_parallel,
                  "with tp in --mesh and --tp-plan torchtitan: SequenceParallel norms, sequence-sharded residual "
                  "stream, all-gather before and reduce-scatter after each block (Note [Tensor parallel])")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--loss-parallel", loss_parallel,
                  "with tp in --mesh and --tp-plan torchtitan: the loss inside loss_parallel(), the head's logits "
                  "kept sharded on the vocabulary (torchtitan's default with TP; Note [Tensor parallel])")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--pp-schedule", pp_schedule,
                  "with pp in --mesh: the torch.distributed.pipelining schedule, gpipe, 1f1b (default), "
                  "interleaved1f1b, interleavedzerobubble, zbvzerobubble (zbv) or dualpipev; loopedbfs is refused "
                  "(Note [Pipeline parallel])");
  cmd->add_option("--microbatches", microbatches,
                  "with pp in --mesh: microbatches per step (--batch is the whole batch; default: the stages)");
  cmd->add_option("--pp-split", pp_split,
                  "with pp in --mesh: repeated blocks per stage, N,N,... (default: torchtitan's split, the "
                  "embedding and the norm+head each weighing one block)");
  cmd->add_option("--pp-stages-per-rank", pp_stages_per_rank,
                  "with pp in --mesh: stages per rank (the multi-stage schedules: default 2, loop-style, V-style for "
                  "zbvzerobubble and dualpipev; gpipe, 1f1b: 1)");
}

Result<Graph> ConfigOptions::Adapt(Graph g) const {
  if (compile == "off" && !memory_budget.empty())
    return Status::InvalidArgument("--memory-budget selects a compiled program: give it without --compile off");
  if (!compile.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(g, SelectCompile(std::move(g), compile == "on"));
  }
  if (!memory_budget.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(g, SelectMemoryBudget(std::move(g), memory_budget));
  }
  if (!mesh.empty()) {  // the rank's shards (Note [Tensor parallel]); ApplyMesh checks the rest
    MEMSIM_ASSIGN_OR_RETURN(MeshDims dims, ParseMesh("--mesh", mesh));
    if (EpWithUnsupported(dims)) return g;  // ApplyMesh refuses it
    if (dims.tp > 1) {
      MEMSIM_ASSIGN_OR_RETURN(g, ApplyTensorParallel(g, {dims.tp, tp_plan, sequence_parallel == "on", loss_parallel == "on"}));
    }
    if (dims.ep > 1) {  // Note [Expert parallel]
      MEMSIM_ASSIGN_OR_RETURN(g, ApplyExpertParallel(g, dims.ep));
      MEMSIM_RETURN_IF_ERROR(CheckExpertShards(g, dims));
    }
  }
  if (!fp8.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(Fp8Config f, ParseFp8Spec(fp8));
    if (f.fsdp_float8_all_gather) {  // the float8 all-gather is FSDP2's (Note [FP8 training])
      MeshDims dims;
      if (!mesh.empty()) {
        MEMSIM_ASSIGN_OR_RETURN(dims, ParseMesh("--mesh", mesh));
      }
      if (dims.dp_shard <= 1)
        return Status::InvalidArgument("--fp8 " + fp8 + ": fsdp_float8_all_gather is FSDP2's float8 all-gather; "
                                       "give --mesh dp_shard=N (N > 1) or drop it");
    }
    MEMSIM_ASSIGN_OR_RETURN(g, ApplyFp8(g, f));
  }
  if (!lora.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(LoraConfig c, ParseLoraSpec(lora));
    MEMSIM_ASSIGN_OR_RETURN(g, ApplyLora(g, c));
  }
  if (quantize_base.empty()) return g;
  // After the adapters, as peft wraps the bnb layers: the base layers are quantized, never the adapters.
  MEMSIM_ASSIGN_OR_RETURN(QuantizedBaseConfig q, ParseQuantizedBaseSpec(quantize_base));
  return ApplyQuantizedBase(g, q);
}

// Note [Numeric options]: every integer option is checked here, once, against one range: byte
// counts at most 2^50 (kMaxTensorBytes), counts (ranks, passes, list items) at most 10^6, symbol
// values at most 2^40; the parser already refused text beyond 64 bits (GuardIntegerText).
Status ConfigOptions::CheckNumbers() const {
  constexpr int64_t kBytes = kMaxTensorBytes, kCount = kMaxOptionCount, kSymbol = int64_t{1} << 40;
  struct Rule {
    const char* option;
    std::vector<int64_t> values;
    int64_t lo, hi;
    const char* expected;  ///< the range in words
  };
  const Rule rules[] = {
      {"--batch", batches, 1, kSymbol, "1 to 2^40 samples"},
      {"--accumulate", accumulate, 1, kCount, "1 to 1000000"},
      {"--world", world, 1, kCount, "1 to 1000000"},
      {"--zero", zero, 0, 3, "1, 2 or 3"},
      {"--freeze-params", freeze_params, 0, kCount, "0 to 1000000 parameter tensors"},
      {"--steps", {num_steps}, 1, 1000, "1 to 1000"},
      {"--ddp", {ddp}, 0, kCount, "1 to 1000000"},
      {"--data-parallel", {data_parallel}, 0, kCount, "1 to 1000000"},
      {"--min-8bit-size", {min_8bit_size}, 0, kBytes, "0 to 2^50 elements (bitsandbytes' default is 4096)"},
      {"--zero-bucket-size", {zero_bucket_size}, 1, kSymbol, "1 to 2^40 elements"},
      {"--zero-persistence-threshold", {zero_persistence_threshold}, 0, kSymbol, "0 to 2^40 elements"},
      {"--conv-workspace", {conv_workspace.value_or(0)}, 0, kBytes, "0 to 2^50 bytes (1 PiB)"},
      {"--cublas-workspace", {cublas_workspace.value_or(0)}, 0, kBytes, "0 to 2^50 bytes (1 PiB)"},
      {"--context-bytes", {context_bytes.value_or(0)}, 0, kBytes, "0 to 2^50 bytes (1 PiB)"},
  };
  for (const Rule& r : rules) {
    if (r.values.size() > static_cast<size_t>(kCount))
      return Status::InvalidArgument(std::string(r.option) + ": more than 1000000 values");
    for (int64_t v : r.values)
      if (v < r.lo || v > r.hi)
        return Status::InvalidArgument(std::string(r.option) + " " + std::to_string(v) + ": expected " + r.expected);
  }
  return Status::OK();
}

Result<SweepSpec> ConfigOptions::Spec(const std::string& command) const {
  MEMSIM_RETURN_IF_ERROR(CheckNumbers());
  SweepSpec spec;
  RunConfig& base = spec.base;
  base.sim.freeze_globs = freeze;
  if (!(clip_grad_norm >= 0)) return Status::InvalidArgument("--clip-grad-norm must be non-negative");
  base.sim.clip_grad_norm = clip_grad_norm;
  base.sim.min_8bit_size = min_8bit_size;
  base.sim.checkpoint_globs = checkpoint;
  base.sim.checkpoint_impl = checkpoint_impl;
  if (!checkpoint_early_stop.empty()) base.sim.checkpoint_early_stop = checkpoint_early_stop == "on";
  base.sim.sac = sac;
  base.sim.save_on_cpu = save_on_cpu;
  base.sim.offload_activations = offload_activations;
  base.sim.moe_routing = moe_routing;
  base.sim.optimizer_in_backward = optimizer_in_backward == "on";
  base.sim.grad_scaler = grad_scaler;
  base.sim.amp_loss = amp_loss;
  base.sim.cpu_isa = cpu_isa;
  base.sim.sdpa_backend = sdpa_backend;
  base.sim.dispatch_mode = dispatch_mode == "on";
  base.sim.steps = num_steps;
  base.sim.loop_holds = loop_holds;
  base.sim.zero_grad = zero_grad;
  int64_t capacity_bytes = 0;
  if (!capacity.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(capacity_bytes, ParseBytesOption("--capacity", capacity, kMaxTensorBytes));
  }
  base.alloc.capacity_bytes = capacity_bytes;
  if (conv_workspace) base.sim.conv_workspace_bytes = *conv_workspace;
  if (!cudnn_workspace.empty()) {
    MEMSIM_ASSIGN_OR_RETURN(CudnnWorkspaceChoice ws, ParseCudnnWorkspace(cudnn_workspace));
    base.sim.conv_workspace_policy = ws.policy;
    if (ws.policy == ConvWorkspacePolicy::kFixed) base.sim.conv_workspace_bytes = ws.bytes;
  }
  base.device.context_bytes = context_bytes;
  base.sim.cudnn_benchmark = cudnn_benchmark;
  if (cublas_workspace) base.sim.cublas_workspace_bytes = *cublas_workspace;
  if (!gpu.empty()) MEMSIM_RETURN_IF_ERROR(ApplyGpu(gpu, &base, /*keep_capacity=*/capacity_bytes > 0));
  if (!(bucket_cap_mb > 0) || bucket_cap_mb > 1e9)
    return Status::InvalidArgument("--bucket-cap-mb must be positive (at most 1e9)");
  base.sim.parallel.ddp = ddp > 0;
  base.sim.parallel.world = ddp > 0 ? static_cast<int>(ddp) : 1;
  base.sim.parallel.bucket_cap_mb = bucket_cap_mb;
  const ParallelOptions defaults;
  const bool zero_knobs = zero_bucket_size != defaults.zero_bucket_elements || !zero_overlap_comm.empty() ||
                          zero_persistence_threshold != defaults.zero_persistence_threshold;
  if (zero_knobs && zero.empty())
    return Status::InvalidArgument("--zero-bucket-size, --zero-overlap-comm and --zero-persistence-threshold are "
                                   "DeepSpeed ZeRO's: give --zero 1|2|3");
  base.sim.parallel.zero_bucket_elements = zero_bucket_size;
  if (!zero_overlap_comm.empty()) base.sim.parallel.zero_overlap_comm = zero_overlap_comm == "on";
  base.sim.parallel.zero_persistence_threshold = zero_persistence_threshold;
  base.sim.parallel.gradient_as_bucket_view = gradient_as_bucket_view;
  base.sim.parallel.fsdp = fsdp;
  base.sim.parallel.wrap_modules = wrap;
  base.sim.parallel.offload = offload;
  if (data_parallel > 0) {
    if (ddp > 0) return Status::InvalidArgument("--data-parallel cannot be combined with --ddp");
    base.sim.parallel.data_parallel = true;
    base.sim.parallel.world = static_cast<int>(data_parallel);
  }
  MEMSIM_RETURN_IF_ERROR(ApplyMesh(&base.sim.parallel));
  MEMSIM_RETURN_IF_ERROR(ApplyFsdp2(&base.sim));
  if (init == "meta") {  // Note [Meta-device init]: what materializes the shards is FSDP2's or TP's setup
    const MeshDims& m = base.sim.parallel.mesh;
    if (m.dp_shard <= 1 && m.tp <= 1)
      return Status::InvalidArgument("--init meta needs tp=N or dp_shard=N in --mesh (a model that is not sharded "
                                     "is the same whole on the device)");
    base.sim.parallel.meta_init = true;
  }
  MEMSIM_RETURN_IF_ERROR(ApplyPipeline(&base.sim.parallel));
  MEMSIM_RETURN_IF_ERROR(CheckMixedPrecision());
  if (!fsdp_mixed_precision.empty()) {  // the model computes in that dtype; the shards stay fp32
    base.sim.parallel.fsdp_mixed_precision = fsdp_mixed_precision;
    base.sim.dtype = fsdp_mixed_precision;
  }
  if ((!zero.empty() || !fsdp.empty()) && world.empty() && ddp == 0)
    return Status::InvalidArgument(std::string(fsdp.empty() ? "--zero" : "--fsdp") + " needs --world N");
  // advise reads --world alone as the ranks its sharding remedies may use.
  if (!world.empty() && zero.empty() && fsdp.empty() && ddp == 0 && command != "advise")
    return Status::InvalidArgument("--world " + std::to_string(world[0]) + " alone changes nothing: it is the ranks "
                                   "of --zero or --fsdp (DDP: --ddp N)");
  std::vector<SweepAxis>& axes = spec.axes;
  if (!batches.empty()) axes.push_back(SymbolAxis("batch", batches));
  for (const std::string& s : sets) {
    MEMSIM_ASSIGN_OR_RETURN(auto set, ParseSet(s));
    axes.push_back(SymbolAxis(set.first, set.second));
  }
  if (!accumulate.empty())
    axes.push_back(IntAxis("accumulate", accumulate, [](int64_t v, RunConfig* c) { c->sim.accumulate = static_cast<int>(v); }));
  if (ddp > 0 && !world.empty() && (world.size() != 1 || world[0] != ddp))
    return Status::InvalidArgument("--world " + std::to_string(world[0]) + " differs from --ddp " + std::to_string(ddp));
  if (!world.empty())
    axes.push_back(IntAxis("world", world, [](int64_t v, RunConfig* c) { c->sim.parallel.world = static_cast<int>(v); }));
  if (!zero.empty())
    axes.push_back(IntAxis("zero", zero, [](int64_t v, RunConfig* c) { c->sim.parallel.zero_stage = static_cast<int>(v); }));
  if (!foreach_impl.empty())
    axes.push_back(StringAxis("foreach", foreach_impl, [](const std::string& v, RunConfig* c) { c->sim.optimizer_impl = v; }));
  if (!dtype.empty())
    axes.push_back(StringAxis("dtype", dtype, [](const std::string& v, RunConfig* c) { c->sim.dtype = v; }));
  if (!amp.empty())
    axes.push_back(StringAxis("amp", amp, [](const std::string& v, RunConfig* c) { c->sim.amp = v == "off" ? "" : v; }));
  axes.push_back(StringAxis("optimizer", optimizers, [](const std::string& v, RunConfig* c) { c->sim.optimizer = v; }));
  axes.push_back(StringAxis("step", steps, [](const std::string& v, RunConfig* c) { c->sim.first_step = v == "first"; }));
  axes.push_back(StringAxis("profile", profiles, [](const std::string& v, RunConfig* c) { c->sim.profile = v; }));
  axes.push_back(StringAxis("torch", torch, [](const std::string& v, RunConfig* c) { c->sim.torch = v; }));
  axes.push_back(StringAxis("inplace", inplace, [](const std::string& v, RunConfig* c) {
    if (v != "keep") c->sim.inplace = v == "on";
  }));
  axes.push_back(IntAxis("freeze_params", freeze_params, [](int64_t v, RunConfig* c) { c->sim.freeze_params = v; }));
  for (const std::string& a : allocators) MEMSIM_RETURN_IF_ERROR(ParseAllocatorModel(a).status());
  axes.push_back(StringAxis("allocator", allocators,
                            [](const std::string& v, RunConfig* c) { c->alloc.model = *ParseAllocatorModel(v); }));
  axes.push_back(StringAxis("alloc_conf", alloc_confs, [](const std::string& v, RunConfig* c) { c->alloc.alloc_conf = v; }));
  return spec;
}

// Note [ZeRO mixed precision], Note [FSDP mixed precision]: which precision options combine.
Status ConfigOptions::CheckMixedPrecision() const {
  auto low = [](const std::vector<std::string>& v) {
    return std::any_of(v.begin(), v.end(), [](const std::string& d) { return d == "fp16" || d == "bf16"; });
  };
  if (!fsdp_mixed_precision.empty()) {
    if (fsdp.empty()) return Status::InvalidArgument("--fsdp-mixed-precision needs --fsdp");
    if (!dtype.empty())
      return Status::InvalidArgument("--fsdp-mixed-precision casts an fp32 model's gathered units: drop --dtype "
                                     "(--dtype converts the whole model, shards included)");
  }
  const bool deepspeed = std::any_of(zero.begin(), zero.end(), [](int64_t z) { return z > 0; });
  if (deepspeed && low(dtype) && low(amp))
    return Status::InvalidArgument("--zero with --dtype fp16|bf16 is DeepSpeed's fp16/bf16 mode (module converted, fp32 "
                                   "master partition); it does not combine with --amp (torch.autocast)");
  return Status::OK();
}

// Note [Device mesh]: --mesh composes the parallel dimensions; each one is lifted from the list
// below when its setup lands (issue 27).
Status ConfigOptions::ApplyMesh(ParallelOptions* parallel) const {
  if ((tp_plan != "layers" || sequence_parallel == "on" || loss_parallel == "on") && mesh.find("tp=") == std::string::npos)
    return Status::InvalidArgument("--tp-plan, --sequence-parallel and --loss-parallel need tp=N in --mesh");
  if (mesh.empty()) return Status::OK();
  MEMSIM_ASSIGN_OR_RETURN(MeshDims dims, ParseMesh("--mesh", mesh));
  if (ddp > 0 || !zero.empty() || !fsdp.empty() || data_parallel > 0 || !world.empty())
    return Status::InvalidArgument("--mesh replaces --ddp, --zero, --fsdp, --data-parallel and --world: give the "
                                   "data-parallel degree as dp_replicate=N (DDP) or dp_shard=N (FSDP2)");
  // HSDP (dp_replicate × dp_shard) is FSDP2 on a 2-D mesh; replicas alone are not simulated yet.
  const std::pair<int, const char*> pending[] = {
      {dims.dp_shard > 1 ? 1 : dims.dp_replicate, "dp_replicate without dp_shard (replicate)"},
      // pp × [dp_replicate ×] dp_shard × tp (FSDP2 or HSDP and TP on each stage, Notes [FSDP2],
      // [Pipeline parallel]), with ep borrowing dp_shard; pp with cp is not simulated yet
      {dims.pp > 1 && dims.cp > 1 ? 2 : 1, "pp with cp"},
      {dims.cp > 1 && (dims.tp > 1 || dims.pp > 1 || dims.dp_replicate > 1) ? 2 : 1, "cp with tp, pp or dp_replicate"},
      {EpWithUnsupported(dims) ? 2 : 1, "ep with tp or cp (or pp without dp_shard)"}};
  for (const auto& [degree, what] : pending)
    if (degree > 1)
      return Status::Unsupported("--mesh " + mesh + ": " + what + " is not simulated yet; data parallelism is "
                                 "--ddp N, --zero 1|2|3 or --fsdp full|grad-op with --world N");
  parallel->mesh = dims;
  parallel->world = static_cast<int>(dims.world());
  return Status::OK();
}

// Note [FSDP2]: reshard_after_forward true, false or an int, as _get_post_forward_mesh_info reads
// it: an int must divide the shard ranks; 1 means false and the shard ranks mean true.
Status ConfigOptions::ApplyReshardAfterForward(ParallelOptions* parallel) const {
  parallel->fsdp2_reshard_after_forward = reshard_after_forward != "false";
  parallel->fsdp2_post_forward_world = 0;
  if (reshard_after_forward.empty() || reshard_after_forward == "true" || reshard_after_forward == "false")
    return Status::OK();
  const MeshDims& m = parallel->mesh;
  const int64_t world = int64_t{m.dp_shard} * m.cp;
  const std::string usage = "--reshard-after-forward \"" + reshard_after_forward + "\": expected true, false or a divisor of " +
                            "the shard ranks dp_shard*cp = " + std::to_string(world);
  if (reshard_after_forward.size() > 7 || reshard_after_forward.find_first_not_of("0123456789") != std::string::npos)
    return Status::InvalidArgument(usage);
  const int64_t k = std::stoll(reshard_after_forward);
  if (k < 1 || k > world || world % k != 0) return Status::InvalidArgument(usage);
  // FSDPParam.to_sharded_post_forward refuses DTensor parameters (TP's, EP's); pp and HSDP are not
  // simulated with it.
  if (k > 1 && k < world && (m.tp > 1 || m.ep > 1 || m.pp > 1 || m.dp_replicate > 1))
    return Status::Unsupported("--reshard-after-forward " + reshard_after_forward + " with tp, ep, pp or dp_replicate in "
                               "--mesh is not simulated yet (torch refuses the int for DTensor parameters: tp, ep)");
  parallel->fsdp2_reshard_after_forward = k > 1;
  if (k > 1 && k < world) parallel->fsdp2_post_forward_world = static_cast<int>(k);
  return Status::OK();
}

// Note [Pipeline parallel]: --mesh pp=N runs one stage per rank under a schedule.
Status ConfigOptions::ApplyPipeline(ParallelOptions* parallel) const {
  const int stages = parallel->mesh.pp;
  if (stages <= 1) {
    if (!pp_schedule.empty() || microbatches != 0 || !pp_split.empty() || pp_stages_per_rank != 0)
      return Status::InvalidArgument("--pp-schedule, --microbatches, --pp-split and --pp-stages-per-rank need pp=N in --mesh");
    return Status::OK();
  }
  const std::string schedule = pp_schedule.empty() ? "1f1b" : pp_schedule;
  const std::optional<PpSchedule> parsed = ParsePpSchedule(schedule);
  if (!parsed) {
    if (schedule == "loopedbfs")
      return Status::Unsupported("--pp-schedule loopedbfs is not simulated yet (its action lists are not transcribed)");
    return Status::InvalidArgument("--pp-schedule \"" + schedule + "\": expected gpipe, 1f1b, interleaved1f1b, "
                                   "interleavedzerobubble, zbvzerobubble or dualpipev");
  }
  // torchtitan: the multi-stage schedules default to 2 stages per rank, the others run 1.
  const bool multi = MultiStage(*parsed).has_value();
  const int per_rank = pp_stages_per_rank == 0 ? (multi ? 2 : 1) : pp_stages_per_rank;
  if (!multi && per_rank != 1)
    return Status::InvalidArgument("--pp-stages-per-rank " + std::to_string(per_rank) + ": --pp-schedule " + schedule +
                                   " runs one stage per rank; several need a multi-stage schedule (interleaved1f1b, "
                                   "interleavedzerobubble, zbvzerobubble, dualpipev)");
  if (per_rank < 1 || per_rank > 64)
    return Status::InvalidArgument("--pp-stages-per-rank " + std::to_string(per_rank) + ": expected 1 to 64");
  parallel->pp_stages_per_rank = per_rank;
  if (microbatches < 0 || microbatches > 1'000'000)
    return Status::InvalidArgument("--microbatches " + std::to_string(microbatches) + ": expected 1 to 1000000");
  parallel->pp_schedule = schedule;
  parallel->pp_microbatches = microbatches == 0 ? stages : microbatches;
  parallel->pp_split.clear();
  for (size_t start = 0; !pp_split.empty() && start <= pp_split.size();) {
    size_t comma = pp_split.find(',', start);
    if (comma == std::string::npos) comma = pp_split.size();
    const std::string item = pp_split.substr(start, comma - start);
    start = comma + 1;
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos)
      return Status::InvalidArgument("--pp-split \"" + pp_split + "\": expected block counts N,N,... (one per stage)");
    parallel->pp_split.push_back(std::stoi(item));
  }
  if (!parallel->pp_split.empty() && static_cast<int>(parallel->pp_split.size()) != stages * per_rank)
    return Status::InvalidArgument("--pp-split \"" + pp_split + "\": expected " + std::to_string(stages * per_rank) +
                                   " block counts, one per stage");
  return Status::OK();
}

// Note [FSDP2]: --mesh dp_shard=N is fully_shard on the --wrap modules, then the root.
Status ConfigOptions::ApplyFsdp2(SimOptions* sim) const {
  const bool on = sim->parallel.mesh.dp_shard > 1;
  if (!on && (!reshard_after_forward.empty() || !fsdp2_mp.empty()))
    return Status::InvalidArgument(std::string(reshard_after_forward.empty() ? "--fsdp2-mp" : "--reshard-after-forward") +
                                   " needs --mesh dp_shard=N (FSDP2)");
  if (!on) return Status::OK();
  const MeshDims& m = sim->parallel.mesh;
  // With pp: fully_shard on each stage inside every schedule (the multi-stage ones with their
  // UNSHARD / RESHARD actions). The split backward (I / W) runs FSDP2's hooks in the input pass
  // only. With reshard_after_forward a recorded 2.13 ZBV step computes no grads for some
  // parameters (Note [Pipeline parallel]): refused, as memsim would model a step torch does not take.
  const std::optional<PpMulti> multi = MultiStage(ParsePpSchedule(pp_schedule).value_or(PpSchedule::k1F1B));
  if (m.pp > 1 && multi && *multi != PpMulti::kInterleaved1F1B && reshard_after_forward != "false")
    return Status::Unsupported("--mesh " + mesh + ": FSDP2 (dp_shard) with --pp-schedule " + pp_schedule +
                               " and reshard_after_forward is not simulated: in torch 2.13 its split backward leaves "
                               "some parameters without grads; give --reshard-after-forward false (torchtitan's "
                               "default with pipeline parallelism)");
  // --offload params: CPUOffloadPolicy (Note [FSDP2]); with pp or ep it is not simulated yet.
  if (!offload.empty() && (m.pp > 1 || m.ep > 1))
    return Status::Unsupported("--offload with pp or ep in --mesh " + mesh + " is not simulated yet");
  MEMSIM_RETURN_IF_ERROR(ApplyReshardAfterForward(&sim->parallel));
  if (fsdp2_mp.empty()) return Status::OK();
  if (!dtype.empty() || !amp.empty())
    return Status::InvalidArgument("--fsdp2-mp casts an fp32 model's gathered parameters: drop --dtype and --amp");
  for (size_t start = 0; start <= fsdp2_mp.size();) {
    size_t comma = fsdp2_mp.find(',', start);
    if (comma == std::string::npos) comma = fsdp2_mp.size();
    const std::string item = fsdp2_mp.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if ((key != "param" && key != "reduce") || (value != "fp32" && value != "fp16" && value != "bf16"))
      return Status::InvalidArgument("--fsdp2-mp \"" + item + "\": expected param=fp16|bf16 and reduce=fp32|fp16|bf16");
    (key == "param" ? sim->parallel.fsdp2_param_dtype : sim->parallel.fsdp2_reduce_dtype) = value;
  }
  if (sim->parallel.fsdp2_param_dtype.empty() || sim->parallel.fsdp2_param_dtype == "fp32")
    return Status::InvalidArgument("--fsdp2-mp " + fsdp2_mp + ": give param=fp16|bf16");
  sim->dtype = sim->parallel.fsdp2_param_dtype;  // the model computes in it; the shards stay fp32
  return Status::OK();
}

Result<RunConfig> ConfigOptions::Single(const std::string& command) const {
  MEMSIM_ASSIGN_OR_RETURN(SweepSpec spec, Spec(command));
  for (const SweepAxis& ax : spec.axes)
    if (ax.labels.size() != 1)
      return Status::InvalidArgument(command + " takes one value per option (\"" + ax.name + "\" has several)");
  return spec.Config(0);
}

}  // namespace memsim::cli
