#!/bin/bash
# Records the PyTorch 2.13 CPU development traces in tests/data/traces_2_13/ (one training step each,
# the kit of kit/ under torch 2.13: see README.md). Needs the 2.x venv (`make deps`: .venv with
# torch==2.13.0) and gcc. Usage: record_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
out=${1:-$root/tests/data/traces_2_13}; mkdir -p "$out"
py=${2:-$root/.venv/bin/python}
tv=${3:-}
spy=$(mktemp -d)/allocspy.so
gcc -O2 -shared -fPIC -o "$spy" "$root/tools/memsim_export/allocspy.c" -ldl -lpthread
# NO_SPY_CHECK=1 run ...: record without --check-spy (its TorchDispatchMode changes what some
# backward formulas run: Note [Whole slices], and sums every multi-consumer grad out of place: Note
# [InputBuffer]; GPT-2's autocast weight casts move the backward peak); the spy still records every allocation.
run() { name=$1; shift; check=--check-spy; [ -n "${NO_SPY_CHECK:-}" ] && check=
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "${PY_RUN:-$py}" "$here/kit/trace_step.py" "$@" $check "$out/$name.trace.tmp" \
    && mv "$out/$name.trace.tmp" "$out/$name.trace"; echo "done $name"; }
# fp32, built-in optimizers (as traces/ of 1.13)
run mlp_b256_sgd              mlp --batch 256 --opt sgd --marks
run mlp_b256_adam             mlp --batch 256 --opt adam --marks
run mnist_cnn_b64_sgd         mnist_cnn --batch 64 --opt sgd --marks
run mnist_cnn_b64_inplace     mnist_cnn --batch 64 --opt sgd --inplace --marks
run mnist_cnn_b32_adam_freeze2 mnist_cnn --batch 32 --opt adam --freeze 2
run rms_mlp_b64_adam          rms_mlp --batch 64 --opt adam --marks
run bert_small_b8_adam        bert_small --batch 8 --opt adam --marks
run bert_small_b16_sgd        bert_small --batch 16 --opt sgd
run bert_small_b4_mom_freeze6 bert_small --batch 4 --opt momentum --freeze 6
# setups: checkpointing (non-reentrant and reentrant), accumulation, clipping, autocast bf16
run mlp_b256_adam_ckpt        mlp --batch 256 --opt adam --checkpoint '[0-7]'
run mnist_cnn_b64_mom_acc2    mnist_cnn --batch 64 --opt momentum --accumulate 2
run bert_small_b4_adam_ckpt   bert_small --batch 4 --opt adam --checkpoint 'text\.enc\.layers\.[0-3]'
run bert_small_b4_adam_ckpt_reentrant bert_small --batch 4 --opt adam --checkpoint 'text\.enc\.layers\.[0-3]' --reentrant
run bert_small_b4_adam_acc2_clip bert_small --batch 4 --opt adam --accumulate 2 --clip 1.0
run mlp_b256_adam_amp         mlp --batch 256 --opt adam --amp bf16
run mnist_cnn_b64_adam_amp    mnist_cnn --batch 64 --opt adam --amp bf16
run bert_small_b4_adam_amp    bert_small --batch 4 --opt adam --amp bf16
run bert_small_b4_adam_amp_ckpt bert_small --batch 4 --opt adam --amp bf16 --checkpoint 'text\.enc\.layers\.[0-3]'
# steady-state steps
run mlp_b256_adam_warm1       mlp --batch 256 --opt adam --warmup 1
run bert_small_b4_adam_warm1_keep bert_small --batch 4 --opt adam --warmup 1 --keep-prev
run mnist_cnn_b64_mom_warm1_keep mnist_cnn --batch 64 --opt momentum --warmup 1 --keep-prev
# language models: the CS336 transformer and nanoGPT (F.scaled_dot_product_attention under 2.x)
NO_SPY_CHECK=1 run cs336_small_b2_s128_adamw cs336_small --batch 2 --seq 128 --opt adamw
NO_SPY_CHECK=1 run cs336_small_b4_s64_none   cs336_small --batch 4 --seq 64 --opt none
NO_SPY_CHECK=1 run cs336_small_b2_s128_cs336 cs336_small --batch 2 --seq 128 --loss cs336 --opt cs336_adamw
NO_SPY_CHECK=1 run cs336_small_b2_s64_adamw_amp cs336_small --batch 2 --seq 64 --opt adamw --amp bf16
NO_SPY_CHECK=1 run cs336_small_b2_s64_adamw_ckpt cs336_small --batch 2 --seq 64 --opt adamw --checkpoint 'layers\.[0-3]'
run cs336_small_b2_s32_cs336adamw_warm cs336_small --batch 2 --seq 32 --opt cs336_adamw --loss cs336 --warmup 1
run gpt2_small_b2_s128_adamw  gpt2_small --batch 2 --seq 128 --opt adamw
NO_SPY_CHECK=1 run gpt2_small_b2_s64_adamw_amp_ckpt gpt2_small --batch 2 --seq 64 --opt adamw --amp bf16 --checkpoint 'transformer\.h\.[0-9]+'
run gpt2_small_b2_s64_adamw_clip_warm1 gpt2_small --batch 2 --seq 64 --opt adamw --clip 1.0 --warmup 1
# selective activation checkpointing (create_selective_checkpoint_contexts with the kit's policy_fn)
run gpt2_small_b2_s64_adamw_sac gpt2_small --batch 2 --seq 64 --opt adamw --checkpoint 'transformer\.h\.[0-9]+' --sac torchtitan
run gpt2_small_b2_s64_adamw_sac_mm_sdpa gpt2_small --batch 2 --seq 64 --opt adamw --checkpoint 'transformer\.h\.[0-9]+' \
  --sac ops:mm,_scaled_dot_product_flash_attention_for_cpu
