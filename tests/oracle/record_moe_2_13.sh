#!/bin/bash
# Records the PyTorch 2.13 CPU traces of torchtitan-style mixture-of-experts models
# (graphs/moe_models.py) in tests/data/traces_moe_2_13/ and exports their graphs. Each trace's
# CONFIG names the tokens each expert received (`routed=`); tools/validate.py passes them to memsim
# as the graph's routed<L>_e<i> symbols (Note [Routed token counts] in docs/op-rules.md).
# Needs the 2.x venv (`make deps`) and gcc. Usage: record_moe_2_13.sh [OUTDIR] [PYTHON]
set -eu
# NO_SPY_CHECK: gather_backward takes its out-of-place branch under a TorchDispatchMode (Note [MoE routing ops]).
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_moe_2_13" "$@"
NO_SPY_CHECK=1 run moe_mlp_b32_adam        moe_mlp --batch 32 --opt adam
NO_SPY_CHECK=1 run moe_mlp_b64_sgd         moe_mlp --batch 64 --opt sgd
NO_SPY_CHECK=1 run moe_mlp_b32_adamw_ckpt  moe_mlp --batch 32 --opt adamw --checkpoint 'moe\.0'
NO_SPY_CHECK=1 run moe_mlp2_b64_adam       moe_mlp2 --batch 64 --opt adam
NO_SPY_CHECK=1 run moe_mlp2_b16_adam_amp   moe_mlp2 --batch 16 --opt adam --amp bf16
g=$out/graphs; mkdir -p "$g"
for m in moe_mlp moe_mlp2; do
  (cd "$root" && "$py" tools/export_torch.py graphs/moe_models.py:$m --trace run --name $m \
     --provenance "graphs/moe_models.py $m (trace_step.py $m)" -o "$g/$m.json")
done
# The Llama-style decoder with MoE layers the per-rank EP traces use (record_ep_2_13.sh), run on meta
# tensors; its bf16 form (parameters marked float32) for FSDP2's MixedPrecisionPolicy.
(cd "$root/graphs" && "$py" ../tools/export_torch.py llm_zoo.py:moe_decoder_tiny --trace run \
   --input "ids=int64:batch,seq" --set batch=2 --set seq=64 --name moe_decoder_tiny \
   --provenance "graphs/llm_zoo.py moe_decoder_tiny: the Llama-style decoder with SDPA attention and graphs/moe_models.py's MoE layers (d 64, 2 layers, 4 heads, 2 kv heads, 4 experts of ff 128, top 2, vocab 1000), recorded by running under PyTorch 2.13 on meta tensors; token-level cross entropy; input int64 ids [batch,seq]" \
   -o "$g/moe_decoder_tiny.json")
(cd "$root/graphs" && "$py" ../tools/export_torch.py llm_zoo.py:moe_decoder_tiny_bf16 --trace run \
   --input "ids=int64:batch,seq" --set batch=2 --set seq=64 --name moe_decoder_tiny \
   --provenance "graphs/llm_zoo.py moe_decoder_tiny_bf16: moe_decoder_tiny in bf16 (its casts recorded), its parameters and buffers marked float32 (the dtype a model under FSDP2's MixedPrecisionPolicy keeps), recorded by running under PyTorch 2.13 on meta tensors; token-level cross entropy; input int64 ids [batch,seq]" \
   -o "$g/moe_decoder_tiny_bf16.json")
mark_fp32 "$g/moe_decoder_tiny_bf16.json"
