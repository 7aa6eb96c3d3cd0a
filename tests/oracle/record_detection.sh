#!/bin/bash
# Records the detection-model traces (torchvision Faster R-CNN, RetinaNet, FCOS, SSD, Mask and Keypoint
# R-CNN training steps, tools/memsim_export/detection.py's synthetic targets) under torch 2.14.1 with
# torchvision 0.29.1 into tests/data/traces_detection_2_13 and under Debian's 1.13 into
# tests/data/traces_detection_1_13, and exports each graph with the same torch (export_torch.py
# torchvision:NAME: by execution on CPU tensors, Note [Data-dependent sizes]); tools/validate.py
# table_detection checks them. No dispatch mode (it would change the step: Note [InputBuffer]).
#   PY2=PYTHON tests/oracle/record_detection.sh [DATADIR]
# PY2: an interpreter with torch 2.x and its torchvision (pip install torch==2.14.1 torchvision==0.29.1 in a
# venv of its own); without it only the 1.13 set is recorded. PY113 (default /usr/bin/python3): Debian's 1.13.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${1:-$root/tests/data}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
record() {  # record PYTHON OUTDIR
  local py=$1 out=$2
  mkdir -p "$out/graphs"
  run() { local model=$1 batch=$2
    OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_step.py" "$model" \
      "$out/${model}_b${batch}_sgd.trace" --batch "$batch" --opt sgd
    "$py" "$root/tools/export_torch.py" "torchvision:$model" --input "$batch,3,320,320" --loss output \
      --provenance "tools/export_torch.py torchvision:$model --input $batch,3,320,320 --loss output" \
      -o "$out/graphs/$model.json"; }
  run fasterrcnn_mobilenet_v3_large_320_fpn 2
  run ssdlite320_mobilenet_v3_large 2
  run fcos_resnet50_fpn 1
  run maskrcnn_resnet50_fpn 1
  run retinanet_resnet50_fpn 1
  run keypointrcnn_resnet50_fpn 1
}
if [ -n "${PY2:-}" ]; then record "$PY2" "$data/traces_detection_2_13"; fi
record "${PY113:-/usr/bin/python3}" "$data/traces_detection_1_13"
