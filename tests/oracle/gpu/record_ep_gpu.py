#!/usr/bin/env python3
"""The expert-parallel ranks of Mixtral 8x7B (EP 8 borrowing FSDP2's ranks), recorded on ONE GPU through a fake process group.

docs/scenarios/llm_parallel.md section 4 (tools/scenarios/llm_parallel.py, mixtral_plans()) simulates torchtitan's
MoE recipe for Mixtral 8x7B (graphs/llm_zoo.py MoeDecoder at Mixtral's sizes: 32 layers, d 4096, 32 heads, 8 kv
heads, 8 experts of d_ff 14336, top 2, vocab 32000): expert parallelism over 8 ranks borrowing FSDP2's dp_shard
ranks, every decoder layer checkpointed, MixedPrecisionPolicy(bf16, fp32), meta-device init, fused AdamW, batch
1 x 8192 tokens per rank, balanced routing. A full rank fits an H200 (the 8-GPU plan, the largest checkpointed
one, is ~92 GiB). This script runs one rank per process through PyTorch's `fake` process group, as
record_ranks_gpu.py does for FSDP2: every collective is a no-op (2.11; 2.13 copies local values), every buffer
(the shards, FSDP2's all-gather and reduce-scatter buffers on both meshes, the dispatch's counts, permutation and
received rows, the combine's) is allocated as on the real rank, on the real CUDA caching allocator, streams and
kernels. What it misses: NCCL's own buffers, the timing of the other ranks.

The rank is built as the CPU kit builds its MoE decoder for `trace_ddp.py --mode ep --ep 8` / `--mode pp_fsdp2
--ep` (the model code memsim's graph was exported from, graphs/moe_models.py's for-loop experts; the kit's
ExpertParallel and ep_fully_shard): the model in fp32 on the meta device, every decoder layer checkpointed,
the sparse mesh (efsdp, ep) = (dp_shard / 8, 8) and the dense mesh (fsdp,) = (dp_shard,), ExpertParallel on each
layer's experts (Shard(0) over ep), fully_shard on each layer (experts on efsdp, Shard(1) past 8 ranks; the rest
on fsdp) and the root, reshard_after_forward=True, explicit prefetch; to_empty on the GPU, every local shard
filled in place; the loss the kit's cross_entropy(logits.view(-1, V), y.view(-1)). The kit's one fully_shard per
layer gives the experts their own mesh through shard_placement_fn's ShardPlacementResult(mesh_info=...), which
torch 2.11 lacks (it came after the 2.11 branch cut); there (--fsdp-flow auto picks it, the summary's fsdp_flow
says which ran) the experts are wrapped apart as torchtitan did before: fully_shard on each layer's experts over
efsdp (Shard(1) past 8 ranks), then on the layer over fsdp, the explicit prefetch naming both (the kit's
ep_fully_shard_apart, its `--ep-flow apart`).

What is patched, so that the rank sees the balanced routing the page simulates:
  * the router: a forward hook on each MoE layer's gate sets its logits in place (under no_grad: no allocation, no
    autograd node; the gate's output is saved by no backward) to 0, and to 10 for experts (t*k + j) mod E, j < k,
    of token t, so top-k picks exactly those: every expert receives tokens * k / E rows from every rank (2048 at
    8192 tokens, top 2, 8 experts), as `--moe-routing balanced` counts them. The hook runs again in the
    checkpointed recompute, with the same result. (Set, not biased: past the first layer the activations hold
    what the fake routed all-to-all left, uninitialized memory on 2.11, and NaN logits would steer top-k.)
  * the counts all-to-all (the kit's dist.all_to_all_single of the per-expert counts into empty_like(counts)): the
    fake group leaves the output as it was (2.11) or copies its own input (2.13); after the call the output is
    overwritten, in place, with what a symmetric world sends (every source rank routed as this one: source s's
    chunk for this ep rank r is counts[r*E/ep:(r+1)*E/ep]), so the splits, the permutation and the experts'
    rows are those of the balanced plan. The received rows' values (the routed all-to-all) are whatever the
    fake group leaves: the memory does not depend on them.
  * tests/oracle/kit/trace_ddp.py's dispatch makes its permutation's aranges on the counts' device (on the CPU,
    as before; here on the GPU, as torchtitan's _permute does).
The ep ranks of a balanced plan are identical; its ranks differ only where FSDP2's dim-0 chunks do (the router's
[8, 4096] gate over 16 or 64 ranks: the ranks past 8 hold no row), so each case records rank 0 and, past 8
ranks, the last rank.

Cases (each rank in a fresh process, under PYTORCH_ALLOC_CONF expandable_segments:True as the page's plans, the
default allocator where --alloc-confs names it; the plan is mixtral_plans()[plan]):
  mixtral_dp8_ep8_ac    8 GPUs: FSDP2 8, EP 8 (efsdp 1), every layer checkpointed
  mixtral_dp16_ep8_ac   16 GPUs: FSDP2 16, EP 8 (efsdp 2, Shard(1)), every layer checkpointed
  mixtral_dp64_ep8_ac   64 GPUs: FSDP2 64, EP 8 (efsdp 8), every layer checkpointed
  mixtral_dp32_ep8_ac   32 GPUs (not run by default)
  mixtral_dp16_ep8      16 GPUs, no checkpointing (not run by default: memsim puts it at ~138 GiB reserved on a
                        139.8 GiB device)
Writes OUT/summary.json (per case, rank and step: max_memory_allocated / max_memory_reserved of forward (the
model and the loss), backward, the optimizer step and zero_grad; memory after setup; the counts each layer's
dispatch received in the first forward) and the snapshots (torch.cuda.memory._snapshot(), frames cut to
--frames) packed in OUT/snapshots_K.tar.

Usage (GPU):    python3 tests/oracle/gpu/record_ep_gpu.py OUT [--cases a,b] [--steps 2] [--deadline S]
Usage (no GPU): python3 tests/oracle/gpu/record_ep_gpu.py OUT --dry-run   (a tiny MoE decoder on the CPU)
"""
import argparse, math, os, subprocess, sys, time
from types import SimpleNamespace

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(HERE, "..", "kit"))
sys.path.insert(0, os.path.join(ROOT, "graphs"))
sys.path.insert(0, HERE)
from record_ranks_gpu import collect_run, keep_snapshot, phase_peak as peak, run_child, start_summary  # noqa: E402