NO_SPY_CHECK=1 run gpt2_small_b2_s64_adamw_amp_sac gpt2_small --batch 2 --seq 64 --opt adamw --amp bf16 --checkpoint 'transformer\.h\.[0-9]+' --sac torchtitan
NO_SPY_CHECK=1 run cs336_small_b2_s64_adamw_sac_bmm cs336_small --batch 2 --seq 64 --opt adamw --checkpoint 'layers\.[0-3]' --sac ops:bmm,mm
# activation offloading: forward and loss under torch.autograd.graph.save_on_cpu (pin: packed copies)
run mlp_b256_adam_soc_on      mlp --batch 256 --opt adam --save-on-cpu on
run mlp_b256_adam_soc_pin     mlp --batch 256 --opt adam --save-on-cpu pin --marks
run mnist_cnn_b64_adam_soc_pin mnist_cnn --batch 64 --opt adam --save-on-cpu pin
run bert_small_b4_adam_soc_pin bert_small --batch 4 --opt adam --save-on-cpu pin --marks
run bert_small_b4_adam_amp_soc_pin bert_small --batch 4 --opt adam --amp bf16 --save-on-cpu pin
run cs336_small_b2_s64_adamw_soc_pin_ckpt cs336_small --batch 2 --seq 64 --opt adamw --save-on-cpu pin --checkpoint 'layers\.[0-1]'
run gpt2_small_b2_s64_adamw_soc_pin gpt2_small --batch 2 --seq 64 --opt adamw --save-on-cpu pin --marks
run gpt2_small_b2_s64_adamw_amp_soc_pin gpt2_small --batch 2 --seq 64 --opt adamw --amp bf16 --save-on-cpu pin --marks
# the optimizer stepped in backward (torchtune optimizer_in_bwd; Note [Optimizer in backward])
run mlp_b64_adam_inbwd mlp --batch 64 --opt adam --opt-in-bwd
run mlp_b64_adam_inbwd_warm2 mlp --batch 64 --opt adam --opt-in-bwd --warmup 2
run gpt2_small_b2_s64_adamw_inbwd gpt2_small --batch 2 --seq 64 --opt adamw --opt-in-bwd
run gpt2_small_b2_s64_adamw_inbwd_ckpt_warm1 gpt2_small --batch 2 --seq 64 --opt adamw --opt-in-bwd --warmup 1 --checkpoint 'transformer\.h\.[0-9]+'
# the graphs these traces are checked on, exported under the same torch (tools/validate.py)
g=$out/graphs; mkdir -p "$g"
# torchvision CNNs under torch 2.14.1 (CONFIG torch=2.14.1; memsim runs them with --torch 2.13)
if [ -n "$tv" ]; then
  PY_RUN=$tv run resnet18_b8_mom          resnet18 --batch 8 --opt momentum
  PY_RUN=$tv run resnet18_b8_adam_ckpt    resnet18 --batch 8 --opt adam --checkpoint 'layer[1-4]'
  PY_RUN=$tv run resnet18_b8_sgd_amp      resnet18 --batch 8 --opt sgd --amp bf16
  PY_RUN=$tv run resnet18_b16_adamw_warm1 resnet18 --batch 16 --opt adamw --warmup 1
  PY_RUN=$tv run resnet50_b4_sgd          resnet50 --batch 4 --opt sgd
  PY_RUN=$tv run mobilenet_v2_b8_mom      mobilenet_v2 --batch 8 --opt momentum
  PY_RUN=$tv run vgg11_b4_adam            vgg11 --batch 4 --opt adam
  PYTHON=$tv "$root/graphs/generate.sh" "$g" resnet18 resnet50 mobilenet_v2 vgg11
fi
PYTHON=$py "$root/graphs/generate.sh" "$g" mlp mnist_cnn bert_small cs336_small cs336_small_course_loss nanogpt_gpt2_small
(cd "$root" && "$py" tools/export_torch.py graphs/models.py:rms_mlp --input "x=batch,1000" --name rms_mlp \
  --loss cross_entropy --provenance "graphs/models.py rms_mlp: Linear(1000,256), RMSNorm(256), ReLU, Linear(256,10); trace_step.py rms_mlp; input float32 [batch,1000]" \
  -o "$g/rms_mlp.json")
# data parallel, per rank (gloo, 2 processes): DDP and DDP + ZeroRedundancyOptimizer
d=${out%/}/../traces_ddp_2_13; mkdir -p "$d"
rund() { name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$here/kit/trace_ddp.py" "$@" "$d/$name" && echo "done $name"; }
rund mlp_b64_adam_ddp2 mlp --batch 64 --opt adam --mode ddp
rund mlp_b64_adam_zero1 mlp --batch 64 --opt adam --mode zero1
rund mnist_cnn_b32_adam_zero1 mnist_cnn --batch 32 --opt adam --mode zero1
rund bert_small_b4_adam_ddp2_view bert_small --batch 4 --opt adam --mode ddp --bucket-view
