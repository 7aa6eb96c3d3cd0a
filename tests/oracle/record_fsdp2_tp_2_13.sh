#!/bin/bash
# Records the PyTorch 2.13 per-rank CPU traces of the 2-D mesh FSDP2 × TP in
# tests/data/traces_fsdp2_tp_2_13/ (trace_ddp.py --mode fsdp2_tp: gloo, one process per rank, one mesh
# (dp_shard, tp); parallelize_module on mesh["tp"], then fully_shard on each decoder layer and
# the root on mesh["dp_shard"], torchtitan's order; Note [FSDP2] in docs/parallel.md). The graph
# is tests/data/traces_tp_2_13/graphs/hf_llama_tp.json (record_tp_2_13.sh). Needs the 2.x venv
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
# Not recorded into the set: --mp bf16 (MixedPrecisionPolicy). The graph is exported in fp32,
# where transformers' dtype casts (RMSNorm's .to(input_dtype), RoPE's cos.to(x.dtype)) are no-ops
# and leave no op, so bound in bf16 memsim keeps fp32 activations (+37 % on every rank; the same
# holds for 1-D FSDP2 on a Hugging Face model): it needs a bf16 export whose parameters stay fp32.
# run2d hf_llama_tp_b2_s128_adamw_dp2tp2_bf16 --world 4 --mp bf16
