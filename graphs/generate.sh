#!/bin/bash
# Regenerates every model-zoo graph in graphs/ from its PyTorch definition.
# Deterministic: running it twice gives byte-identical files (tests/export checks the committed files).
# Needs Debian's python3-torch / python3-torchvision (PyTorch 1.13) under /usr/bin/python3.
#   graphs/generate.sh            # all graphs
#   graphs/generate.sh OUTDIR     # write elsewhere (used by the tests)
#   graphs/generate.sh OUTDIR mlp resnet18   # only some graphs
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${1:-$here}
shift || true
mkdir -p "$out"
PY=${PYTHON:-/usr/bin/python3}  # PYTHON=.venv/bin/python exports under torch 2.x
EXPORT="$PY $root/tools/export_torch.py"
M=graphs/models.py
TS="trace_step.py"  # the oracle script that records the real traces (named, not located)
Z=graphs/llm_zoo.py
wanted=" $* "

VENV_PY=${VENV_PYTHON:-$root/.venv/bin/python}  # the 2.x venv (make deps): transformers for genhf
genhf() {  # genhf NAME PROVENANCE BATCH SEQ SPEC: a transformers causal LM (export_torch.py hf:SPEC), under 2.x
  local name=$1 prov=$2 batch=$3 seq=$4 spec=$5
  if [ "$wanted" != "  " ] && [[ "$wanted" != *" $name "* ]]; then return 0; fi
  (cd "$root" && $VENV_PY tools/export_torch.py "hf:$spec" --set "batch=$batch" --set "seq=$seq" --name "$name" \
     --loss cross_entropy --provenance "$prov" -o "$out/$name.json")
}

gen() {  # gen NAME PROVENANCE EXPORT-ARGS...
  local name=$1 prov=$2; shift 2
  if [ "$wanted" != "  " ] && [[ "$wanted" != *" $name "* ]]; then return 0; fi
  (cd "$root" && $EXPORT "$@" --name "$name" --loss cross_entropy --provenance "$prov" -o "$out/$name.json")
}

gen mlp "seed 002: nn.Sequential(Linear(1000,100), ReLU, 3x(Linear(100,100), ReLU), Linear(100,10)); $TS mlp; input float32 [batch,1000]" \
  $M:mlp --input "x=batch,1000"
gen mnist_cnn "seed 001: nn.Sequential(Conv2d(1,32,5), ReLU, MaxPool2d(2), Conv2d(32,64,5), ReLU, MaxPool2d(2), Flatten, Linear(1024,1024), ReLU, Dropout(0.5), Linear(1024,10)); $TS mnist_cnn; input float32 [batch,1,28,28]" \
  $M:mnist_cnn --input "x=batch,1,28,28"
gen alexnet "AlexNet of Krizhevsky et al. 2012 (graphs/models.py alexnet_classic: single tower, no LRN, 62,378,344 params); input float32 [batch,3,227,227]" \
  $M:alexnet_classic --input "x=batch,3,227,227"
gen alexnet_torchvision "torchvision 0.14 models.alexnet(weights=None) (torchvision's single-GPU AlexNet variant, 61,100,840 params); $TS alexnet; input float32 [batch,3,224,224]" \
  torchvision:alexnet --input "x=batch,3,224,224"
gen vgg11 "torchvision 0.14 models.vgg11(weights=None); $TS vgg11; input float32 [batch,3,224,224]" \
  torchvision:vgg11 --input "x=batch,3,224,224"
gen vgg16 "torchvision 0.14 models.vgg16(weights=None); input float32 [batch,3,224,224]" \
  torchvision:vgg16 --input "x=batch,3,224,224"
gen resnet18 "torchvision 0.14 models.resnet18(weights=None) (ReLU(inplace=True), out += identity); $TS resnet18; input float32 [batch,3,224,224]" \
  torchvision:resnet18 --input "x=batch,3,224,224"
gen resnet50 "torchvision 0.14 models.resnet50(weights=None) (ReLU(inplace=True), out += identity); $TS resnet50; input float32 [batch,3,224,224]" \
  torchvision:resnet50 --input "x=batch,3,224,224"
gen mobilenet_v2 "torchvision 0.14 models.mobilenet_v2(weights=None) (ReLU6(inplace=True)); $TS mobilenet_v2; input float32 [batch,3,224,224]" \
  torchvision:mobilenet_v2 --input "x=batch,3,224,224"
