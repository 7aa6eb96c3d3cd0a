#!/bin/bash
# Records the PyTorch 2.13 CPU traces of torchtune's activation offloading in
# tests/data/traces_offload_2_13/ (Note [Activation offloading] in docs/op-rules.md): a Hugging Face
# Llama (trace_step.py's hf_llama_tiny) under torchtune's OffloadActivations(use_pin_memory=False,
# use_streams=False, min_offload_size=N), the kit's --offload-activations. TORCHTUNE_OFFLOADING names
# torchtune's torchtune/training/_activation_offloading.py (recorded with commit bd2a0fc7 of
# pytorch/torchtune: `git show bd2a0fc7:torchtune/training/_activation_offloading.py > FILE`).
# Needs the 2.x venv (`make deps`) and gcc. Usage: record_offload_2_13.sh [OUTDIR] [PYTHON]
set -eu
: "${TORCHTUNE_OFFLOADING:?set it to the path of torchtune/training/_activation_offloading.py}"
export TORCHTUNE_OFFLOADING
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_offload_2_13" "$@"
S="--batch 2 --seq 64"
LAYERS='model\.layers\.[0-9]+'
QV=r=8,alpha=16,targets=q_proj,v_proj
# full fine-tuning and LoRA, torchtune's default threshold (1024 bytes) and a larger one
run hf_llama_tiny_b2_s64_adamw_tto hf_llama_tiny $S --opt adamw --offload-activations min_size=1024
run hf_llama_tiny_b2_s64_adamw_tto_64k hf_llama_tiny $S --opt adamw --offload-activations min_size=65536
run hf_llama_tiny_b2_s64_adamw_lora_qv_tto hf_llama_tiny $S --opt adamw --lora $QV --offload-activations min_size=1024
# with checkpointed decoder layers (torchtune's recipes: checkpoint + offloading)
run hf_llama_tiny_b2_s64_adamw_tto_ckpt hf_llama_tiny $S --opt adamw --checkpoint "$LAYERS" --offload-activations min_size=1024
run hf_llama_tiny_b2_s64_adamw_lora_qv_tto_ckpt hf_llama_tiny $S --opt adamw --lora $QV --checkpoint "$LAYERS" --offload-activations min_size=1024
