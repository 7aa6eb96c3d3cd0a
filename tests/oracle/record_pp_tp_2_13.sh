#!/bin/bash
# Records the pipeline parallel × tensor parallel (× FSDP2) per-rank CPU traces in
# tests/data/traces_pp_tp_2_13/: the kit's trace_ddp.py --mode pp_tp under torch 2.13 (gloo, one
# process per rank of the mesh pp × dp_shard × tp, torchtitan's order: the world mesh, the stage of
# the rank's pp coordinate (a Hugging Face Llama cut as pipeline_llm cuts torchtitan's), then
# parallelize_module with the layers plan on the stage's decoder layers over tp, and fully_shard
# on them and the stage over dp_shard when there is one; one schedule.step()). The graph is
# graphs/hf_llama_pp.json here, made below. Needs the 2.x venv (`make deps`) and gcc.
# Usage: record_pp_tp_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$here/kit/record_common.sh" "$root/tests/data/traces_pp_tp_2_13" "$@"
rund() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_ddp.py" hf_llama_pp --mode pp_tp "$@" "$out/$name" \
    && echo "done $name"; }
# pp 2 × tp 2 (world 4)
rund hf_llama_pp_b4_s64_adamw_pp2_tp2_1f1b_m4 --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --tp 2 --schedule 1f1b --microbatches 4
rund hf_llama_pp_b4_s64_sgd_pp2_tp2_gpipe_m4 --batch 4 --seq 64 --opt sgd --world 4 --pp 2 --tp 2 --schedule gpipe --microbatches 4
# Interleaved1F1B: two stages per rank
rund hf_llama_pp_b4_s64_adamw_pp2_tp2_interleaved1f1b_v2_m4 --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --tp 2 --schedule interleaved1f1b --stages-per-rank 2 --microbatches 4
# pp 2 × dp_shard 2 × tp 2 (world 8): torchtitan's 3-D mesh
rund hf_llama_pp_b4_s64_adamw_pp2_dp2_tp2_1f1b_m4 --batch 4 --seq 64 --opt adamw --world 8 --pp 2 --tp 2 --schedule 1f1b --microbatches 4 --reshard false
# torchtitan's whole plan with sequence parallelism: the stages pass sequence shards
rund hf_llama_pp_b4_s64_adamw_pp2_tp2_1f1b_m4_torchtitan_sp --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --tp 2 --schedule 1f1b --microbatches 4 --tp-plan torchtitan --sp
# full activation checkpointing of every decoder layer (torchtitan's apply_ac), 1F1B and interleaved
rund hf_llama_pp_b4_s64_adamw_pp2_tp2_1f1b_m4_ac --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --tp 2 --schedule 1f1b --microbatches 4 --ac full
rund hf_llama_pp_b4_s64_sgd_pp2_tp2_interleaved1f1b_v2_m4_ac --batch 4 --seq 64 --opt sgd --world 4 --pp 2 --tp 2 --schedule interleaved1f1b --stages-per-rank 2 --microbatches 4 --ac full
rund hf_llama_pp_b4_s64_adamw_pp2_dp2_tp2_1f1b_m4_ac --batch 4 --seq 64 --opt adamw --world 8 --pp 2 --tp 2 --schedule 1f1b --microbatches 4 --reshard false --ac full
# torchtitan's 70B-style run, small: the 3-D mesh with MixedPrecisionPolicy(bf16, fp32), full AC and the
# model built on the meta device (each stage's shards materialized after parallelizing)
rund hf_llama_pp_b4_s64_adamw_pp2_dp2_tp2_1f1b_m4_ac_bf16_meta --batch 4 --seq 64 --opt adamw --world 8 --pp 2 --tp 2 --schedule 1f1b --microbatches 4 --reshard false --ac full --mp bf16 --init meta
rund hf_llama_pp_b4_s64_adamw_pp2_dp2_tp2_interleaved1f1b_v2_m4_bf16_meta --batch 4 --seq 64 --opt adamw --world 8 --pp 2 --tp 2 --schedule interleaved1f1b --stages-per-rank 2 --microbatches 4 --reshard false --mp bf16 --init meta
mkdir -p "$out/graphs"
(cd "$root" && "$py" tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344,num_hidden_layers=4 --trace run \
   --set batch=4 --set seq=64 --loss cross_entropy --name hf_llama_pp \
   --provenance "tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344,num_hidden_layers=4 (trace_step.py hf_llama_pp)" \
   -o "$out/graphs/hf_llama_pp.json")
# MixedPrecisionPolicy(bf16, fp32): the graph exported in bf16 (transformers' casts are ops), its
# parameters and buffers then marked float32, the dtype the model keeps (as record_fsdp2_tp_2_13.sh)
(cd "$root" && "$py" tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344,num_hidden_layers=4,dtype=bf16 --trace run \
   --set batch=4 --set seq=64 --loss cross_entropy --name hf_llama_pp \
   --provenance "tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344,num_hidden_layers=4,dtype=bf16 (trace_step.py hf_llama_pp), parameters and buffers then marked float32 (record_pp_tp_2_13.sh)" \
   -o "$out/graphs/hf_llama_pp_bf16.json")
mark_fp32 "$out/graphs/hf_llama_pp_bf16.json"
