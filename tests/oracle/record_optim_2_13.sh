#!/bin/bash
# Records the PyTorch 2.13 CPU traces of the quantized, paged and factored optimizers in
# tests/data/traces_optim_2_13/ (one training step each): bitsandbytes' Adam8bit, AdamW8bit,
# PagedAdamW8bit, PagedAdamW and Lion8bit (on a CPU the paged ones fall back to plain tensors), and
# torch.optim.Adafactor. The models mix parameters below and above bitsandbytes' min_8bit_size
# (4096 elements); --warmup K records a steady step (the states exist). They are checked on the
# graphs exported under 2.13 (tests/data/traces_2_13/graphs). Needs the 2.x venv (`make deps`:
# .venv with torch==2.13.0, bitsandbytes==0.50.2) and gcc. Usage: record_optim_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$root/tests/oracle/kit/record_common.sh" "$root/tests/data/traces_optim_2_13" "$@"
# mlp: 100,000-, 10,000- and 1,000-element weights (8-bit) and 100- and 10-element biases (fp32 states)
run mlp_b64_adam8bit              mlp --batch 64 --opt adam8bit
run mlp_b64_adamw8bit_warm2       mlp --batch 64 --opt adamw8bit --warmup 2
run mlp_b64_paged_adamw8bit       mlp --batch 64 --opt paged_adamw8bit
run mlp_b64_paged_adamw           mlp --batch 64 --opt paged_adamw
run mlp_b64_lion8bit              mlp --batch 64 --opt lion8bit
run mlp_b64_adafactor             mlp --batch 64 --opt adafactor
run mlp_b64_adafactor_warm2       mlp --batch 64 --opt adafactor --warmup 2
# MNIST CNN: 4-D convolution weights (Adafactor factors the last two dimensions)
run mnist_cnn_b32_adafactor       mnist_cnn --batch 32 --opt adafactor
run mnist_cnn_b32_adam8bit        mnist_cnn --batch 32 --opt adam8bit
# language models: embeddings and Linears (8-bit), LayerNorm / RMSNorm weights (fp32 states)
NO_SPY_CHECK=1 run cs336_small_b2_s128_adam8bit  cs336_small --batch 2 --seq 128 --opt adam8bit
run cs336_small_b2_s64_adamw8bit_warm1 cs336_small --batch 2 --seq 64 --opt adamw8bit --warmup 1
NO_SPY_CHECK=1 run cs336_small_b2_s128_adafactor cs336_small --batch 2 --seq 128 --opt adafactor
run gpt2_small_b2_s64_adamw8bit   gpt2_small --batch 2 --seq 64 --opt adamw8bit
run gpt2_small_b2_s64_paged_adamw gpt2_small --batch 2 --seq 64 --opt paged_adamw
run gpt2_small_b2_s64_adafactor_warm1 gpt2_small --batch 2 --seq 64 --opt adafactor --warmup 1
