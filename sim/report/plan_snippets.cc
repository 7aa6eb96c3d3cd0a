// The chosen plan as code (PlanSnippet, sim/report/plan_report.h): the calls that set up what
// memsim simulated for it, in each framework's own terms.
#include <string>

#include "sim/report/plan_report.h"

namespace memsim {
namespace {

bool IsFsdp(Sharding s) { return s == Sharding::kFsdp || s == Sharding::kFsdpGradOp || s == Sharding::kFsdpOffload; }
int ZeroStage(Sharding s) {
  switch (s) {
    case Sharding::kZero1: return 1;
    case Sharding::kZero2: return 2;
    case Sharding::kZero3: case Sharding::kZero3Offload: return 3;
    default: return 0;
  }
}

/// "model.layers" for blocks "model.layers.0" ... (the ModuleList the blocks are in).
std::string BlocksParent(const PlanReport& r) {
  if (r.blocks.empty()) return "";
  const std::string& b = r.blocks.front();
  return b.substr(0, b.rfind('.'));
}

/// The torch.optim call of memsim's optimizer name.
std::string TorchOptimizer(const std::string& name) {
  if (name == "adamw") return "torch.optim.AdamW(model.parameters(), lr=3e-4)";
  if (name == "adam") return "torch.optim.Adam(model.parameters(), lr=3e-4)";
  if (name == "sgd") return "torch.optim.SGD(model.parameters(), lr=0.1)";
  if (name == "momentum") return "torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)";
  return "make_optimizer(model.parameters())  # memsim --optimizer " + name;
}

std::string Header(const PlanReport& r, const PlanRow& row, const char* comment) {
  return std::string(comment) + " memsim plan for " + r.result.model + " on " + std::to_string(r.result.gpus) + " x " +
         r.result.gpu + ": " + CandidateLabel(row.candidate) + "\n" + comment + " memory: " + RunCommandOf(r, row) + "\n";
}

/// The device mesh, tensor parallelism (torchtitan's apply_tp for the decoder layers) and FSDP2
/// fully_shard calls of a mesh plan, in the order torchtitan applies them.
std::string MeshCalls(const PlanCandidate& c, const std::string& parent) {
  std::string dims, names;
  auto add = [&](const std::string& name, int degree) {
    dims += (dims.empty() ? "" : ", ") + std::to_string(degree);
    names += (names.empty() ? "" : ", ") + ("\"" + name + "\"");
  };
  if (c.sharding == Sharding::kHsdp) add("dp_replicate", 2);
  if (IsMeshSharding(c.sharding)) add("dp_shard", c.sharding == Sharding::kHsdp ? c.world / 2 : c.world);
  if (c.tp > 1) add("tp", c.tp);
  std::string o = "\nfrom torch.distributed.device_mesh import init_device_mesh\n";
  o += "mesh = init_device_mesh(\"cuda\", (" + dims + (dims.find(',') == std::string::npos ? "," : "") +
       "), mesh_dim_names=(" + names + (names.find(',') == std::string::npos ? "," : "") + "))\n";
  if (c.tp > 1) {
    o += "from torch.distributed.tensor.parallel import parallelize_module, ColwiseParallel, RowwiseParallel\n";
    o += "for block in model." + parent + ":  # tp of the decoder layers (torchtitan's apply_tp)\n";
    o += "    parallelize_module(block, mesh[\"tp\"], {\n"
         "        \"self_attn.q_proj\": ColwiseParallel(), \"self_attn.k_proj\": ColwiseParallel(),\n"
         "        \"self_attn.v_proj\": ColwiseParallel(), \"self_attn.o_proj\": RowwiseParallel(),\n"
         "        \"mlp.gate_proj\": ColwiseParallel(), \"mlp.up_proj\": ColwiseParallel(), \"mlp.down_proj\": RowwiseParallel()})\n";
  }
  if (IsMeshSharding(c.sharding)) {
    const std::string dp = c.sharding == Sharding::kHsdp ? "mesh[\"dp_replicate\", \"dp_shard\"]" : "mesh[\"dp_shard\"]";
    o += "from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy\n";
    std::string kw = "mesh=" + dp;
    if (c.sharding == Sharding::kFsdp2NoReshard) kw += ", reshard_after_forward=False";
    if (c.precision == Precision::kBf16) kw += ", mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)";
    o += "for block in model." + parent + ":\n    fully_shard(block, " + kw + ")\nfully_shard(model, " + kw + ")\n";
  }
  return o;
}

std::string PyTorch(const PlanReport& r, const PlanRow& row) {
  const PlanCandidate& c = row.candidate;
  const std::string parent = BlocksParent(r);
  std::string o = Header(r, row, "#");
  o += "# torchrun --nproc_per_node " + std::to_string(c.world * c.tp) + " train.py\n";
  o += "import functools\nimport torch\nimport torch.distributed as dist\n";
  if (ZeroStage(c.sharding) > 0) {
    o += "import deepspeed  # ZeRO: the DeepSpeed JSON of `memsim plan --framework deepspeed`\n";
  }
  o += "from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, CheckpointPolicy\n\n";
  if (c.world * c.tp > 1) o += "dist.init_process_group(\"nccl\")\ntorch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())\n";
  o += "model = build_model().cuda()  # your model\n";
  if (c.precision == Precision::kBf16 && !IsFsdp(c.sharding) && !IsMeshSharding(c.sharding)) o += "model = model.bfloat16()\n";
  if (IsMeshSharding(c.sharding) || c.tp > 1) o += MeshCalls(c, parent);
  if (c.checkpoint.every > 0) {
    o += "\n# activation checkpointing of every " + std::string(c.checkpoint.every == 1 ? "" : std::to_string(c.checkpoint.every) + "-th ") +
         "block of model." + parent + (c.checkpoint.sac ? ", torchtitan's selective policy" : "") + "\n";
    if (c.checkpoint.sac)
      o += "def policy(ctx, op, *args, **kwargs):  # save mm (every other one) and attention outputs\n"
           "    if op == torch.ops.aten.mm.default:\n"
           "        ctx.mm = getattr(ctx, 'mm', 0) + 1\n"
           "        return CheckpointPolicy.MUST_SAVE if ctx.mm % 2 else CheckpointPolicy.PREFER_RECOMPUTE\n"
           "    if op in (torch.ops.aten._scaled_dot_product_flash_attention.default,\n"
           "              torch.ops.aten._scaled_dot_product_efficient_attention.default, torch.ops.aten.max.default):\n"
           "        return CheckpointPolicy.MUST_SAVE\n"
           "    return CheckpointPolicy.PREFER_RECOMPUTE\n";
    o += "for i, block in enumerate(model." + parent + "):\n    if i % " + std::to_string(c.checkpoint.every) + " == 0:\n";
    o += "        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False" +
         std::string(c.checkpoint.sac ? ",\n            context_fn=functools.partial(create_selective_checkpoint_contexts, policy)" : "") + ")\n";
  }
  o += "\n";
  if (IsFsdp(c.sharding)) {
    o += "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy, MixedPrecision, CPUOffload\n"
         "from torch.distributed.fsdp.wrap import ModuleWrapPolicy\n";
    o += "model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({type(model." + parent + "[0])}),\n";
    o += std::string("             sharding_strategy=ShardingStrategy.") + (c.sharding == Sharding::kFsdpGradOp ? "SHARD_GRAD_OP" : "FULL_SHARD");
    if (c.precision == Precision::kBf16) o += ",\n             mixed_precision=MixedPrecision(torch.bfloat16, torch.bfloat16, torch.bfloat16)";
    if (c.sharding == Sharding::kFsdpOffload) o += ",\n             cpu_offload=CPUOffload(offload_params=True)";
    o += ", device_id=torch.cuda.current_device())\n";
  } else if (ZeroStage(c.sharding) == 0 && c.world > 1 && !IsMeshSharding(c.sharding)) {
    o += "model = torch.nn.parallel.DistributedDataParallel(model)\n";
  }
  o += "optimizer = " + TorchOptimizer(r.result.optimizer) + "\n";
  if (ZeroStage(c.sharding) > 0)
    o += "model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=\"ds_config.json\")\n";
  const bool scaler = c.precision == Precision::kAmpFp16;
  if (scaler) o += "scaler = torch.amp.GradScaler()\n";
  o += "\nfor batches in loader:  # " + std::to_string(c.accumulate) + " micro-batches of " + std::to_string(c.micro_batch) +
       " samples per rank\n    for x, y in batches:\n";
  std::string fwd = "loss = loss_fn(model(x), y) / " + std::to_string(c.accumulate);
  if (c.precision == Precision::kAmpBf16 || c.precision == Precision::kAmpFp16)
    o += std::string("        with torch.autocast(\"cuda\", dtype=torch.") + (scaler ? "float16" : "bfloat16") + "):\n            " + fwd + "\n";
  else
    o += "        " + fwd + "\n";
  o += scaler ? "        scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n"
              : "        loss.backward()\n    optimizer.step()\n";
  o += "    optimizer.zero_grad(set_to_none=True)\n";
  return o;
}

std::string DeepSpeed(const PlanReport& r, const PlanRow& row) {
  const PlanCandidate& c = row.candidate;
  std::string o = "{\n  \"train_batch_size\": " + std::to_string(r.result.global_batch) +
                  ",\n  \"train_micro_batch_size_per_gpu\": " + std::to_string(c.micro_batch) +
                  ",\n  \"gradient_accumulation_steps\": " + std::to_string(c.accumulate) + ",\n";
  // --dtype bf16 with ZeRO is DeepSpeed's bf16 mode (fp32 master partition, Note [ZeRO mixed
  // precision]); --amp is torch.autocast around an fp32 model (DeepSpeed's torch_autocast section).
  const bool amp = c.precision == Precision::kAmpBf16 || c.precision == Precision::kAmpFp16;
  o += "  \"bf16\": {\"enabled\": " + std::string(c.precision == Precision::kBf16 ? "true" : "false") + "},\n";
  if (amp)
    o += std::string("  \"torch_autocast\": {\"enabled\": true, \"dtype\": \"") +
         (c.precision == Precision::kAmpFp16 ? "torch.float16" : "torch.bfloat16") + "\"},\n";
  o += "  \"zero_optimization\": {\"stage\": " + std::to_string(ZeroStage(c.sharding));
  if (c.sharding == Sharding::kZero3Offload) o += ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}";
  o += "},\n  \"_memsim\": \"" + CandidateLabel(c) + "; checkpointing: " + CheckpointingName(c.checkpoint) +
       " of the blocks (torch.utils.checkpoint in the model)\"\n}\n";
  return o;
}

std::string Torchtitan(const PlanReport& r, const PlanRow& row) {
  const PlanCandidate& c = row.candidate;
  std::string o = Header(r, row, "#");
  if (!IsFsdp(c.sharding) && !IsMeshSharding(c.sharding) && c.world > 1)
    o += "# torchtitan shards with FSDP2; this plan's " + std::string(ShardingTitle(c.sharding)) + " has no torchtitan setting\n";
  o += "[training]\nlocal_batch_size = " + std::to_string(c.micro_batch) + "\nglobal_batch_size = " +
       std::to_string(r.result.global_batch) + "\n";
  if (r.result.seq > 0) o += "seq_len = " + std::to_string(r.result.seq) + "\n";
  o += std::string("mixed_precision_param = \"") +
       (c.precision == Precision::kFp32 ? "float32" : c.precision == Precision::kAmpFp16 ? "float16" : "bfloat16") + "\"\n";
  o += "\n[parallelism]\n";
  if (c.sharding == Sharding::kHsdp) {
    o += "data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = " + std::to_string(c.world / 2) + "\n";
  } else {
    o += (c.sharding == Sharding::kDdp ? "data_parallel_replicate_degree = " : "data_parallel_shard_degree = ") + std::to_string(c.world) + "\n";
  }
  if (c.tp > 1) o += "tensor_parallel_degree = " + std::to_string(c.tp) + "\n";
  if (c.sharding == Sharding::kFsdp2NoReshard) o += "fsdp_reshard_after_forward = \"never\"\n";
  o += "\n[activation_checkpoint]\n";
  if (c.checkpoint.every == 0) {
    o += "mode = \"none\"\n";
  } else if (c.checkpoint.sac) {
    o += "mode = \"selective\"\nselective_ac_option = \"op\"\n";
  } else if (c.checkpoint.every == 1) {
    o += "mode = \"full\"\n";
  } else {
    o += "mode = \"selective\"\nselective_ac_option = \"" + std::to_string(c.checkpoint.every) + "\"  # every " +
         std::to_string(c.checkpoint.every) + "-th block\n";
  }
  if (c.sharding == Sharding::kFsdpOffload || c.sharding == Sharding::kZero3Offload)
    o += "\n[optimizer]\n# offload: torchtitan has no CPU offload of the optimizer; use DeepSpeed or FSDP CPUOffload\n";
  return o;
}

std::string HfArguments(const PlanReport& r, const PlanRow& row) {
  const PlanCandidate& c = row.candidate;
  std::string o = Header(r, row, "#");
  if (IsMeshSharding(c.sharding) || c.tp > 1)
    o += "# this plan's " + std::string(ShardingTitle(c.sharding)) + (c.tp > 1 ? " with tensor parallel " + std::to_string(c.tp) : "") +
         " has no TrainingArguments setting: see memsim plan --framework torchtitan or pytorch\n";
  o += "# torchrun --nproc_per_node " + std::to_string(c.world * c.tp) + " train.py\nfrom transformers import TrainingArguments\n\n";
  o += "args = TrainingArguments(\n    output_dir=\"out\",\n    per_device_train_batch_size=" + std::to_string(c.micro_batch) +
       ",\n    gradient_accumulation_steps=" + std::to_string(c.accumulate) + ",\n    optim=\"adamw_torch\",\n";
  if (c.precision == Precision::kAmpBf16 || c.precision == Precision::kBf16) o += "    bf16=True,\n";
  if (c.precision == Precision::kAmpFp16) o += "    fp16=True,\n";
  if (c.checkpoint.every > 0) {
    o += "    gradient_checkpointing=True,\n    gradient_checkpointing_kwargs={\"use_reentrant\": False},\n";
    if (c.checkpoint.every > 1 || c.checkpoint.sac)
      o += "    # memsim simulated " + CheckpointingName(c.checkpoint) + " of the blocks; HF checkpoints every block\n";
  }
  if (ZeroStage(c.sharding) > 0) o += "    deepspeed=\"ds_config.json\",  # memsim plan --framework deepspeed\n";
  if (IsFsdp(c.sharding)) {
    o += std::string("    fsdp=\"") + (c.sharding == Sharding::kFsdpGradOp ? "shard_grad_op" : "full_shard") + " auto_wrap" +
         (c.sharding == Sharding::kFsdpOffload ? " offload" : "") + "\",\n";
  }
  return o + ")\n";
}

}  // namespace

Result<std::string> PlanSnippet(const PlanReport& r, const PlanRow& row, std::string_view framework) {
  if (framework == "pytorch") return PyTorch(r, row);
  if (framework == "deepspeed") return DeepSpeed(r, row);
  if (framework == "torchtitan") return Torchtitan(r, row);
  if (framework == "hf") return HfArguments(r, row);
  return Status::InvalidArgument("--framework \"" + std::string(framework) + "\": expected pytorch, torchtitan, deepspeed or hf");
}

}  // namespace memsim
