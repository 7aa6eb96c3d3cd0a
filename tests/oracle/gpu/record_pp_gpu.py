#!/usr/bin/env python3
"""The pipeline ranks of Llama 3.1 70B on 64 GPUs, recorded on ONE GPU through a fake process group.

docs/scenarios/llm_parallel.md section 3 simulates torchtitan's 3-D mesh for Llama 3.1 70B on 64 GPUs:
PP 4 x FSDP2 2 x TP 8 with sequence parallelism and loss_parallel, MixedPrecisionPolicy(bf16, fp32),
reshard_after_forward=False, meta-device init, AdamW, a local batch of 8 sequences of 8192 tokens in 8
microbatches of 1. Its ranks differ only by their pp coordinate. This script runs one process per pp
rank (the global rank pp_rank * 16: dp_shard 0, tp 0) through PyTorch's `fake` process group, as
record_ranks_gpu.py does for FSDP2: every collective and every p2p send/recv is a no-op, every buffer
(the stage's shards, FSDP2's all-gather and reduce-scatter buffers, the TP/SP redistributions, the
pipeline's recv buffers and the grads it sends back) is allocated as on the real rank, on the real
CUDA caching allocator, streams and kernels. What it misses: NCCL's own buffers, the timing of the
other ranks, and NCCL's recordStream on the tensors a p2p op sends (their free is not delayed here).
The recv buffers keep whatever the allocator gave (their values are not the previous stage's): the
memory of a dense decoder does not depend on them.

The stage is built as the CPU kit's `trace_ddp.py --mode pp_tp --init meta` builds it (HFStage,
torchtitan's stage split, torchtitan's TP plan with SP and loss_parallel, full AC of every decoder
layer, fully_shard on each layer then the stage, to_empty on the GPU, every local shard initialised),
its loss the kit's cross_entropy(logits.view(-1, V), y.view(-1)) inside loss_parallel().

Cases (each pp rank in a fresh process, under PYTORCH_ALLOC_CONF expandable_segments:True as the page's
plans, the default allocator where --alloc-confs names it):
  llama3_70b_1f1b_ac          Schedule1F1B, every decoder layer checkpointed
  llama3_70b_interleaved_ac   ScheduleInterleaved1F1B, two stages per rank, every layer checkpointed
  llama3_70b_1f1b             Schedule1F1B, no checkpointing
Writes OUT/summary.json (per case, pp rank and step: max_memory_allocated / max_memory_reserved of the
schedule's step, the optimizer step and zero_grad; memory after setup) and the snapshots
(torch.cuda.memory._snapshot(), frames cut to 4) packed in OUT/snapshots_K.tar.

Usage (GPU):    python3 tests/oracle/gpu/record_pp_gpu.py OUT [--cases a,b] [--steps 2] [--deadline S]
Usage (no GPU): python3 tests/oracle/gpu/record_pp_gpu.py OUT --dry-run   (a tiny Llama on the CPU)
"""
import argparse, os, subprocess, sys, time
from types import SimpleNamespace

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kit"))
sys.path.insert(0, HERE)
from record_ranks_gpu import collect_run, keep_snapshot, phase_peak as peak, run_child, start_summary  # noqa: E402

LLAMA3_70B = dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                  num_attention_heads=64, num_key_value_heads=8, max_position_embeddings=131072,
                  rope_theta=500000.0, tie_word_embeddings=False, rms_norm_eps=1e-5)
LLAMA_TINY = dict(LLAMA3_70B, vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=6,
                  num_attention_heads=8, num_key_value_heads=8)
MESH = dict(pp=4, dp_shard=2, tp=8)
RUN = dict(batch=8, microbatches=8, seq=8192)
CASES = {"llama3_70b_1f1b_ac": dict(schedule="1f1b", v=1, ac=True),
         "llama3_70b_interleaved_ac": dict(schedule="interleaved1f1b", v=2, ac=True),
         "llama3_70b_1f1b": dict(schedule="1f1b", v=1, ac=False)}


def static_metadata():
    """The fake group's recvs fill nothing: PyTorch >= 2.12's warm-up vote (every stage votes STATIC when its
    metadata is given in full, as here) would read zeros and fall back to metadata inference over p2p, which
    the fake group cannot carry. Each stage takes the vote as agreed (STATIC) instead."""
    from torch.distributed.pipelining.stage import PipelineStage
    if hasattr(PipelineStage, "_warmup_backward_result"):
        PipelineStage._warmup_backward_result = lambda self, received_result=None: torch.ones(1, dtype=torch.int32)


