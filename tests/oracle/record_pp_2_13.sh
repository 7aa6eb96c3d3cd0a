#!/bin/bash
# Records the pipeline-parallel (torch.distributed.pipelining) per-rank CPU traces in
# tests/data/traces_pp_2_13/: the kit's trace_ddp.py --mode pp under torch 2.13 (gloo, one process
# per stage rank; the stage split as torchtitan's pipeline_llm makes it, static stage metadata, one
# schedule.step()). Needs the 2.x venv (`make deps`) and gcc. Usage: record_pp_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$here/kit/record_common.sh" "$root/tests/data/traces_pp_2_13" "$@"
rund() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_ddp.py" "$@" --mode pp "$out/$name" \
    && echo "done $name"; }
rund cs336_small_b4_s64_adamw_pp2_gpipe_m4 cs336_small --batch 4 --seq 64 --opt adamw --schedule gpipe --microbatches 4
rund cs336_small_b4_s64_adamw_pp2_1f1b_m4  cs336_small --batch 4 --seq 64 --opt adamw --schedule 1f1b --microbatches 4
# sgd (no optimizer state): the schedule's activations hold the peak
rund cs336_small_b8_s64_sgd_pp2_gpipe_m4   cs336_small --batch 8 --seq 64 --opt sgd --schedule gpipe --microbatches 4
rund cs336_small_b8_s64_sgd_pp2_1f1b_m8    cs336_small --batch 8 --seq 64 --opt sgd --schedule 1f1b --microbatches 8
# Interleaved1F1B (_PipelineScheduleRuntime): two stages per rank, loop-style (rank r holds r and r + N)
rund cs336_small_b4_s64_sgd_pp2_interleaved1f1b_v2_m4    cs336_small --batch 4 --seq 64 --opt sgd --schedule interleaved1f1b --stages-per-rank 2 --microbatches 4
rund cs336_small_b8_s64_adamw_pp2_interleaved1f1b_v2_m8  cs336_small --batch 8 --seq 64 --opt adamw --schedule interleaved1f1b --stages-per-rank 2 --microbatches 8
rund cs336_small_b8_s64_sgd_pp4_interleaved1f1b_v2_m8    cs336_small --batch 8 --seq 64 --opt sgd --world 4 --schedule interleaved1f1b --stages-per-rank 2 --microbatches 8
rund cs336_small_b6_s64_sgd_pp2_interleaved1f1b_v3_m6    cs336_small --batch 6 --seq 64 --opt sgd --schedule interleaved1f1b --stages-per-rank 3 --microbatches 6
# The split backward (I/W) and V-shaped placement: InterleavedZeroBubble (loop-style), ZBVZeroBubble
# and DualPipeV (stages r and 2·world − 1 − r on rank r; OVERLAP_F_B actions)
rund cs336_small_b4_s64_sgd_pp2_interleavedzb_v2_m4 cs336_small --batch 4 --seq 64 --opt sgd --schedule interleavedzb --stages-per-rank 2 --microbatches 4
rund cs336_small_b4_s64_sgd_pp2_zbv_v2_m4           cs336_small --batch 4 --seq 64 --opt sgd --schedule zbv --stages-per-rank 2 --microbatches 4
rund cs336_small_b4_s64_sgd_pp2_dualpipev_v2_m4     cs336_small --batch 4 --seq 64 --opt sgd --schedule dualpipev --stages-per-rank 2 --microbatches 4
# recorded after the split backward was simulated, to check it on other microbatch counts,
# AdamW and pp=4 (the V's middle ranks without an adjacent pair)
rund cs336_small_b8_s64_adamw_pp2_zbv_v2_m8         cs336_small --batch 8 --seq 64 --opt adamw --schedule zbv --stages-per-rank 2 --microbatches 8
rund cs336_small_b6_s64_sgd_pp2_dualpipev_v2_m6     cs336_small --batch 6 --seq 64 --opt sgd --schedule dualpipev --stages-per-rank 2 --microbatches 6
rund cs336_small_b8_s64_sgd_pp4_zbv_v2_m8           cs336_small --batch 8 --seq 64 --opt sgd --world 4 --schedule zbv --stages-per-rank 2 --microbatches 8
rund cs336_small_b8_s64_adamw_pp2_interleavedzb_v2_m8 cs336_small --batch 8 --seq 64 --opt adamw --schedule interleavedzb --stages-per-rank 2 --microbatches 8
# Full activation checkpointing of every layer (--ac full, torchtitan's apply_ac on each stage's part):
# 1F1B, and the split-backward schedules, which recompute a checkpointed layer once per autograd.grad
# call (its I, and each W group pass); a Hugging Face Llama (its graph in traces_pp_tp_2_13/graphs).
rund cs336_small_b4_s64_adamw_pp2_1f1b_m4_ac        cs336_small --batch 4 --seq 64 --opt adamw --schedule 1f1b --microbatches 4 --ac full
rund cs336_small_b4_s64_adamw_pp2_zbv_m4_ac         cs336_small --batch 4 --seq 64 --opt adamw --schedule zbv --stages-per-rank 2 --microbatches 4 --ac full
rund cs336_small_b4_s64_adamw_pp2_dualpipev_m4_ac   cs336_small --batch 4 --seq 64 --opt adamw --schedule dualpipev --stages-per-rank 2 --microbatches 4 --ac full
rund cs336_small_b4_s64_sgd_pp2_interleavedzb_m4_ac cs336_small --batch 4 --seq 64 --opt sgd --schedule interleavedzb --stages-per-rank 2 --microbatches 4 --ac full
rund hf_llama_pp_b4_s64_adamw_pp2_zbv_m4_ac         hf_llama_pp --batch 4 --seq 64 --opt adamw --schedule zbv --stages-per-rank 2 --microbatches 4 --ac full
