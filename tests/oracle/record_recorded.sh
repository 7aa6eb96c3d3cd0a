#!/bin/bash
# Records the recorded-rule traces (graphs/recorded_models.py: torch.special functions, cumulative ops,
# a user's autograd.Function, none of which has a memsim rule: Note [Recorded rules]) under PyTorch
# 2.13 (the .venv) into tests/data/traces_recorded_2_13 and under 1.13 (Debian's /usr/bin/python3)
# into tests/data/traces_recorded_1_13, and exports each set's graphs under the same torch with
# --trace auto, which records those ops (tools/validate.py table_recorded).
#   tests/oracle/record_recorded.sh [DATADIR]   (PY213=..., PY113=... pick the interpreters)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${1:-$root/tests/data}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
record() {  # record PYTHON OUTDIR [--check-spy]
  local py=$1 out=$2; shift 2
  mkdir -p "$out/graphs"
  run() { local name=$1; shift
    OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_step.py" "$@" "$out/$name.trace" "${extra[@]}"; }
  local extra=("$@")
  run special_mlp_b64_adam   special_mlp --batch 64 --opt adam
  run custom_fn_mlp_b64_sgd  custom_fn_mlp --batch 64 --opt sgd
  run cum_cnn_b16_sgd        cum_cnn --batch 16 --opt sgd
  exp() { local name=$1 shape=$2
    (cd "$root" && "$py" tools/export_torch.py graphs/recorded_models.py:${name}_export --input "x=batch,$shape" \
      --loss cross_entropy --name "$name" \
      --provenance "graphs/recorded_models.py $name; trace_step.py $name; input float32 [batch,$shape]" \
      -o "$out/graphs/$name.json"); }
  exp special_mlp 256
  exp custom_fn_mlp 256
  exp cum_cnn 3,16,16
}
# No --check-spy: its TorchDispatchMode makes isTensorSubclassLike true, which sends composite
# backwards (cumprod_backward, cummaxmin_backward) down their subclass-safe branches.
record "${PY213:-$root/.venv/bin/python}" "$data/traces_recorded_2_13"
record "${PY113:-/usr/bin/python3}" "$data/traces_recorded_1_13"