# graphs/llm_zoo.py mixtral_8x7b's MoeDecoder arguments, in fp32 (FSDP2's mixed precision computes in bf16)
MIXTRAL = dict(vocab=32000, d=4096, layers=32, heads=32, kv_heads=8, ff=14336, experts=8, top_k=2, theta=1e6)
TINY = dict(MIXTRAL, vocab=256, d=64, layers=2, heads=4, kv_heads=2, ff=128)
EP = 8
RUN = dict(batch=1, seq=8192)
# plan: the index of the case's plan in tools/scenarios/llm_parallel.py mixtral_plans()
CASES = {"mixtral_dp8_ep8_ac": dict(dp_shard=8, ac=True, plan=0, gib=96),
         "mixtral_dp16_ep8_ac": dict(dp_shard=16, ac=True, plan=1, gib=54),
         "mixtral_dp64_ep8_ac": dict(dp_shard=64, ac=True, plan=5, gib=21),
         "mixtral_dp32_ep8_ac": dict(dp_shard=32, ac=True, plan=4, gib=32),
         "mixtral_dp16_ep8": dict(dp_shard=16, ac=False, plan=2, gib=139)}
DEFAULT = "mixtral_dp16_ep8_ac,mixtral_dp8_ep8_ac,mixtral_dp64_ep8_ac"
BIAS = 10.0  # the chosen experts' router logits (the others' 0)


def ranks_of(c):
    """Rank 0 and, past EP ranks (where FSDP2's dim-0 chunks of the router leave ranks empty), the last."""
    return [0] if c["dp_shard"] <= EP else [0, c["dp_shard"] - 1]


