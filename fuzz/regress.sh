#!/bin/sh
# Runs every input of the fuzz targets' seed corpora and of the repository's test data once
# through the ASan+UBSan fuzz targets (no fuzzing): the readers of hostile input under the
# sanitizers, cheap enough for every `make test` (docs/robustness.md, "Sanitizers").
# Usage: fuzz/regress.sh BUILD_DIR   (the fuzz build of `make fuzz`; onnx_import_fuzz excluded)
set -u
build=$1
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
run() {  # run TARGET FILES...
  t=$1; shift
  bin=$build/fuzz/$t
  [ -x "$bin" ] || { echo "sanitize: $bin is missing" >&2; status=1; return; }
  log=$build/regress-$t.log
  if "$bin" -timeout=60 -rss_limit_mb=4096 "$@" >"$log" 2>&1; then
    echo "sanitize: $t: $# inputs, no finding"
  else
    echo "sanitize: $t FAILED on one of $# inputs (see $log):" >&2
    grep -E "ERROR|runtime error|SUMMARY" "$log" | head -5 >&2
    status=1
  fi
}
cd "$root"
run graph_json_fuzz graphs/*.json fuzz/corpus/graph_json/* tests/data/robustness/graph_*.json
run snapshot_fuzz fuzz/corpus/snapshot/* tests/data/gpu/*.json tests/data/gpu/*.pickle tests/oracle/llm/*.pickle \
    tests/data/robustness/*.pickle tests/data/robustness/alloc_data*.json tests/data/robustness/*.html
run alloc_conf_fuzz fuzz/corpus/alloc_conf/*
run pipeline_fuzz fuzz/corpus/pipeline/*
exit $status
