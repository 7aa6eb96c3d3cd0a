#!/bin/sh
# Runs every libFuzzer target of a fuzz build for a bounded time and appends one line per target
# to fuzz/results.tsv-style output: target, executions, seconds, result.
# Usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET...]   (make fuzz calls it)
set -u
build=$1; secs=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
targets=${*:-"graph_json_fuzz snapshot_fuzz alloc_conf_fuzz pipeline_fuzz onnx_import_fuzz"}
status=0
for t in $targets; do
  bin=$build/fuzz/$t
  [ -x "$bin" ] || { echo "fuzz: $bin is missing" >&2; status=1; continue; }
  corpus=$build/fuzz-corpus/$t
  mkdir -p "$corpus"
  extra=
  case $t in
    graph_json_fuzz) seeds="$root/graphs $root/fuzz/corpus/graph_json" ;;
    snapshot_fuzz) seeds="$root/fuzz/corpus/snapshot" ;;
    alloc_conf_fuzz) seeds="$root/fuzz/corpus/alloc_conf" ;;
    pipeline_fuzz) seeds="$root/fuzz/corpus/pipeline" ;;
    onnx_import_fuzz)
      seeds=$build/fuzz-seeds/onnx
      # /usr/bin/python3: the python3 on PATH may be one without onnx.
      [ -d "$seeds" ] || /usr/bin/python3 "$root/tests/onnx/make_models.py" "$seeds" >/dev/null
      # ~28,000 coverage features: the entropic schedule's bookkeeping took half the time (perf).
      extra=-entropic=0 ;;
  esac
  log=$build/fuzz-$t.log
  "$bin" $extra -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
         -artifact_prefix="$build/fuzz-$t-" "$corpus" $seeds >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1)
  if [ $rc -eq 0 ]; then result=ok; else result="FAILED (exit $rc, see $log)"; status=1; fi
  printf '%s\t%s\t%s\n' "$t" "${runs:-no summary}" "$result"
done
exit $status