def balanced_router(model, tokens):
    """Each MoE layer's gate: its logits set in place to 0, those of experts (t*k + j) mod E (j < k) of token t to BIAS.
    Set, not raised: from the second layer on the tokens carry what the fake routed all-to-all left in its output
    (on 2.11 uninitialized memory, so NaN or inf logits that top-k would follow)."""
    def hook(mod, inputs, out):
        e, k = mod.out_features, model.layers[0].moe.top_k
        period = e // math.gcd(e, k)
        assert out.shape == (tokens, e) and tokens % period == 0, (out.shape, tokens, period)
        with torch.no_grad():
            grid = out.detach().zero_().view(tokens // period, period, e)
            for i in range(period):
                for j in range(k):
                    grid[:, i, (i * k + j) % e].add_(BIAS)
    for layer in model.layers:
        layer.moe.gate.register_forward_hook(hook)


def symmetric_counts(seen):
    """dist.all_to_all_single of int64 counts with equal splits (the kit's counts exchange) made to return what a
    world of ranks routing as this one sends; each call's (counts, received counts) appended to |seen|."""
    import torch.distributed as dist
    orig = dist.all_to_all_single

    def a2a(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
        work = orig(output, input, output_split_sizes, input_split_sizes, group=group, async_op=async_op)
        if output_split_sizes is None and input_split_sizes is None and output.dtype == torch.int64:
            n, r = dist.get_world_size(group), dist.get_rank(group)
            with torch.no_grad():
                output.view(n, -1).copy_(input.view(n, -1)[r].expand(n, -1))
            seen.append((input.tolist(), output.tolist()))
        return work
    dist.all_to_all_single = a2a


def build(a, c, rank, dev):
    """The kit's MoE decoder at the case's sizes on the meta device, checkpointed, ExpertParallel + FSDP2 over a
    fake group of dp_shard ranks (the sparse mesh made first, as the kit's ep_fsdp2)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import llm_zoo, trace_ddp, trace_step
    world = c["dp_shard"]
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    sparse = init_device_mesh(dev, (world // EP, EP), mesh_dim_names=("efsdp", "ep"))
    dense = init_device_mesh(dev, (world,), mesh_dim_names=("fsdp",))
    kw = TINY if a.dry_run else MIXTRAL
    with torch.device("meta"):
        model = llm_zoo.MoeDecoder(kw["vocab"], kw["d"], kw["layers"], kw["heads"], kw["kv_heads"], kw["ff"],
                                   kw["experts"], kw["top_k"], a.seq, kw["theta"])
    model.train()
    if c["ac"]:  # torchtitan's apply_ac before apply_fsdp: every decoder layer (non-reentrant)
        trace_step._checkpoint_modules(model, r"layers\.\d+")
    ns = SimpleNamespace(reshard="true", mp="bf16", world=world, hsdp=1)
    shard = trace_ddp.ep_fully_shard if a.fsdp_flow == "per-parameter" else trace_ddp.ep_fully_shard_apart
    shard(model, ns, sparse["ep"], sparse["efsdp"], dense, world)
    balanced_router(model, RUN["batch"] * a.seq)
    return model, kw


def per_parameter_mesh():
    """Whether fully_shard takes a mesh per parameter (shard_placement_fn returning ShardPlacementResult with a
    mesh_info: in the 2.13 sources the kit records with; torchtitan wrapped the experts apart before it)."""
    try:
        from torch.distributed.fsdp._fully_shard._fsdp_common import ShardPlacementResult
    except ImportError:
        return False
    import dataclasses
    return dataclasses.is_dataclass(ShardPlacementResult) and \
        "mesh_info" in {f.name for f in dataclasses.fields(ShardPlacementResult)}


def materialize(model, kw, seq, dev):
    """to_empty on the device, every local shard filled in place, the rotary tables as MoeDecoder makes them."""
    model.to_empty(device=dev)
    hd = kw["d"] // kw["heads"]
    inv = 1.0 / (kw["theta"] ** (torch.arange(0, hd, 2).float() / hd))
    ang = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat((ang, ang), dim=-1)
    with torch.no_grad():
        for p in model.parameters():
            (p.to_local() if hasattr(p, "to_local") else p).normal_(0.0, 0.02)
        model.cos.copy_(emb.cos())
        model.sin.copy_(emb.sin())


def ep_case(name, rank, a, dev):
    c = CASES[name]
    world = c["dp_shard"]
    row = {"case": name, "rank": rank, "plan": c["plan"], "mesh": "dp_shard=%d,ep=%d" % (world, EP),
           "ep_rank": rank % EP, "efsdp_rank": rank // EP, "ac": "full" if c["ac"] else None,
           "batch": RUN["batch"], "seq": a.seq, "routing": "balanced", "optimizer": "adamw (fused)",
           "reshard_after_forward": True, "fsdp_flow": a.fsdp_flow, "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", "")}
    seen = []
    symmetric_counts(seen)
    t = time.time()
    model, kw = build(a, c, rank, dev)
    row["build_seconds"] = round(time.time() - t, 1)
    if dev == "cuda":
        torch.cuda.memory._record_memory_history(max_entries=a.max_entries, context="alloc", stacks="python")
    materialize(model, kw, a.seq, dev)
    gen = torch.Generator().manual_seed(1000 + rank)  # the kit's make_batch: each rank its own batch
    x = torch.randint(0, kw["vocab"], (RUN["batch"], a.seq), generator=gen).to(dev)
    y = torch.randint(0, kw["vocab"], (RUN["batch"], a.seq), generator=gen).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)  # torchtitan's default implementation
    if dev == "cuda":
        torch.cuda.synchronize()
        row["setup"] = {"memory_allocated": torch.cuda.memory_allocated(),
                        "max_memory_allocated": torch.cuda.max_memory_allocated(),
                        "memory_reserved": torch.cuda.memory_reserved()}
    row["parameters_local"] = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in model.parameters())
    row["steps"] = []
    for _ in range(a.steps):
        s, t = {}, time.time()

        def fwd():
            logits = model(x)
            return nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss = peak(dev, s, "forward", fwd)
        peak(dev, s, "backward", loss.backward)
        del loss
        peak(dev, s, "step", opt.step)
        peak(dev, s, "zero_grad", lambda: opt.zero_grad(set_to_none=True))
        s["seconds"] = round(time.time() - t, 2)
        row["steps"].append(s)
    # the first forward's dispatches, per layer: the rank's rows per expert, and what it received per
    # (source rank, local expert)
    row["routed_counts"] = [c for c, _ in seen[:kw["layers"]]]
    row["received_counts"] = [r for _, r in seen[:kw["layers"]]]
    if dev == "cuda":
        keep_snapshot(a, row, name, rank)
    return row


def one(a):
    """One rank of one case in this process (a child of main)."""
    dev = "cpu" if a.dry_run else "cuda"
    ids = {"case": a.cases, "rank": a.rank, "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", "")}
    return run_child(a, ids, lambda: ep_case(a.cases, a.rank, a, dev))


def launch(a, i, name, conf, rank):
    env = dict(os.environ, PYTORCH_ALLOC_CONF=conf)
    cmd = [sys.executable, os.path.abspath(__file__), a.out, "--child", "--index", str(i), "--cases", name,
           "--rank", str(rank), "--steps", str(a.steps), "--frames", str(a.frames),
           "--max-entries", str(a.max_entries), "--seq", str(a.seq), "--fsdp-flow", a.fsdp_flow] + \
        (["--dry-run"] if a.dry_run else [])
    return subprocess.Popen(cmd, env=env)


def collect(a, summary, i, name, conf, rank, rc):
    return collect_run(a, summary, i, name, conf, rank, rc, "rank", "record_ep_gpu.py")


def schedule(a, runs, summary):
    """The first run alone (if it fails nothing else starts: a device's minutes are few), then the rest,
    several at once while their estimated peaks (CASES' gib) fit --gpu-gib; none started past --deadline."""
    t0 = time.time()
    if not collect(a, summary, 0, *runs[0], launch(a, 0, *runs[0]).wait()):
        print("record_ep_gpu.py: the first run failed; stopping")
        return
    queue, live = list(enumerate(runs))[1:], []

    def fits(run):  # nothing running, or room for one more whose estimated peak fits beside the others'
        return not live or (len(live) < a.parallel and
                            sum(CASES[r[0]]["gib"] for _, r, _ in live) + CASES[run[0]]["gib"] <= a.gpu_gib)
    while queue or live:
        late = a.deadline > 0 and time.time() - t0 >= a.deadline
        while queue and not late and fits(queue[0][1]):
            i, run = queue.pop(0)
            live.append((i, run, launch(a, i, *run)))
        if queue and late and not live:
            print("record_ep_gpu.py: deadline; not started: %s" % ", ".join("%s/%d" % (r[0], r[2]) for _, r in queue))
            break
        for item in list(live):
            rc = item[2].poll()
            if rc is not None:
                live.remove(item)
                collect(a, summary, item[0], *item[1], rc)
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--cases", default=DEFAULT, help="comma-separated, of: %s" % ",".join(CASES))
    ap.add_argument("--alloc-confs", default="expandable_segments:True",
                    help="PYTORCH_ALLOC_CONF values, comma-separated (\"\": the default allocator); each case runs under each")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=2, help="processes at once on the one GPU")
    ap.add_argument("--gpu-gib", type=float, default=120.0, help="the estimated peaks of the processes at once stay under this")
    ap.add_argument("--deadline", type=float, default=0, help="seconds after which no new process starts (0: none)")
    ap.add_argument("--frames", type=int, default=4); ap.add_argument("--max-entries", type=int, default=1000000)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--ranks", default=None, help="the ranks to record, comma-separated, 'last' for the last (default: 0 and, past 8 ranks, the last)")
    ap.add_argument("--fsdp-flow", choices=["auto", "per-parameter", "experts-apart"], default="auto",
                    help="how fully_shard puts the experts on efsdp: one call per block with a mesh per parameter (the "
                         "kit's, torch >= 2.12), or the experts wrapped apart (torchtitan's flow on 2.11); auto: the first "
                         "this torch has")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.seq = a.seq or (64 if a.dry_run else RUN["seq"])
    if a.fsdp_flow == "auto":
        a.fsdp_flow = "per-parameter" if per_parameter_mesh() else "experts-apart"
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        return one(a)
    summary = start_summary("record_ep_gpu.py", a, CASES)
    summary["patches"] = ["router: gate logits set in place to 0, those of experts (t*k+j) mod E to %g (balanced top-k)" % BIAS,
                          "counts all_to_all_single: output set to a symmetric world's (every source routes as this rank)"]
    confs = a.alloc_confs.split(",") if not a.dry_run else [""]
    runs = []
    for conf in confs:
        for name in a.cases.split(","):
            c = CASES[name]
            ranks = ranks_of(c) if a.ranks is None else \
                [c["dp_shard"] - 1 if r == "last" else int(r) for r in a.ranks.split(",")]
            runs += [(name, conf, r) for r in ranks if 0 <= r < c["dp_shard"]]
    schedule(a, runs, summary)
    failed = ["%s/%d" % (c["case"], c["rank"]) for c in summary["cases"] if "error" in c]
    failed += ["%s/%d (%s)" % (c["case"], c["rank"], why) for c in summary["cases"] if "error" not in c
               for why in [unfit(c, a)] if why]
    print("record_ep_gpu.py: %d runs, failed: %s" % (len(summary["cases"]), ", ".join(failed) or "none"))
    return 1 if failed or len(summary["cases"]) < len(runs) else 0


def unfit(row, a):
    """Why a finished run's row is not the balanced plan's, or "": every step's phases (on the GPU), each layer's
    rows per expert tokens * k / E, and every (source, local expert) received as many."""
    kw = TINY if a.dry_run else MIXTRAL
    if len(row["steps"]) != a.steps:
        return "%d steps" % len(row["steps"])
    if not a.dry_run and any(p not in st for st in row["steps"] for p in ("forward", "backward", "step", "zero_grad")):
        return "a phase without its peaks"
    even = RUN["batch"] * row["seq"] * kw["top_k"] // kw["experts"]
    if len(row["routed_counts"]) != kw["layers"] or any(set(c) != {even} for c in row["routed_counts"] + row["received_counts"]):
        return "routing not balanced: %s" % row["routed_counts"][:1]
    return ""


if __name__ == "__main__":
    sys.exit(main())
