#!/bin/bash
# Records the torch.compile CPU traces of tests/data/traces_compile_2_13/ (PyTorch 2.13, Inductor
# compiling C++ with the host's g++; one warm-up step compiles forward and backward outside the
# traced step) and exports their graphs with `export_torch.py --compile` at each trace's sizes
# (Note [Compiled regions]). No --marks / --check-spy: a TorchDispatchMode changes what the
# compiled wrapper runs. Usage: record_compile_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/tests/data/traces_compile_2_13}; mkdir -p "$out/graphs"
py=${2:-$root/.venv/bin/python}
spy=$(mktemp -d)/allocspy.so
only=${ONLY:-all}  # ONLY=graphs: export the graphs only
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
run() { name=$1; shift; [ "$only" = graphs ] && return 0
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$here/kit/trace_step.py" "$@" --compile "$out/$name.trace.tmp" \
    && mv "$out/$name.trace.tmp" "$out/$name.trace"; echo "done $name"; }
eager() { name=$1; shift; [ "$only" = graphs ] && return 0  # the same step uncompiled (the eager-vs-compiled table)
  local check=--check-spy; [ -n "${NO_SPY_CHECK:-}" ] && check=  # NO_SPY_CHECK=1: no dispatch mode (Note [InputBuffer])
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$here/kit/trace_step.py" "$@" $check "$out/$name.trace.tmp" \
    && mv "$out/$name.trace.tmp" "$out/$name.trace"; echo "done $name"; }
graph() { name=$1; shift  # graph NAME EXPORT-ARGS...: graphs/NAME.json, compiled at the trace's sizes
  (cd "$root" && "$py" tools/export_torch.py "$@" --compile --loss cross_entropy --name "$name" -o "$out/graphs/$name.json"); }
M=graphs/models.py
run mlp_b256_adam_warm1        mlp --batch 256 --opt adam --warmup 1
run mlp_b256_sgd_warm1         mlp --batch 256 --opt sgd --warmup 1
run mlp_b64_adam_warm1_mb05    mlp --batch 64 --opt adam --warmup 1 --memory-budget 0.5
run mlp_b64_adam_warm1_mb0     mlp --batch 64 --opt adam --warmup 1 --memory-budget 0
run rms_mlp_b64_adam_warm1     rms_mlp --batch 64 --opt adam --warmup 1
run rms_mlp_b64_sgd_warm1_mb0  rms_mlp --batch 64 --opt sgd --warmup 1 --memory-budget 0
run gpt2_small_b2_s64_adamw_warm1 gpt2_small --batch 2 --seq 64 --opt adamw --warmup 1
run break_mlp_b64_adam_warm1    break_mlp --batch 64 --opt adam --warmup 1
run bert_small_b4_adam_warm1     bert_small --batch 4 --opt adam --warmup 1
run bert_small_b4_adam_warm1_amp bert_small --batch 4 --opt adam --warmup 1 --amp bf16
run bert_small_b4_adam_warm1_mb05 bert_small --batch 4 --opt adam --warmup 1 --memory-budget 0.5
run cs336_small_b2_s64_adamw_warm1 cs336_small --batch 2 --seq 64 --opt adamw --warmup 1
eager break_mlp_b64_adam_warm1_eager break_mlp --batch 64 --opt adam --warmup 1
run cs336_small_b2_s64_adamw_warm1_amp cs336_small --batch 2 --seq 64 --opt adamw --warmup 1 --amp bf16
eager cs336_small_b2_s64_adamw_warm1_amp_eager cs336_small --batch 2 --seq 64 --opt adamw --warmup 1 --amp bf16
eager bert_small_b4_adam_warm1_eager bert_small --batch 4 --opt adam --warmup 1
eager bert_small_b4_adam_warm1_amp_eager bert_small --batch 4 --opt adam --warmup 1 --amp bf16
eager cs336_small_b2_s64_adamw_warm1_eager cs336_small --batch 2 --seq 64 --opt adamw --warmup 1
eager gpt2_small_b2_s64_adamw_warm1_eager gpt2_small --batch 2 --seq 64 --opt adamw --warmup 1
eager mlp_b256_adam_warm1_eager   mlp --batch 256 --opt adam --warmup 1
eager mlp_b256_sgd_warm1_eager    mlp --batch 256 --opt sgd --warmup 1
eager mlp_b64_adam_warm1_eager    mlp --batch 64 --opt adam --warmup 1
eager rms_mlp_b64_adam_warm1_eager rms_mlp --batch 64 --opt adam --warmup 1
eager rms_mlp_b64_sgd_warm1_eager rms_mlp --batch 64 --opt sgd --warmup 1
run gpt2_small_b2_s64_adamw_warm1_amp gpt2_small --batch 2 --seq 64 --opt adamw --warmup 1 --amp bf16
run gpt2_small_b2_s64_adamw_warm1_mb05_amp gpt2_small --batch 2 --seq 64 --opt adamw --warmup 1 --amp bf16 --memory-budget 0.5
NO_SPY_CHECK=1 eager gpt2_small_b2_s64_adamw_warm1_amp_eager gpt2_small --batch 2 --seq 64 --opt adamw --warmup 1 --amp bf16
run eager_mid_mlp_b64_adam_warm1 eager_mid_mlp --batch 64 --opt adam --warmup 1
eager eager_mid_mlp_b64_adam_warm1_eager eager_mid_mlp --batch 64 --opt adam --warmup 1
graph gpt2_small_b2_s64 graphs/llm_zoo.py:gpt2_small --trace run --input "ids=int64:batch,seq" --set batch=2 --set seq=64
graph break_mlp_b64 $M:break_mlp --input "x=batch,1000" --set batch=64
graph eager_mid_mlp_b64 $M:eager_mid_mlp --input "x=batch,1000" --set batch=64
graph mlp_b64_budgets $M:mlp --input "x=batch,1000" --set batch=64 --memory-budget 1,0.5,0
graph bert_small_b4 $M:bert_small --set batch=4
graph bert_small_b4_amp $M:bert_small --set batch=4 --amp bf16
graph bert_small_b4_mb05 $M:bert_small --set batch=4 --memory-budget 0.5
graph cs336_small_b2_s64 graphs/llm_zoo.py:cs336_small --trace run --input "ids=int64:batch,seq" --set batch=2 --set seq=64
graph cs336_small_b2_s64_amp graphs/llm_zoo.py:cs336_small --trace run --input "ids=int64:batch,seq" --set batch=2 --set seq=64 --amp bf16
graph gpt2_small_b2_s64_amp graphs/llm_zoo.py:gpt2_small --trace run --input "ids=int64:batch,seq" --set batch=2 --set seq=64 --amp bf16
graph gpt2_small_b2_s64_mb05_amp graphs/llm_zoo.py:gpt2_small --trace run --input "ids=int64:batch,seq" --set batch=2 --set seq=64 --amp bf16 --memory-budget 0.5
graph mlp_b256      $M:mlp --input "x=batch,1000" --set batch=256
graph mlp_b64_mb05  $M:mlp --input "x=batch,1000" --set batch=64 --memory-budget 0.5
graph mlp_b64_mb0   $M:mlp --input "x=batch,1000" --set batch=64 --memory-budget 0
graph rms_mlp_b64   $M:rms_mlp --input "x=batch,1000" --set batch=64
graph rms_mlp_b64_mb0 $M:rms_mlp --input "x=batch,1000" --set batch=64 --memory-budget 0
