#!/bin/bash
# Records the PyTorch 2.13 CPU traces of peft LoRA on a bf16 Hugging Face Llama in
# tests/data/traces_lora_dtype_2_13/ (Note [LoRA] in docs/op-rules.md: autocast_adapter_dtype,
# peft's default, keeps the adapters in float32 on a 16-bit base) and exports the bf16 graph.
# Needs the 2.x venv (`make deps`) and gcc. Usage: record_lora_dtype_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_lora_dtype_2_13" "$@"
S="--batch 2 --seq 64 --dtype bf16"
QV=r=8,alpha=16,targets=q_proj,v_proj
run hf_llama_tiny_bf16_b2_s64_adamw_lora_qv hf_llama_tiny $S --opt adamw --lora $QV
run hf_llama_tiny_bf16_b2_s64_adamw_lora_qv_drop hf_llama_tiny $S --opt adamw --lora $QV,dropout=0.05
run hf_llama_tiny_bf16_b2_s64_adamw_lora_qv_bf16 hf_llama_tiny $S --opt adamw --lora $QV,autocast_adapter_dtype=off
g=$out/graphs; mkdir -p "$g"
(cd "$root" && "$py" tools/export_torch.py hf:llama:dtype=bf16 --trace run --set batch=2 --set seq=64 --loss cross_entropy \
   --name hf_llama_tiny_bf16 --provenance "tools/export_torch.py hf:llama:dtype=bf16 (trace_step.py hf_llama_tiny --dtype bf16)" \
   -o "$g/hf_llama_tiny_bf16.json")
