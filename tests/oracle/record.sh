#!/bin/bash
# Records the extra oracle traces in tests/oracle/ (real PyTorch 1.13 CPU steps, see README.md).
# Needs: apt-get install -y python3-torch python3-torchvision gcc. The recording kit is kit/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
oracle=${ORACLE:-$here/kit}
out=${1:-$here}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$here/../../tools/memsim_export/allocspy.c" -ldl -lpthread
run() { name=$1; shift
  ONEDNN_MAX_CPU_ISA=AVX2 LD_PRELOAD=$spy /usr/bin/python3 "$oracle/trace_step.py" "$@" --marks $out/$name.trace.tmp && mv $out/$name.trace.tmp $out/$name.trace
  echo "done $name"; }
run mnist_cnn_b32_freeze2 mnist_cnn --batch 32 --opt adam --freeze 2
run resnet18_b4_freeze20_mom resnet18 --batch 4 --opt momentum --freeze 20
run alexnet_b8_mom_inplace alexnet --batch 8 --opt momentum --inplace
run vgg11_b4_sgd vgg11 --batch 4 --opt sgd
run mobilenet_v2_b8_adam mobilenet_v2 --batch 8 --opt adam
run resnet50_b4_sgd resnet50 --batch 4 --opt sgd
run bert_small_b4_adam_freeze6 bert_small --batch 4 --opt adam --freeze 6
run multimodal_bert_b2_sgd multimodal_bert --batch 2 --opt sgd
run bert_base_b2_momentum bert_base --batch 2 --opt momentum
run mlp_b64_none mlp --batch 64 --opt none