def stages(a, c, pp_rank, dev):
    """torchtitan's flow on this pp rank: the world mesh, the meta model cut into this rank's stages,
    each stage parallelized (TP + SP, AC, FSDP2) and materialized on the device."""
    import torch.distributed as dist
    import transformers
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.pipelining import PipelineStage
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import trace_ddp, trace_step
    pp, dp, tp = MESH["pp"], MESH["dp_shard"], MESH["tp"]
    dist.init_process_group("fake", store=FakeStore(), rank=pp_rank * dp * tp, world_size=pp * dp * tp)
    mesh = init_device_mesh(dev, (pp, dp, tp), mesh_dim_names=("pp", "dp_shard", "tp"))
    kw = LLAMA_TINY if a.dry_run else LLAMA3_70B
    cfg = transformers.LlamaConfig(**kw)
    cfg._attn_implementation = "sdpa"; cfg.use_cache = False
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.train()
    ns = SimpleNamespace(schedule=c["schedule"], stages_per_rank=c["v"], sp=True, tp_plan="torchtitan", loss_parallel=True)
    n = pp * c["v"]
    split = trace_ddp.pp_split(kw["num_hidden_layers"], n)
    seq, mb = a.seq, RUN["batch"] // RUN["microbatches"]
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    mods, out = [], []
    for idx in trace_ddp.stages_of_rank(pp_rank, ns, pp):
        lo, hi = split[idx]
        first, last = idx == 0, idx == n - 1
        m = trace_ddp.HFStage(model, lo, hi, first, last, seq)
        trace_ddp.tensor_parallel(m, ns, mesh["tp"])
        if c["ac"]:
            trace_step._checkpoint_modules(m, r"layers\.\d+")
        for layer in m.layers:
            fully_shard(layer, mesh=mesh["dp_shard"], mp_policy=mp, reshard_after_forward=False)
        fully_shard(m, mesh=mesh["dp_shard"], mp_policy=mp, reshard_after_forward=False)
        mods.append((idx, m, first, last))
    del model
    static_metadata()
    return mesh, mods, kw, n, mb, PipelineStage


def materialize(mods, kw, dev):
    """to_empty on the device, then every local shard and the rotary buffers filled in place."""
    head = kw["hidden_size"] // kw["num_attention_heads"]
    inv = 1.0 / (kw["rope_theta"] ** (torch.arange(0, head, 2, dtype=torch.float32) / head))
    for _, m, _, _ in mods:
        m.to_empty(device=dev)
    with torch.no_grad():
        for _, m, _, _ in mods:
            for p in m.parameters():
                (p.to_local() if hasattr(p, "to_local") else p).normal_(0.0, 0.02)
            for name in ("inv_freq", "original_inv_freq"):
                if hasattr(m.rotary_emb, name):
                    getattr(m.rotary_emb, name).copy_(inv)


