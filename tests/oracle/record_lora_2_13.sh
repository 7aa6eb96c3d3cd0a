#!/bin/bash
# Records the PyTorch 2.13 CPU traces of PEFT LoRA fine-tuning in tests/data/traces_lora_2_13/ (one
# training step each, trace_step.py --lora: the model wrapped by peft's get_peft_model as a user
# does), and exports the graphs they are checked on from the same peft models (the exporter writes
# the adapters as the graph's "lora" key, Note [LoRA]). Needs the 2.x venv (`make deps`: .venv with
# torch==2.13.0, peft==0.21.2) and gcc. Usage: record_lora_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_lora_2_13" "$@"
# nanoGPT (GPT-2 small): adapters on every attention and MLP Linear (c_attn, c_proj, c_fc)
L=r=8,alpha=16,targets=c_attn,c_proj,c_fc
run gpt2_small_b2_s64_adamw_lora       gpt2_small --batch 2 --seq 64 --opt adamw --lora $L
run gpt2_small_b2_s64_adamw_lora_drop  gpt2_small --batch 2 --seq 64 --opt adamw --lora $L,dropout=0.05
run gpt2_small_b2_s64_adamw_lora_ckpt  gpt2_small --batch 2 --seq 64 --opt adamw --lora $L --checkpoint 'transformer\.h\.[0-9]+'
run gpt2_small_b2_s64_adamw_lora_drop_ckpt gpt2_small --batch 2 --seq 64 --opt adamw --lora $L,dropout=0.1 --checkpoint 'transformer\.h\.[0-9]+'
# the query/key/value projection only, rank 16, SGD
run gpt2_small_b2_s128_sgd_lora_attn   gpt2_small --batch 2 --seq 128 --opt sgd --lora r=16,alpha=32,targets=c_attn
# DoRA (use_dora=True): the magnitude vector and the per-forward weight norm (Note [LoRA]), with dropout, checkpointed
run gpt2_small_b2_s64_adamw_dora       gpt2_small --batch 2 --seq 64 --opt adamw --lora $L,dora=on
run gpt2_small_b2_s64_adamw_dora_drop  gpt2_small --batch 2 --seq 64 --opt adamw --lora $L,dora=on,dropout=0.05
run gpt2_small_b2_s64_adamw_dora_ckpt  gpt2_small --batch 2 --seq 64 --opt adamw --lora $L,dora=on --checkpoint 'transformer\.h\.[0-9]+'
# the graphs: the base model exported under the same torch (memsim run --lora SPEC), and the peft
# models themselves (graphs/llm_zoo.py builders calling get_peft_model; the exporter writes "lora")
g=$out/graphs; mkdir -p "$g"
PYTHON=$py "$root/graphs/generate.sh" "$g" nanogpt_gpt2_small
NANO="nanoGPT GPT-2 small (graphs/llm_models.py) wrapped by peft get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=[c_attn, c_proj, c_fc]"
lora_graph() { name=$1 builder=$2 prov=$3
  (cd "$root" && "$py" tools/export_torch.py graphs/llm_zoo.py:$builder --trace run --input "ids=int64:batch,seq" \
     --set batch=8 --set seq=1024 --loss cross_entropy --name "$name" --provenance "$prov" -o "$g/$name.json"); }
lora_graph nanogpt_gpt2_small_lora gpt2_small_lora "$NANO)); trace_step.py gpt2_small --lora r=8,alpha=16,targets=c_attn,c_proj,c_fc"
lora_graph nanogpt_gpt2_small_lora_drop gpt2_small_lora_drop "$NANO, lora_dropout=0.05)); trace_step.py gpt2_small --lora r=8,alpha=16,targets=c_attn,c_proj,c_fc,dropout=0.05"
