#!/bin/bash
# Records the expert-parallel per-rank CPU traces in tests/data/traces_ep_2_13/: the kit's
# trace_ddp.py --mode ep under torch 2.13 (gloo, one process per rank; torchtitan's ExpertParallel on
# the MoE models of graphs/moe_models.py), checked per rank by tools/validate.py against
# `memsim run --mesh ep=N --moe-routing ranks=...` (Note [Expert parallel] in docs/parallel.md).
# Each rank's CONFIG names its tokens per expert (routed=). Needs the 2.x venv (`make deps`) and gcc.
# Usage: record_ep_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$here/kit/record_common.sh" "$root/tests/data/traces_ep_2_13" "$@"
rund() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_ddp.py" "$@" --mode ep "$out/$name" \
    && echo "done $name"; }
rund moe_mlp_b32_adam_ep2   moe_mlp --world 2 --batch 32 --opt adam --port 29541
rund moe_mlp_b64_sgd_ep4    moe_mlp --world 4 --batch 64 --opt sgd --port 29542
rund moe_mlp2_b32_adam_ep4  moe_mlp2 --world 4 --batch 32 --opt adam --port 29543
# EP borrowing dp_shard (torchtitan): FSDP2 over the world, the experts' FSDP over world / ep ranks
# (moe_mlp at 8 ranks: Shard(1), as the world exceeds its 4 experts; ep 4 of 4: an efsdp of one rank).
rund moe_mlp2_b32_adam_ep2_dp4             moe_mlp2 --world 4 --ep 2 --batch 32 --opt adam --port 29561
rund moe_mlp_b64_sgd_ep4_dp4               moe_mlp --world 4 --ep 4 --batch 64 --opt sgd --port 29562
rund moe_mlp_b32_adam_ep2_dp8              moe_mlp --world 8 --ep 2 --batch 32 --opt adam --port 29563
rund moe_mlp2_b32_adamw_ep4_dp4_noreshard  moe_mlp2 --world 4 --ep 4 --batch 32 --opt adamw --reshard false --port 29564
# The Llama-style decoder with MoE layers (graphs/llm_zoo.py moe_decoder_tiny, its graph in
# tests/data/traces_moe_2_13/graphs): attention and router on the dense mesh, the experts on efsdp.
rund moe_decoder_tiny_b2_s64_adamw_ep2_dp4  moe_decoder_tiny --world 4 --ep 2 --batch 2 --seq 64 --opt adamw --port 29565
rund moe_decoder_tiny_b2_s64_adam_ep4_dp8   moe_decoder_tiny --world 8 --ep 4 --batch 2 --seq 64 --opt adam --port 29566
# torchtitan's flow before fully_shard took a mesh per parameter (torch 2.11, tests/oracle/gpu/record_ep_gpu.py):
# each layer's experts a fully_shard call of their own on efsdp before the layer's (--ep-flow apart)
rund moe_decoder_tiny_b2_s64_adamw_ep2_dp4_apart  moe_decoder_tiny --world 4 --ep 2 --ep-flow apart --batch 2 --seq 64 --opt adamw --port 29568
rund moe_decoder_tiny_b2_s64_adamw_ep4_dp8_apart  moe_decoder_tiny --world 8 --ep 4 --ep-flow apart --batch 2 --seq 64 --opt adamw --port 29569
# HSDP with EP: two replicas of dp_shard=4, ep=2 inside each (the experts' HSDP mesh (dp_replicate, efsdp)).
rund moe_mlp2_b32_adam_ep2_hsdp2x4  moe_mlp2 --world 8 --ep 2 --hsdp 2 --batch 32 --opt adam --port 29567
# EP borrowing dp_shard on each pipeline stage (--mode pp_fsdp2 --ep E): the world mesh (pp, dp_shard) and the
# sparse (pp, efsdp, ep) made first, each stage's part parallelized in turn (ExpertParallel, fully_shard).
# Every microbatch is the same tokens, so each routes as the CONFIG's routed= (one microbatch's counts) says.
rund_pp() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_ddp.py" moe_decoder_tiny "$@" --mode pp_fsdp2 \
    --seq 64 "$out/$name" && echo "done $name"; }
rund_pp moe_decoder_tiny_b4_s64_adamw_pp2_dp4_ep2_1f1b_m4          --world 8 --pp 2 --ep 2 --batch 4 --opt adamw --schedule 1f1b --microbatches 4 --reshard false --port 29601
rund_pp moe_decoder_tiny_b4_s64_sgd_pp2_dp2_ep2_gpipe_m4           --world 4 --pp 2 --ep 2 --batch 4 --opt sgd --schedule gpipe --microbatches 4 --reshard false --port 29611
rund_pp moe_decoder_tiny_b4_s64_adamw_pp2_dp4_ep4_1f1b_m2_reshard  --world 8 --pp 2 --ep 4 --batch 4 --opt adamw --schedule 1f1b --microbatches 2 --reshard true --port 29612
# two stages per rank (2 layers, 4 stages: the embedding and the norm + head stages hold no block)
rund_pp moe_decoder_tiny_b4_s64_adamw_pp2_dp2_ep2_zbv_m4           --world 4 --pp 2 --ep 2 --batch 4 --opt adamw --schedule zbv --stages-per-rank 2 --microbatches 4 --reshard false --port 29613
rund_pp moe_decoder_tiny_b4_s64_sgd_pp2_dp2_ep2_interleaved1f1b_v2_m4 --world 4 --pp 2 --ep 2 --batch 4 --opt sgd --schedule interleaved1f1b --stages-per-rank 2 --microbatches 4 --reshard false --port 29614
