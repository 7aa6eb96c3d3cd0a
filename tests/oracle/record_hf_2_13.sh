#!/bin/bash
# Records the PyTorch 2.13 CPU traces of Hugging Face decoders in tests/data/traces_hf_2_13/ (one
# training step each of trace_step.py's hf_*_tiny models: transformers config classes with small
# sizes, SDPA attention, use_cache=False; Note [Hugging Face decoders] in docs/exporter.md), and
# exports their graphs with `export_torch.py hf:FAMILY`. Needs the 2.x venv (`make deps`: .venv with
# torch==2.13.0, transformers==5.24.0, peft==0.21.2) and gcc. Usage: record_hf_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_hf_2_13" "$@"
S="--batch 2 --seq 64"
LAYERS='model\.layers\.[0-9]+'
QV=r=8,alpha=16,targets=q_proj,v_proj
ALL=r=8,alpha=16,targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
# full fine-tuning, AdamW: every family
for m in llama qwen2 mistral gemma; do
  run hf_${m}_tiny_b2_s64_adamw hf_${m}_tiny $S --opt adamw
done
# Llama: model.gradient_checkpointing_enable() (non-reentrant checkpoint of each decoder layer)
run hf_llama_tiny_b2_s64_adamw_gc hf_llama_tiny $S --opt adamw --gradient-checkpointing
# Llama: save_on_cpu, bf16 autocast
run hf_llama_tiny_b2_s64_adamw_offload hf_llama_tiny $S --opt adamw --save-on-cpu on
run hf_llama_tiny_b2_s64_adamw_amp hf_llama_tiny $S --opt adamw --amp bf16
# Llama with attn_implementation="eager" (repeat_kv, matmul, the additive causal mask, softmax in fp32)
run hf_llama_tiny_eager_b2_s64_adamw hf_llama_tiny_eager $S --opt adamw
# Llama LoRA: q_proj,v_proj and every Linear, with and without checkpointing of the decoder layers
run hf_llama_tiny_b2_s64_adamw_lora_qv hf_llama_tiny $S --opt adamw --lora $QV
run hf_llama_tiny_b2_s64_adamw_lora_qv_ckpt hf_llama_tiny $S --opt adamw --lora $QV --checkpoint "$LAYERS"
run hf_llama_tiny_b2_s64_adamw_lora_all hf_llama_tiny $S --opt adamw --lora $ALL
run hf_llama_tiny_b2_s64_adamw_lora_all_ckpt hf_llama_tiny $S --opt adamw --lora $ALL --checkpoint "$LAYERS"
run hf_llama_tiny_b2_s64_adamw_lora_qv_gc hf_llama_tiny $S --opt adamw --lora $QV --gradient-checkpointing
run hf_llama_tiny_b2_s64_adamw_lora_qv_offload hf_llama_tiny $S --opt adamw --lora $QV --save-on-cpu on
# the other families' LoRA, with and without model.gradient_checkpointing_enable()
for m in qwen2 mistral gemma; do
  run hf_${m}_tiny_b2_s64_adamw_lora_qv hf_${m}_tiny $S --opt adamw --lora $QV
  run hf_${m}_tiny_b2_s64_adamw_lora_qv_gc hf_${m}_tiny $S --opt adamw --lora $QV --gradient-checkpointing
done
# Mixtral (4 experts, top 2): transformers' grouped_mm experts; recorded without a dispatch mode, as the
# MoE traces are (Note [MoE routing ops]: gather/index backward under a mode take other branches)
NO_SPY_CHECK=1 run hf_mixtral_tiny_b2_s64_adamw hf_mixtral_tiny $S --opt adamw
# models trained with their own loss (labels=): GPT-2 (causal LM), BERT (masked LM), ViT (image classification)
for m in gpt2 bert; do
  run hf_${m}_tiny_b2_s64_adamw hf_${m}_tiny $S --opt adamw
done
run hf_vit_tiny_b2_adamw hf_vit_tiny --batch 2 --opt adamw
# the graphs, exported from the same config classes (export_torch.py hf:FAMILY)
g=$out/graphs; mkdir -p "$g"
for m in llama qwen2 mistral gemma; do
  (cd "$root" && "$py" tools/export_torch.py hf:$m --trace run --set batch=2 --set seq=64 --loss cross_entropy \
     --name hf_${m}_tiny --provenance "tools/export_torch.py hf:$m (trace_step.py hf_${m}_tiny)" -o "$g/hf_${m}_tiny.json")
done
# Mixtral's own default is labels= (the model's loss); the kit's step takes the logits into --loss ce
(cd "$root" && "$py" tools/export_torch.py hf:mixtral:labels=false --trace run --set batch=2 --set seq=64 \
   --loss cross_entropy --name hf_mixtral_tiny \
   --provenance "tools/export_torch.py hf:mixtral:labels=false (trace_step.py hf_mixtral_tiny)" -o "$g/hf_mixtral_tiny.json")
(cd "$root" && "$py" tools/export_torch.py hf:llama:attn=eager --trace run --set batch=2 --set seq=64 --loss cross_entropy \
   --name hf_llama_tiny_eager --provenance "tools/export_torch.py hf:llama:attn=eager (trace_step.py hf_llama_tiny_eager)" \
   -o "$g/hf_llama_tiny_eager.json")
for m in gpt2 bert vit; do
  (cd "$root" && "$py" tools/export_torch.py hf:$m --trace run --set batch=2 --set seq=64 \
     --name hf_${m}_tiny --provenance "tools/export_torch.py hf:$m (trace_step.py hf_${m}_tiny)" -o "$g/hf_${m}_tiny.json")
done
