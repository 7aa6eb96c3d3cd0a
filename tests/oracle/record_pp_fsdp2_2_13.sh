#!/bin/bash
# Records the pipeline parallel × FSDP2 per-rank CPU traces in tests/data/traces_pp_fsdp2_2_13/:
# the kit's trace_ddp.py --mode pp_fsdp2 under torch 2.13 (gloo, one process per rank of the 2-D
# mesh pp × dp_shard, torchtitan's order: the world mesh, the stage of the rank's pp coordinate
# (pipeline_llm), then fully_shard on each of its blocks and on the stage module over dp_shard
# (apply_fsdp), one schedule.step()). torchtitan's default reshard_after_forward with PP is False.
# Needs the 2.x venv (`make deps`) and gcc. Usage: record_pp_fsdp2_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$here/kit/record_common.sh" "$root/tests/data/traces_pp_fsdp2_2_13" "$@"
rund() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_ddp.py" "$@" --mode pp_fsdp2 "$out/$name" \
    && echo "done $name"; }
# pp 2 × dp_shard 2 (world 4)
rund cs336_small_b4_s64_adamw_pp2_dp2_1f1b_m4  cs336_small --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule 1f1b --microbatches 4 --reshard false
rund cs336_small_b4_s64_adamw_pp2_dp2_gpipe_m4 cs336_small --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule gpipe --microbatches 4 --reshard false
# reshard_after_forward=True ("always"): every microbatch's forward all-gathers again
rund cs336_small_b8_s64_sgd_pp2_dp2_1f1b_m4_reshard cs336_small --batch 8 --seq 64 --opt sgd --world 4 --pp 2 --schedule 1f1b --microbatches 4 --reshard true
# pp 2 × dp_shard 3 (world 6): dims 0 not divisible by 3 leave the last dp_shard rank fewer rows
rund cs336_small_b4_s64_adamw_pp2_dp3_1f1b_m4  cs336_small --batch 4 --seq 64 --opt adamw --world 6 --pp 2 --schedule 1f1b --microbatches 4 --reshard false
# Interleaved1F1B (two stages per rank, each its own FSDP root): the runtime's UNSHARD of both
# stages before the first action (unshard(async_op=True): gloo's staging copies run on its worker
# thread, interleaved with the next all-gather's output), RESHARD at the end
rund cs336_small_b4_s64_sgd_pp2_dp2_interleaved1f1b_v2_m4 cs336_small --batch 4 --seq 64 --opt sgd --world 4 --pp 2 --schedule interleaved1f1b --stages-per-rank 2 --microbatches 4 --reshard false
# Interleaved1F1B with reshard_after_forward=True; the split-backward schedules (FSDP2's hooks in the
# input passes only), reshard_after_forward=False as torchtitan runs PP.
rund cs336_small_b8_s64_sgd_pp2_dp2_interleaved1f1b_v2_m4_reshard cs336_small --batch 8 --seq 64 --opt sgd --world 4 --pp 2 --schedule interleaved1f1b --stages-per-rank 2 --microbatches 4 --reshard true
rund cs336_small_b4_s64_adamw_pp2_dp2_zbv_m4           cs336_small --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule zbv --stages-per-rank 2 --microbatches 4 --reshard false
rund cs336_small_b4_s64_adamw_pp2_dp2_dualpipev_m4     cs336_small --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule dualpipev --stages-per-rank 2 --microbatches 4 --reshard false
rund cs336_small_b4_s64_adamw_pp2_dp2_interleavedzb_m4 cs336_small --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule interleavedzb --stages-per-rank 2 --microbatches 4 --reshard false
# A Hugging Face Llama (its graphs in tests/data/traces_pp_tp_2_13/graphs), with FSDP2's mixed precision.
rund hf_llama_pp_b4_s64_adamw_pp2_dp2_1f1b_m4_bf16     hf_llama_pp --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule 1f1b --microbatches 4 --reshard false --mp bf16
rund hf_llama_pp_b4_s64_adamw_pp2_dp2_zbv_m4           hf_llama_pp --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule zbv --stages-per-rank 2 --microbatches 4 --reshard false
rund hf_llama_pp_b4_s64_adamw_pp2_dp2_zbv_m4_bf16      hf_llama_pp --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule zbv --stages-per-rank 2 --microbatches 4 --reshard false --mp bf16
# HSDP on each stage: the world mesh (pp, dp_replicate, dp_shard), FSDP2 on its (dp_replicate, dp_shard) submesh.
rund cs336_small_b4_s64_adamw_pp2_hsdp2x2_1f1b_m4 cs336_small --batch 4 --seq 64 --opt adamw --world 8 --pp 2 --hsdp 2 --schedule 1f1b --microbatches 4 --reshard false
# ZBV with full activation checkpointing (apply_ac before apply_fsdp on each stage's part).
rund cs336_small_b4_s64_adamw_pp2_dp2_zbv_m4_ac cs336_small --batch 4 --seq 64 --opt adamw --world 4 --pp 2 --schedule zbv --stages-per-rank 2 --microbatches 4 --reshard false --ac full