def pp_case(name, pp_rank, a, dev):
    import torch.distributed.pipelining as pipelining
    from torch.distributed.tensor.parallel import loss_parallel
    import trace_ddp
    c = CASES[name]
    row = {"case": name, "pp_rank": pp_rank, "rank": pp_rank * MESH["dp_shard"] * MESH["tp"], "mesh": MESH,
           "schedule": c["schedule"], "stages_per_rank": c["v"], "ac": "full" if c["ac"] else None,
           "batch": RUN["batch"], "microbatches": RUN["microbatches"], "seq": a.seq,
           "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", "")}
    t = time.time()
    mesh, mods, kw, n, mb, PipelineStage = stages(a, c, pp_rank, dev)
    row["build_seconds"] = round(time.time() - t, 1)
    if dev == "cuda":
        torch.cuda.memory._record_memory_history(max_entries=a.max_entries, context="alloc", stacks="python")
    materialize(mods, kw, dev)
    d, tp = kw["hidden_size"], MESH["tp"]
    sts = []
    for idx, m, first, last in mods:  # static metadata: no shape-inference forward (as the kit)
        inp = (torch.empty(mb, a.seq, dtype=torch.long, device="meta") if first
               else torch.empty(mb, a.seq // tp, d, device="meta", dtype=torch.bfloat16, requires_grad=True))
        o = torch.empty(mb, a.seq if last else a.seq // tp, kw["vocab_size"] if last else d, device="meta",
                        dtype=torch.bfloat16, requires_grad=True)
        sts.append(PipelineStage(m, idx, n, torch.device(dev), input_args=(inp,), output_args=(o,),
                                 group=mesh["pp"].get_group()))
    loss_fn = lambda out, y: nn.functional.cross_entropy(out.view(-1, out.size(-1)), y.view(-1))
    cls = getattr(pipelining.schedules, trace_ddp.SCHEDULES[c["schedule"]])
    sched = cls(sts[0] if len(sts) == 1 else sts, RUN["microbatches"], loss_fn=loss_fn)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, kw["vocab_size"], (RUN["batch"], a.seq), generator=gen).to(dev)
    y = torch.randint(0, kw["vocab_size"], (RUN["batch"], a.seq), generator=gen).to(dev)
    have = [i for i, _, _, _ in mods]
    xs = (x,) if 0 in have else ()
    y = y if n - 1 in have else None
    if 0 not in have:
        del x
    params = [p for _, m, _, _ in mods for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    if dev == "cuda":
        torch.cuda.synchronize()
        row["setup"] = {"memory_allocated": torch.cuda.memory_allocated(),
                        "max_memory_allocated": torch.cuda.max_memory_allocated(),
                        "memory_reserved": torch.cuda.memory_reserved()}
    row["parameters_local"] = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in params)
    row["steps"] = []
    for _ in range(a.steps):
        s, t = {}, time.time()

        def step():
            losses = [] if y is not None else None
            with loss_parallel():  # torchtitan's train_context around the schedule's step
                sched.step(*xs, target=y, losses=losses, return_outputs=False)
        peak(dev, s, "schedule", step)
        peak(dev, s, "step", opt.step)
        peak(dev, s, "zero_grad", lambda: opt.zero_grad(set_to_none=True))
        s["seconds"] = round(time.time() - t, 2)
        row["steps"].append(s)
    if dev == "cuda":
        keep_snapshot(a, row, name, row["rank"])
    return row


def one(a):
    """One pp rank of one case in this process (a child of main)."""
    dev = "cpu" if a.dry_run else "cuda"
    return run_child(a, {"case": a.cases, "pp_rank": a.pp_rank}, lambda: pp_case(a.cases, a.pp_rank, a, dev))


def launch(a, i, name, conf, pp_rank):
    env = dict(os.environ, PYTORCH_ALLOC_CONF=conf)
    cmd = [sys.executable, os.path.abspath(__file__), a.out, "--child", "--index", str(i), "--cases", name,
           "--pp-rank", str(pp_rank), "--steps", str(a.steps), "--frames", str(a.frames),
           "--max-entries", str(a.max_entries), "--seq", str(a.seq)] + (["--dry-run"] if a.dry_run else [])
    return subprocess.Popen(cmd, env=env)


def collect(a, summary, i, name, conf, pp_rank, rc):
    return collect_run(a, summary, i, name, conf, pp_rank, rc, "pp_rank", "record_pp_gpu.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--alloc-confs", default="expandable_segments:True",
                    help="PYTORCH_ALLOC_CONF values, comma-separated; each case runs under each")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=2, help="processes at once on the one GPU (checkpointed cases)")
    ap.add_argument("--deadline", type=float, default=0, help="seconds after which no new process starts (0: none)")
    ap.add_argument("--frames", type=int, default=4); ap.add_argument("--max-entries", type=int, default=1000000)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--pp-ranks", default=None, help="the pp ranks to record, comma-separated (default: all)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--pp-rank", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.seq = a.seq or (64 if a.dry_run else RUN["seq"])
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        return one(a)
    summary = start_summary("record_pp_gpu.py", a, CASES)
    runs = [(name, conf, r) for conf in (a.alloc_confs.split(",") if not a.dry_run else [""])
            for name in a.cases.split(",") for r in range(MESH["pp"])
            if a.pp_ranks is None or str(r) in a.pp_ranks.split(",")]
    t0 = time.time()
    # the first run alone: if it fails, nothing else is started (a device's minutes are few)
    if not collect(a, summary, 0, *runs[0], launch(a, 0, *runs[0]).wait()):
        print("record_pp_gpu.py: the first run failed; stopping"); return 1
    queue, live = list(enumerate(runs))[1:], []
    while queue or live:
        while queue and (a.deadline <= 0 or time.time() - t0 < a.deadline) and \
                len(live) < (a.parallel if CASES[queue[0][1][0]]["ac"] else 1) and \
                not (live and not CASES[queue[0][1][0]]["ac"]):
            i, run = queue.pop(0)
            live.append((i, run, launch(a, i, *run)))
        if queue and a.deadline > 0 and time.time() - t0 >= a.deadline and not live:
            print("record_pp_gpu.py: deadline; not started: %s" % ", ".join("%s/%d" % (r[0], r[2]) for _, r in queue))
            break
        for item in list(live):
            rc = item[2].poll()
            if rc is not None:
                live.remove(item); collect(a, summary, item[0], *item[1], rc)
        time.sleep(0.5)
    failed = ["%s/%d" % (c["case"], c["pp_rank"]) for c in summary["cases"] if "error" in c]
    print("record_pp_gpu.py: %d runs, failed: %s" % (len(summary["cases"]), ", ".join(failed) or "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
