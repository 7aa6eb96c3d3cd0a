# Shared by tests/oracle/record_*_2_13.sh (source it after setting `root`): the output folder and
# the interpreter from the script's arguments, the allocation spy built, and
#   run NAME MODEL [trace_step.py options...]
# which records one training step into OUT/NAME.trace (checked by --check-spy; written whole or
# not at all). KIT_FLAGS adds options to every run (e.g. --marks).
# Usage: . "$root/tests/oracle/kit/record_common.sh" DEFAULT_OUTDIR [OUTDIR] [PYTHON]
default_out=$1; shift
out=${1:-$default_out}; mkdir -p "$out"
py=${2:-$root/.venv/bin/python}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
# NO_SPY_CHECK=1 run ...: without --check-spy (its TorchDispatchMode changes what some backward
# formulas run: Note [Whole slices]); the spy still records every allocation.
run() { local name=$1; shift; local check=--check-spy; [ -n "${NO_SPY_CHECK:-}" ] && check=
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_step.py" "$@" ${KIT_FLAGS:-} $check \
    "$out/$name.trace.tmp" && mv "$out/$name.trace.tmp" "$out/$name.trace"; echo "done $name"; }
# mark_fp32 GRAPH: a graph exported in bf16 (its casts recorded) with its parameters and buffers
# marked float32, the dtype a model under FSDP2's MixedPrecisionPolicy keeps.
mark_fp32() {
  "$py" - "$1" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for t in g["parameters"] + g.get("buffers", []):
    t["dtype"] = "float32"
json.dump(g, open(sys.argv[1], "w"), indent=1)
PY
}
