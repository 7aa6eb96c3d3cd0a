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
