#!/bin/bash
# Records torchvision models beyond the zoo: detection training steps (Faster R-CNN, RetinaNet, FCOS, SSD,
# Mask and Keypoint R-CNN; tools/memsim_export/detection.py's synthetic targets) and classifiers with
# other op mixes (Swin, MaxViT, ConvNeXt, EfficientNet, RegNet, ShuffleNet), under torch 2.14.1 with
# torchvision 0.29.1 into tests/data/traces_torchvision_2_13 and under Debian's 1.13 into
# tests/data/traces_torchvision_1_13, and exports each graph with the same torch as a user would
# (export_torch.py torchvision:NAME; detection by execution on CPU tensors, Note [Data-dependent
# sizes]); tools/validate.py table_torchvision checks them. No dispatch mode (Note [InputBuffer]).
#   PY2=PYTHON tests/oracle/record_torchvision.sh [DATADIR]
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
  trace() { local model=$1 name=$2; shift 2
    OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_step.py" "$model" "$out/$name.trace" "$@"; }
  graph() { local model=$1; shift
    "$py" "$root/tools/export_torch.py" "torchvision:$model" "$@" \
      --provenance "tools/export_torch.py torchvision:$model $*" -o "$out/graphs/$model.json"; }
  det() { local model=$1 batch=$2  # fixed sizes: the graph keeps the proposals of a batch-B run
    trace "$model" "${model}_b${batch}_sgd" --batch "$batch" --opt sgd
    graph "$model" --input "$batch,3,320,320" --loss output; }
  cls() { local model=$1 batch=$2 opt=$3
    trace "$model" "${model}_b${batch}_$opt" --batch "$batch" --opt "$opt"
    graph "$model" --input "batch,3,224,224" --loss cross_entropy; }
  det fasterrcnn_mobilenet_v3_large_320_fpn 2
  det ssdlite320_mobilenet_v3_large 2
  det fcos_resnet50_fpn 1
  det maskrcnn_resnet50_fpn 1
  det retinanet_resnet50_fpn 1
  det keypointrcnn_resnet50_fpn 1
  cls swin_t 2 adamw
  cls maxvit_t 2 sgd
  cls convnext_tiny 2 adamw
  cls efficientnet_b0 4 momentum
  cls regnet_y_400mf 4 sgd
  cls shufflenet_v2_x1_0 4 adam
  # a video transformer (16 frames of 112 x 112): fx traces swin3d's window helper as one call it
  # cannot run, so the exporter records it as it runs
  if "$py" -c "import torchvision.models.video as v; v.swin3d_t" 2>/dev/null; then
    trace swin3d_t swin3d_t_b1_adamw --batch 1 --opt adamw
    graph swin3d_t --input "batch,3,16,112,112" --loss cross_entropy
  fi
}
if [ -n "${PY2:-}" ]; then record "$PY2" "$data/traces_torchvision_2_13"; fi
record "${PY113:-/usr/bin/python3}" "$data/traces_torchvision_1_13"
