#!/bin/bash
# Records tests/data/traces_plan_sac/: the runs docs/plan-sac.md simulates (tools/plan_vs_sac.py,
# issue 30), one PyTorch 2.13 CPU training step each of nanoGPT GPT-2 small, batch 4, seq 512, no
# optimizer: memsim's checkpointing candidates and the MILP's plans as translated there. Each file
# is named by plan_vs_sac.trace_key of its memsim flags. Needs the 2.x venv (`make deps`) and gcc.
# Usage: record_plan_sac.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
out=${1:-$root/tests/data/traces_plan_sac}; mkdir -p "$out"
py=${2:-$root/.venv/bin/python}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
run() { name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$here/kit/trace_step.py" gpt2_small "$out/$name.trace.tmp" \
    --batch 4 --seq 512 --opt none "$@" && mv "$out/$name.trace.tmp" "$out/$name.trace"; echo "done $name"; }
all='transformer\.h\.[0-9]+'
run none
run h3-7-11                 --checkpoint 'transformer\.h\.(3|7|11)'
run h2-5-8-11               --checkpoint 'transformer\.h\.(2|5|8|11)'
run h1-3-5-7-9-11           --checkpoint 'transformer\.h\.(1|3|5|7|9|11)'
run all                     --checkpoint "$all"
run all_sac-torchtitan      --checkpoint "$all" --sac torchtitan
run all_sac-ops-sdpa-mm     --checkpoint "$all" --sac ops:_scaled_dot_product_flash_attention_for_cpu,mm
run all_sac-ops-sdpa-add-mm --checkpoint "$all" --sac ops:_scaled_dot_product_flash_attention_for_cpu,add,mm