gen vit_b16 "torchvision 0.14 models.vit_b_16(weights=None) (nn.MultiheadAttention expanded as torch 1.13 runs it in training); input float32 [batch,3,224,224]" \
  torchvision:vit_b_16 --input "x=batch,3,224,224"
gen bert_base "BertCls(seq): TextEncoder (Embedding 30522x768 + learned positions, LayerNorm, Dropout 0.1, nn.TransformerEncoder of 12 post-LN GELU layers, 12 heads, ff 3072, batch_first) + Linear(768,2) on token 0; $TS bert_base; input int64 ids [batch,seq], seq also sizes the position table" \
  $M:bert_base --set seq=128
gen bert_small "BertCls(layers=4, d=256, heads=4, ff=1024); $TS bert_small; input int64 ids [batch,128]" \
  $M:bert_small
gen gpt2_small "GPT-2 small (graphs/models.py GPT2): 12 pre-LN layers, d 768, 12 heads, vocab 50257, context 1024, learned positions, GELU(tanh) MLP, explicit causal masked_fill attention, LM head tied to wte; token-level cross entropy; input int64 ids [batch,1024]" \
  $M:gpt2_small
gen multimodal_bert "seed 003: MultimodalBert(): TabAE (BatchNorm1d(100) -> Linear(100,64) -> relu) + BERT-base TextEncoder -> Linear(768,128) on token 0, cat, Linear(192,2); $TS multimodal_bert; inputs int64 ids [batch,seq], float32 x_tab [batch,100]" \
  $M:multimodal_bert --set seq=128

# Language models, recorded as they run (--trace run, meta tensors: no weight is allocated).
# graphs/llm_models.py is a verbatim copy of the oracle's model file (the CS336 course transformer
# and nanoGPT); graphs/llm_zoo.py holds the builders and the Llama-style decoder.
IDS_LM="ids=int64:batch,seq"
genlm() {  # genlm NAME PROVENANCE BUILDER BATCH SEQ [EXPORT-ARGS...]
  local name=$1 prov=$2 builder=$3 b=$4 s=$5; shift 5
  if [ "$wanted" != "  " ] && [[ "$wanted" != *" $name "* ]]; then return 0; fi
  (cd "$root" && $EXPORT $Z:$builder --trace run --input "$IDS_LM" --set batch=$b --set seq=$s "$@" \
     --name "$name" --provenance "$prov" -o "$out/$name.json")
}
genlm2() {  # genlm2 NAME PROVENANCE BUILDER BATCH SEQ: genlm under the 2.x venv (SDPA, recorded under PyTorch 2.13)
  local name=$1 prov=$2 builder=$3 b=$4 s=$5; shift 5
  if [ "$wanted" != "  " ] && [[ "$wanted" != *" $name "* ]]; then return 0; fi
  (cd "$root" && $VENV_PY tools/export_torch.py $Z:$builder --trace run --input "$IDS_LM" --set batch=$b --set seq=$s "$@" \
     --name "$name" --provenance "$prov" -o "$out/$name.json")
}
NANO="nanoGPT GPT (karpathy/nanoGPT model.py, June 2023; graphs/llm_models.py): bias=False, dropout 0, non-flash attention (tril mask buffer, masked_fill, softmax), GELU MLP, learned positions, wte tied to lm_head, vocab 50304, block 1024; token-level cross entropy; input int64 ids [batch,seq]"
genlm nanogpt_gpt2_small "$NANO; GPT-2 small: 12 layers, d 768, 12 heads; $TS gpt2_small" gpt2_small 8 1024
genlm nanogpt_gpt2_medium "$NANO; GPT-2 medium: 24 layers, d 1024, 16 heads" gpt2_medium 8 1024
genlm nanogpt_gpt2_large "$NANO; GPT-2 large: 36 layers, d 1280, 20 heads" gpt2_large 8 1024
genlm nanogpt_gpt2_xl "$NANO; GPT-2 XL: 48 layers, d 1600, 25 heads" gpt2_xl 8 1024
CS="CS336 BasicsTransformerLM (Stanford CS336 cs336-basics, graphs/llm_models.py): pre-norm RMSNorm, RoPE cache [2,seq,d_head/2], einsum Linear and attention, hand-written softmax with a torch.where causal mask, SwiGLU, index embedding, untied head, vocab 10000; context length = seq; F.cross_entropy over the flattened logits; input int64 ids [batch,seq]"
genlm cs336_small "$CS; small: d 768, 12 layers, 12 heads, d_ff 3072; $TS cs336_small; optimizer: the course's CS336AdamW, recorded (memsim run --optimizer recorded)" cs336_small 32 256 --optimizer graphs/llm_models.py:CS336AdamW
genlm cs336_small_course_loss "$CS; small, with the course's hand-written cross entropy (cs336_cross_entropy: max-shifted log-softmax, gather, mean) returned by a wrapper that also returns the logits (held until after backward, as \`out = model(x)\`); $TS cs336_small --loss cs336" cs336_small_loss_held 32 256 --input "targets=int64:batch,seq" --loss output --optimizer graphs/llm_models.py:CS336AdamW
genlm cs336_medium "$CS; medium: d 1024, 24 layers, 16 heads, d_ff 4096; $TS cs336_medium; optimizer: the course's CS336AdamW, recorded (memsim run --optimizer recorded)" cs336_medium 32 256 --optimizer graphs/llm_models.py:CS336AdamW
LL="Llama-style decoder (graphs/llm_zoo.py, Hugging Face LlamaForCausalLM eager attention): RMSNorm, RoPE (cos/sin buffers [seq, d_head], rotate_half), SwiGLU, grouped-query attention (k/v expanded and reshaped), causal mask buffer, float32 softmax, vocab 128256; token-level cross entropy; input int64 ids [batch,seq]"
genlm llama_1b "$LL; Llama 3.2 1B sizes: d 2048, 16 layers, 32 heads, 8 kv heads, d_ff 8192, tied embeddings" llama_1b 4 2048
genlm llama_8b "$LL; Llama 3 8B sizes: d 4096, 32 layers, 32 heads, 8 kv heads, d_ff 14336" llama_8b 1 2048
genhf llama3_8b "Llama 3.1 8B in bf16 (model.to(torch.bfloat16), as loaded with torch_dtype=torch.bfloat16): transformers 5.24 LlamaForCausalLM from its config (d 4096, 32 layers, 32 heads, 8 kv heads, d_ff 14336, vocab 128256, rope_theta 500000, untied head), SDPA attention, use_cache=False, recorded by running under PyTorch 2.13 (export_torch.py hf:llama:...; Note [Hugging Face decoders]); F.cross_entropy over the flattened logits; input int64 input_ids [batch,seq]" \
  2 2048 llama:hidden_size=4096,intermediate_size=14336,num_hidden_layers=32,num_attention_heads=32,num_key_value_heads=8,vocab_size=128256,max_position_embeddings=131072,rope_theta=500000.0,tie_word_embeddings=False,dtype=bf16
