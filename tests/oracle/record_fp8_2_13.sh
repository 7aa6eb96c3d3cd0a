#!/bin/bash
# Records the PyTorch 2.13 CPU traces of torchao float8 training (trace_step.py --fp8 RECIPE:
# convert_to_float8_training on the Linears whose features are multiples of 16, Note [FP8 training])
# into tests/data/traces_fp8_2_13/, and exports the base graphs they are checked on (memsim run
# --fp8 RECIPE). Small MLPs of graphs/op_models.py: the CPU's torch._scaled_mm is emulated / oneDNN
# reference code (~0.1 us per multiply-add), too slow for the kit's LLMs.
# Needs the 2.x venv (`make deps`: torch==2.13.0, torchao==0.18.0) and gcc.
#   tests/oracle/record_fp8_2_13.sh [OUTDIR] [PYTHON]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
KIT_FLAGS=--marks
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_fp8_2_13" "$@"
mkdir -p "$out/graphs"
for r in tensorwise rowwise; do
  run act_mlp_a_b64_adam_fp8_$r      act_mlp_a --batch 64 --opt adam --fp8 $r
  run clamp_abs_mlp_b64_sgd_fp8_$r   clamp_abs_mlp --batch 64 --opt sgd --fp8 $r
  run act_mlp_a_b64_adam_fp8_${r}_ckpt act_mlp_a --batch 64 --opt adam --fp8 $r --checkpoint '[2-9]'
done
# under CPU autocast (bf16): the GEMM's output and the grads below it in bf16 (Note [FP8 training])
run clamp_abs_mlp_b64_sgd_amp_fp8_tensorwise clamp_abs_mlp --batch 64 --opt sgd --amp bf16 --fp8 tensorwise
run clamp_abs_mlp_b64_sgd_amp_fp8_rowwise    clamp_abs_mlp --batch 64 --opt sgd --amp bf16 --fp8 rowwise
run act_mlp_a_b64_adam_amp_fp8_rowwise       act_mlp_a --batch 64 --opt adam --amp bf16 --fp8 rowwise
for r in tensorwise rowwise; do
  run act_mlp_a_b64_adam_amp_fp8_${r}_ckpt act_mlp_a --batch 64 --opt adam --amp bf16 --fp8 $r --checkpoint '[2-9]'
done
exp() { local name=$1 prov=$2; shift 2
  (cd "$root" && "$py" tools/export_torch.py "$@" --name "$name" --provenance "$prov" -o "$out/graphs/$name.json"); }
for m in act_mlp_a clamp_abs_mlp; do
  exp $m "graphs/op_models.py $m; trace_step.py $m; input float32 [batch,256]" graphs/op_models.py:${m}_export \
    --input "x=batch,256" --loss cross_entropy
done
