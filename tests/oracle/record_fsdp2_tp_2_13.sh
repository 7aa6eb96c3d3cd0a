#!/bin/bash
# Records the PyTorch 2.13 per-rank CPU traces of the 2-D mesh FSDP2 × TP in
# tests/data/traces_fsdp2_tp_2_13/ (trace_ddp.py --mode fsdp2_tp: gloo, one process per rank, one mesh
# (dp_shard, tp); parallelize_module on mesh["tp"], then fully_shard on each decoder layer and
# the root on mesh["dp_shard"], torchtitan's order; Note [FSDP2] in docs/parallel.md). The graph
# is tests/data/traces_tp_2_13/graphs/hf_llama_tp.json (record_tp_2_13.sh); the bf16 set's is
# graphs/hf_llama_tp_bf16.json here, made below. Needs the 2.x venv
# (`make deps`) and gcc. Usage: record_fsdp2_tp_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$here/kit/record_common.sh" "$root/tests/data/traces_fsdp2_tp_2_13" "$@"
run2d() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$here/kit/trace_ddp.py" hf_llama_tp --mode fsdp2_tp --tp 2 \
    --wrap 'model.layers.*' --tp-plan layers --batch 2 --seq 128 --opt adamw "$@" "$out/$name" && echo "done $name"; }
run2d hf_llama_tp_b2_s128_adamw_dp2tp2 --world 4
run2d hf_llama_tp_b2_s128_adamw_dp2tp2_noreshard --world 4 --reshard false
# dp_shard=3 (6 ranks): the tp-local dims 0 of 64 rows leave the last dp_shard rank 20 of 22
run2d hf_llama_tp_b2_s128_adamw_dp3tp2 --world 6
# HSDP x TP: one 3-D mesh (dp_replicate 2, dp_shard 2, tp 2), FSDP2 on its (dp_replicate, dp_shard) submesh
# (the tp group's scatter source may hold gloo's staging a moment longer on some runs: thread timing)
run2d hf_llama_tp_b2_s128_adamw_hsdp2dp2tp2 --world 8 --hsdp 2
# torchtitan's whole plan with sequence parallelism (run2d's --tp-plan layers overridden)
run2d hf_llama_tp_b2_s128_adamw_dp2tp2_torchtitan_sp --world 4 --tp-plan torchtitan --sp
# MixedPrecisionPolicy(bf16, fp32): its graph is exported in bf16, so that transformers' casts
# (RMSNorm's float32 upcast and .to(input_dtype), RoPE's cos.to(x.dtype)), no-ops in an fp32
# export, are ops; its parameters and buffers are then marked float32, the dtype the model keeps
# (fully_shard casts only the unsharded copies; --fsdp2-mp binds the graph in bf16).
run2d hf_llama_tp_b2_s128_adamw_dp2tp2_bf16 --world 4 --mp bf16
mkdir -p "$out/graphs"
(cd "$root" && "$py" tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344,dtype=bf16 --trace run \
   --set batch=2 --set seq=128 --loss cross_entropy --name hf_llama_tp \
   --provenance "tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344,dtype=bf16 (trace_step.py hf_llama_tp), parameters and buffers then marked float32 (record_fsdp2_tp_2_13.sh)" \
   -o "$out/graphs/hf_llama_tp_bf16.json")
mark_fp32 "$out/graphs/hf_llama_tp_bf16.json"
