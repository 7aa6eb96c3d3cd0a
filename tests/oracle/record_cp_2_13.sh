#!/bin/bash
# Records the PyTorch 2.13 per-rank CPU traces of context parallelism in tests/data/traces_cp_2_13/
# (trace_ddp.py --mode cp: gloo, one process per rank, torch.distributed.tensor.experimental.context_parallel
# around the forward, loss and backward of a Hugging Face decoder, as torchtitan's train_context runs it).
# CP's ring attention has CUDA kernels only: the kit's cp_shim.py gives aten._scaled_dot_product_flash_attention
# and its backward CPU kernels that call the CPU flash kernel (Note [Context parallel] in docs/parallel.md).
# Graphs: tests/data/traces_hf_2_13/graphs (hf_llama_tiny) and tests/data/traces_tp_2_13/graphs (hf_llama_tp).
# Needs the 2.x venv (`make deps`) and gcc. Usage: record_cp_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_cp_2_13" "$@"
runcp() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$here/kit/trace_ddp.py" "$@" --mode cp --port "${CP_PORT:-29541}" "$out/$name" && echo "done $name"; }
# cp=2, head-tail load balancing (seq divisible by 2·cp), the default all-gather rotater
runcp hf_llama_tiny_b2_s64_adamw_cp2 hf_llama_tiny --world 2 --batch 2 --seq 64 --opt adamw
# the decoder layers hold the peak (vocabulary 128)
runcp hf_llama_tp_b2_s128_adamw_cp2 hf_llama_tp --world 2 --batch 2 --seq 128 --opt adamw
# the all-to-all rotater (set_rotate_method("alltoall")) in forward as well
runcp hf_llama_tp_b2_s128_sgd_cp2_a2a hf_llama_tp --world 2 --batch 2 --seq 128 --opt sgd --rotate alltoall
# cp=4: three ring steps, ranks on both sides of the load-balanced diagonal
runcp hf_llama_tp_b1_s128_sgd_cp4 hf_llama_tp --world 4 --batch 1 --seq 128 --opt sgd
