#!/bin/bash
# Records the PyTorch 2.13 CPU traces of QLoRA-style fine-tuning in tests/data/traces_qlora_2_13/: the
# model's Linears (all but lm_head) replaced by bitsandbytes 0.50.2 Linear4bit (NF4 / FP4, with and
# without double quantization, fp32 or bf16 compute) or Linear8bitLt (LLM.int8 weights), quantized on
# .to("cpu"), then wrapped by peft's get_peft_model (trace_step.py --quantize SPEC --lora SPEC; Note
# [Quantized base weights]). Needs the 2.x venv (`make deps`: .venv with torch==2.13.0, peft==0.21.2,
# bitsandbytes==0.50.2) and gcc. Usage: record_qlora_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_qlora_2_13" "$@"
# nanoGPT (GPT-2 small), adapters on every attention and MLP Linear (c_attn, c_proj, c_fc)
L=r=8,alpha=16,targets=c_attn,c_proj,c_fc
G="gpt2_small --batch 2 --seq 64 --opt adamw"
run gpt2_small_b2_s64_adamw_nf4_lora          $G --quantize nf4 --lora $L
run gpt2_small_b2_s64_adamw_nf4dq_lora        $G --quantize nf4,double_quant=on --lora $L
run gpt2_small_b2_s64_adamw_fp4dq_lora        $G --quantize fp4,double_quant=on --lora $L
run gpt2_small_b2_s64_adamw_fp4_lora          $G --quantize fp4 --lora $L
run gpt2_small_b2_s64_adamw_int8_lora         $G --quantize int8 --lora $L
run gpt2_small_b2_s64_adamw_nf4dq_lora_ckpt   $G --quantize nf4,double_quant=on --lora $L --checkpoint 'transformer\.h\.[0-9]+'
run gpt2_small_b2_s64_adamw_int8_lora_ckpt    $G --quantize int8 --lora $L --checkpoint 'transformer\.h\.[0-9]+'
run gpt2_small_b2_s64_adamw_nf4dq_bf16_lora   $G --quantize nf4,double_quant=on,compute=bf16 --lora $L
run gpt2_small_b2_s64_adamw_nf4dq_bf16_lora_ckpt $G --quantize nf4,double_quant=on,compute=bf16 --lora $L --checkpoint 'transformer\.h\.[0-9]+'
# no adapters: the quantized Linears frozen, the embeddings, LayerNorms and the head trained
run gpt2_small_b2_s64_adamw_nf4dq             $G --quantize nf4,double_quant=on