genhf llama3_70b "Llama 3.1 70B in bf16 (model.to(torch.bfloat16), as loaded with torch_dtype=torch.bfloat16): transformers 5.24 LlamaForCausalLM from its config (d 8192, 80 layers, 64 heads, 8 kv heads, d_ff 28672, vocab 128256, rope_theta 500000, untied head), SDPA attention, use_cache=False, recorded by running under PyTorch 2.13 (export_torch.py hf:llama:...; Note [Hugging Face decoders]); F.cross_entropy over the flattened logits; input int64 input_ids [batch,seq]" \
  1 8192 llama:hidden_size=8192,intermediate_size=28672,num_hidden_layers=80,num_attention_heads=64,num_key_value_heads=8,vocab_size=128256,max_position_embeddings=131072,rope_theta=500000.0,tie_word_embeddings=False,dtype=bf16
genlm2 mixtral_8x7b "Mixtral 8x7B sizes in torchtitan's MoE form (graphs/llm_zoo.py mixtral_8x7b): the Llama-style decoder (RMSNorm, RoPE theta 1e6, grouped-query attention with k/v repeated, F.scaled_dot_product_attention(is_causal=True)) whose MLPs are graphs/moe_models.py's MoE (a softmax router, top 2 of 8 experts, tokens sorted by expert, the experts as [E, ...] weights run on their rows by the routed split, outputs scaled and scatter-added back); d 4096, 32 layers, 32 heads, 8 kv heads, expert d_ff 14336, vocab 32000, untied head, in bf16; recorded by running under PyTorch 2.13 on meta tensors (routing balanced: Note [Routed token counts]); token-level cross entropy; input int64 ids [batch,seq]" \
  mixtral_8x7b 1 4096
