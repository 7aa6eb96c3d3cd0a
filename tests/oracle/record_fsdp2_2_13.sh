#!/bin/bash
# Records the FSDP2 (torch.distributed.fsdp.fully_shard) per-rank CPU traces in
# tests/data/traces_fsdp2_2_13/: the kit's trace_ddp.py --mode fsdp2 under torch 2.13 (gloo, one
# process per rank; fully_shard on each block, then the root). Needs the 2.x venv (`make deps`)
# and gcc. Usage: record_fsdp2_2_13.sh [OUTDIR] [PYTHON]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$here/kit/record_common.sh" "$root/tests/data/traces_fsdp2_2_13" "$@"
rund() { local name=$1; shift
  OMP_NUM_THREADS=1 LD_PRELOAD=$spy "$py" "$root/tests/oracle/kit/trace_ddp.py" "$@" --mode fsdp2 "$out/$name" \
    && echo "done $name"; }
rund mlp_b64_adam_fsdp2           mlp --batch 64 --opt adam
rund mlp_b64_adam_fsdp2_noreshard mlp --batch 64 --opt adam --reshard false
rund mlp_b64_adam_fsdp2_w3        mlp --batch 64 --opt adam --world 3
rund mlp_b64_adam_fsdp2_bf16      mlp --batch 64 --opt adam --mp bf16
rund mlp_b64_adam_hsdp2x2         mlp --batch 64 --opt adam --world 4 --hsdp 2
rund cs336_small_b2_s64_adamw_fsdp2           cs336_small --batch 2 --seq 64 --opt adamw
rund cs336_small_b2_s64_adamw_fsdp2_noreshard cs336_small --batch 2 --seq 64 --opt adamw --reshard false
# torchao float8 with FSDP2's float8 all-gather (needs torchao; Note [FP8 training]); the graph is
# tests/data/traces_fp8_2_13/graphs/act_mlp_a.json
rund act_mlp_a_b64_adam_fsdp2                  act_mlp_a --batch 64 --opt adam
rund act_mlp_a_b64_adam_fsdp2_fp8              act_mlp_a --batch 64 --opt adam --fp8 tensorwise
rund act_mlp_a_b64_adam_fsdp2_fp8_noreshard    act_mlp_a --batch 64 --opt adam --fp8 tensorwise --reshard false
rund act_mlp_a_b64_adam_fsdp2_fp8_bf16         act_mlp_a --batch 64 --opt adam --fp8 tensorwise --mp bf16
# reshard_after_forward=2 on 4 ranks: after forward each rank keeps a half of its pair's gathered
# parameters, all-gathered over the pair in backward.
rund mlp_b64_adam_fsdp2_w4_reshard2             mlp --batch 64 --opt adam --world 4 --reshard 2
rund cs336_small_b2_s64_adamw_fsdp2_w4_reshard2 cs336_small --batch 2 --seq 64 --opt adamw --world 4 --reshard 2
