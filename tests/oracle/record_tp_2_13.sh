#!/bin/bash
# Records the PyTorch 2.13 per-rank CPU traces of tensor parallelism in tests/data/traces_tp_2_13/
# (trace_ddp.py --mode tp: gloo, one process per rank, parallelize_module on a Hugging Face decoder;
# Note [Tensor parallel] in docs/parallel.md). Their graphs are tests/data/traces_hf_2_13/graphs
# (record_hf_2_13.sh) and graphs/ here. Needs the 2.x venv (`make deps`) and gcc. Usage: record_tp_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_tp_2_13" "$@"
runtp() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$here/kit/trace_ddp.py" "$@" "$out/$name" && echo "done $name"; }
# tp=2 over the decoder layers (q/k/v, gate/up ColwiseParallel; o, down RowwiseParallel)
runtp hf_llama_tiny_b2_s64_adamw_tp2 hf_llama_tiny --mode tp --tp-plan layers --world 2 --batch 2 --seq 64 --opt adamw
# a small vocabulary (hf_llama_tp: hidden 128, vocab 128), so that the decoder layers hold the peak
runtp hf_llama_tp_b2_s128_adamw_tp2 hf_llama_tp --mode tp --tp-plan layers --world 2 --batch 2 --seq 128 --opt adamw
# torchtitan's whole plan (the embedding RowwiseParallel, the head ColwiseParallel with replicated
# logits), without and with sequence parallelism (the positions given to the model: its embedding
# output is the local sequence shard)
runtp hf_llama_tp_b2_s128_adamw_tp2_torchtitan hf_llama_tp --mode tp --tp-plan torchtitan --world 2 --batch 2 --seq 128 --opt adamw
runtp hf_llama_tp_b2_s128_adamw_tp2_torchtitan_sp hf_llama_tp --mode tp --tp-plan torchtitan --sp --world 2 --batch 2 --seq 128 --opt adamw
# torchtitan's default with TP: the logits stay sharded on the vocabulary into loss_parallel()
runtp hf_llama_tp_b2_s128_adamw_tp2_torchtitan_lp hf_llama_tp --mode tp --tp-plan torchtitan --loss-parallel --world 2 --batch 2 --seq 128 --opt adamw
# its graph, exported from the same config (hf_llama_tiny's is record_hf_2_13.sh's)
mkdir -p "$out/graphs"
(cd "$root" && "$py" tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344 --trace run \
   --set batch=2 --set seq=128 --loss cross_entropy --name hf_llama_tp \
   --provenance "tools/export_torch.py hf:llama:vocab_size=128,hidden_size=128,intermediate_size=344 (trace_step.py hf_llama_tp)" \
   -o "$out/graphs/hf_llama_tp.json")
