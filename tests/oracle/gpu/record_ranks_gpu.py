#!/usr/bin/env python3
"""Rank 0 of a multi-GPU LLM training step, recorded on ONE GPU through a fake process group.

A session lent one GPU cannot run eight. But every rank of an FSDP2 (or FSDP2 x TP) step allocates
the same tensors whether or not the collectives move any bytes: the all-gather outputs, the
reduce-scatter inputs and outputs, the shards, the optimizer state. PyTorch's `fake` process group
(torch/testing/_internal/distributed/fake_pg.py; what FSDPMemTracker and torchtitan's memory
estimator run on) makes every collective a no-op, so one process with rank 0 of world W runs the
step of a W-GPU job on one GPU, through the real CUDA caching allocator, streams and kernels. What it
misses: NCCL's own buffers (outside the allocator) and the timing of other ranks.

Cases (each in a fresh process, PYTORCH_ALLOC_CONF as given by --alloc-confs):
  llama3_8b_dp8           Llama 3.1 8B (transformers LlamaForCausalLM from its config, sdpa attention,
                          use_cache off), built on the meta device in fp32 (torchtitan's flow:
                          parallelize, then to_empty(device="cuda") and initialise the shards), every
                          decoder layer checkpointed (torch.utils.checkpoint, non-reentrant), FSDP2
                          fully_shard on each decoder layer and the root over dp_shard=8,
                          MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32),
                          reshard_after_forward=True; AdamW (foreach); batch 1, seq 8192; the kit's
                          loss F.cross_entropy(logits.view(-1, V), y.view(-1)) on the bf16 logits
  llama3_8b_dp4_tp2       the same on the 2-D mesh (dp_shard=4, tp=2): the kit's tensor-parallel plan
                          ("layers": q/k/v, gate/up ColwiseParallel; o, down RowwiseParallel) on
                          mesh["tp"], then FSDP2 on mesh["dp_shard"] (torchtitan's order)
  llama3_8b_dp8_sac       llama3_8b_dp8 with torchtitan's selective (op) checkpointing policy
  llama3_8b_dp8_toml      torchtitan's llama3_8b.toml as given: llama3_8b_dp8_sac with torchtitan's loss
                          (cross_entropy(logits.flatten(0, 1).float(), ...)), fused AdamW and
                          clip_grad_norm_(1.0, foreach=True) after backward
  llama3_8b_cp8_dp2       seq 131072: context parallel over 8 ranks (torch's context_parallel, all-gather
                          rotation, forward, loss and backward inside it as torchtitan's train_context)
                          x FSDP2 over the flattened dp_shard_cp mesh (2 x 8 = 16 ranks), every layer
                          checkpointed
  cudnn_rnn               no model: nn.LSTM / GRU / RNN shapes on cuDNN's fused kernel, the allocation
                          stream of one forward + backward each (weight buffer, reserve space,
                          workspaces), for memsim's cuDNN RNN rule
Writes OUT/summary.json (per case and step: max_memory_allocated / max_memory_reserved per phase,
memory_allocated after setup, the device's used memory) and OUT/CASE[.expandable].pickle.gz
(torch.cuda.memory._snapshot() of the whole run from before to_empty, frames cut to 4).

Usage (GPU):    python3 tests/oracle/gpu/record_ranks_gpu.py OUT [--cases a,b] [--steps 2]
Usage (no GPU): python3 tests/oracle/gpu/record_ranks_gpu.py OUT --dry-run   (tiny Llama, CPU, fake
                process group, CP through the kit's CPU shim: the ctest oracle.gpu_ranks_dry_run keeps
                the script working)
"""
import argparse, gzip, json, os, pickle, subprocess, sys, time
from types import SimpleNamespace

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kit"))
sys.path.insert(0, HERE)
from record_gpu import cut_frames, store  # noqa: E402  (the snapshot's frames cut to --frames)

LLAMA3_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                 rope_theta=500000.0, tie_word_embeddings=False)
LLAMA_TINY = dict(LLAMA3_8B, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2)
CASES = {"llama3_8b_dp8": dict(dp_shard=8, tp=1, sac=""),
         "llama3_8b_dp4_tp2": dict(dp_shard=4, tp=2, sac=""),
         "llama3_8b_dp8_sac": dict(dp_shard=8, tp=1, sac="torchtitan"),
         # torchtitan's llama3_8b.toml as given: + its loss (logits upcast to fp32), fused AdamW, clip_grad_norm_ 1.0
         "llama3_8b_dp8_toml": dict(dp_shard=8, tp=1, sac="torchtitan", toml=True),
         # 128k tokens: context parallel 8 (ring attention, all-gather rotation) x FSDP2 over dp_shard_cp (2 x 8)
         "llama3_8b_cp8_dp2": dict(dp_shard=2, tp=1, cp=8, sac="", seq=131072),
         # torchtitan's enable_cpu_offload: FSDP2's CPUOffloadPolicy (pinned host shards, grads and AdamW state)
         "llama3_8b_dp8_offload": dict(dp_shard=8, tp=1, sac="", offload=True),
         "cudnn_rnn": None}
# (mode, input, hidden, layers, bidirectional, batch, seq, dtype, proj_size, batch_first, dropout)
RNN_GRID = [("LSTM", 512, 1024, 2, False, 32, 256, "float32", 0, True, 0.0),
            ("LSTM", 512, 1024, 1, False, 32, 256, "float32", 0, True, 0.0),
            ("LSTM", 512, 1024, 3, False, 32, 256, "float32", 0, True, 0.0),
            ("LSTM", 512, 1024, 2, True, 32, 256, "float32", 0, True, 0.0),
            ("LSTM", 512, 1024, 2, False, 16, 256, "float32", 0, True, 0.0),
            ("LSTM", 512, 1024, 2, False, 32, 128, "float32", 0, True, 0.0),
            ("LSTM", 512, 512, 2, False, 32, 256, "float32", 0, True, 0.0),
            ("LSTM", 256, 1024, 2, False, 32, 256, "float32", 0, True, 0.0),
            ("LSTM", 512, 1024, 2, False, 32, 256, "float16", 0, True, 0.0),
            ("LSTM", 512, 1024, 2, False, 32, 256, "bfloat16", 0, True, 0.0),
            ("LSTM", 512, 1024, 2, False, 32, 256, "float32", 256, True, 0.0),
            ("LSTM", 512, 1024, 2, False, 32, 256, "float32", 0, False, 0.0),
            ("LSTM", 512, 1024, 2, False, 32, 256, "float32", 0, True, 0.1),
            ("LSTM", 300, 700, 3, True, 7, 50, "float32", 0, True, 0.0),
            ("LSTM", 64, 128, 1, False, 4, 10, "float32", 0, True, 0.0),
            ("GRU", 512, 1024, 2, False, 32, 256, "float32", 0, True, 0.0),
            ("GRU", 512, 1024, 2, True, 32, 256, "float32", 0, True, 0.0),
            ("GRU", 300, 700, 3, False, 7, 50, "float16", 0, True, 0.0),
            ("RNN_TANH", 512, 1024, 2, False, 32, 256, "float32", 0, True, 0.0),
            ("RNN_RELU", 300, 700, 1, True, 7, 50, "float32", 0, True, 0.0)]


def build(a, c, dev):
    """Llama on the meta device, checkpointed, parallelized (TP then FSDP2) over a fake group."""
    import torch.distributed as dist
    import transformers
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import trace_step, trace_ddp
    cp = c.get("cp", 1)
    world = c["dp_shard"] * c["tp"] * cp
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    kw = LLAMA_TINY if a.dry_run else LLAMA3_8B
    cfg = transformers.LlamaConfig(**kw)
    cfg._attn_implementation = "sdpa"; cfg.use_cache = False
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    trace_step._checkpoint_modules(model, r"model\.layers\.[0-9]+", sac=c["sac"])
    if cp > 1 and dev == "cpu":  # the dry run: CP's ring code around the CPU flash kernel (the kit's shim)
        import cp_shim
        cp_shim.install()
    if cp > 1:  # torchtitan: FSDP2 over the flattened dp_shard_cp mesh, CP's ring over "cp"
        mesh = init_device_mesh(dev, (c["dp_shard"], cp), mesh_dim_names=("dp_shard", "cp"))
        shard_mesh = mesh["dp_shard", "cp"]._flatten("dp_shard_cp")
    else:
        mesh = init_device_mesh(dev, (c["dp_shard"], c["tp"]), mesh_dim_names=("dp_shard", "tp"))
        shard_mesh = mesh["dp_shard"]
    if c["tp"] > 1:
        trace_ddp.tensor_parallel(model, SimpleNamespace(sp=False, tp_plan="layers"), mesh["tp"])
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    kw_off = {}
    if c.get("offload"):
        from torch.distributed.fsdp import CPUOffloadPolicy
        kw_off["offload_policy"] = CPUOffloadPolicy(pin_memory=dev == "cuda")  # no pinning without a GPU (the dry run)
    for layer in model.model.layers:
        fully_shard(layer, mesh=shard_mesh, mp_policy=mp, reshard_after_forward=True, **kw_off)
    fully_shard(model, mesh=shard_mesh, mp_policy=mp, reshard_after_forward=True, **kw_off)
    return model, kw, (mesh["cp"] if cp > 1 else None)


def materialize(model, kw, dev, offload=False):
    """torchtitan's init: to_empty on the device (on the host under CPU offload, the buffers then moved to
    the device: its init_weights(buffer_device=...)), then every (local) shard initialised in place."""
    model.to_empty(device="cpu" if offload else dev)
    if offload:
        for mod in model.modules():
            for name, b in list(mod.named_buffers(recurse=False)):
                mod._buffers[name] = b.to(dev)
    with torch.no_grad():
        for p in model.parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            local.normal_(0.0, 0.02)
        head = kw["hidden_size"] // kw["num_attention_heads"]
        inv = 1.0 / (kw["rope_theta"] ** (torch.arange(0, head, 2, dtype=torch.float32) / head))
        rot = model.model.rotary_emb
        for name in ("inv_freq", "original_inv_freq"):
            if hasattr(rot, name):
                getattr(rot, name).copy_(inv)


def start_summary(script, a, known):
    """The summary of a recording run, after checking its --cases against |known| and that a GPU is
    there (unless --dry-run): the software's versions and the device."""
    unknown = [c for c in a.cases.split(",") if c not in known]
    if unknown:
        sys.exit("%s: --cases: unknown %s (known: %s)" % (script, ",".join(unknown), ",".join(known)))
    if not a.dry_run and not torch.cuda.is_available():
        sys.exit("%s: no CUDA device here; --dry-run checks the script on the CPU" % script)
    summary = {"torch": torch.__version__, "cases": []}
    try:
        import transformers
        summary["transformers"] = transformers.__version__
    except ImportError:
        pass
    if not a.dry_run:
        summary.update(device=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                       cudnn=torch.backends.cudnn.version())
    return summary


def end_recording(row, frames):
    """The device's used memory and the reserved bytes into |row|, then the snapshot (frames cut to
    |frames|) and its file tag (.expandable under expandable segments); the history stops."""
    free, total = torch.cuda.mem_get_info()
    row.update(device_used_after=total - free, device_total=total, reserved_after=torch.cuda.memory_reserved())
    snap = cut_frames(torch.cuda.memory._snapshot(), frames)
    torch.cuda.memory._record_memory_history(enabled=None)
    return snap, ".expandable" if "expandable_segments:True" in row["alloc_conf"] else ""


def run_child(a, ids, fn):
    """A child process's one run: fn()'s row, or when it raises a row of |ids| with the error (the summary
    says which run failed and why; the others still run), timed and written to OUT/_CASE_INDEX.json."""
    t = time.time()
    try:
        row = fn()
    except Exception as e:
        import traceback
        row = dict(ids, error="%s: %s" % (type(e).__name__, e), traceback=traceback.format_exc()[-3000:])
    row["case_seconds"] = round(time.time() - t, 1)
    with open(os.path.join(a.out, "_%s_%d.json" % (a.cases, a.index)), "w") as f:
        json.dump(row, f)
    return 0


def keep_snapshot(a, row, name, rank):
    """The run's snapshot stored as CASE.rankR[.expandable].pickle.gz, named in |row|."""
    snap, tag = end_recording(row, a.frames)
    row["snapshot"] = "%s.rank%d%s.pickle.gz" % (name, rank, tag)
    store(a.out, row["snapshot"][:-len(".pickle.gz")], snap)


def collect_run(a, summary, i, name, conf, rank, rc, rank_key, script):
    """Run |i|'s row (the _CASE_I.json its process wrote, or an error row when it wrote none) into |summary|,
    kept sorted by case, allocator and |rank_key|, and rewritten to OUT/summary.json; whether it succeeded."""
    path = os.path.join(a.out, "_%s_%d.json" % (name, i))
    if os.path.exists(path):
        with open(path) as f:
            row = json.load(f)
        os.remove(path)
    else:
        row = {"case": name, rank_key: rank, "alloc_conf": conf, "error": "the process ended with %d" % rc}
    summary["cases"].append(row)
    summary["cases"].sort(key=lambda r: (r["case"], r.get("alloc_conf", ""), r[rank_key]))
    print("%s: %s %s %d [%s] %s" % (script, name, rank_key.replace("_", " "), rank, conf or "default",
                                     row.get("error", "%.1f s" % row.get("case_seconds", 0))), flush=True)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    return "error" not in row


def phase_peak(dev, row, key, fn):
    if dev == "cuda":
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    out = fn()
    if dev == "cuda":
        torch.cuda.synchronize()
        row[key] = {"max_memory_allocated": torch.cuda.max_memory_allocated(),
                    "max_memory_reserved": torch.cuda.max_memory_reserved(),
                    "memory_allocated_after": torch.cuda.memory_allocated()}
    return out


def llama_case(name, a, dev):
    c = CASES[name]
    toml = c.get("toml", False)
    row = {"case": name, "mesh": "dp_shard=%d%s%s" % (c["dp_shard"], ",tp=%d" % c["tp"] if c["tp"] > 1 else "",
                                                    ",cp=%d" % c["cp"] if c.get("cp", 1) > 1 else ""),
           "sac": c["sac"] or None, "batch": 1, "seq": 64 if a.dry_run else c.get("seq", 8192),
           "optimizer": "adamw (fused)" if toml else "adamw (foreach)", "clip_grad_norm": 1.0 if toml else None,
           "loss": "torchtitan (logits.float())" if toml else "kit (bf16 logits)",
           "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", ""), "offload": c.get("offload", False)}
    t = time.time()
    model, kw, cp_mesh = build(a, c, dev)
    row["build_seconds"] = round(time.time() - t, 1)
    if dev == "cuda":
        torch.cuda.memory._record_memory_history(max_entries=a.max_entries, context="alloc", stacks="python")
    t = time.time()
    materialize(model, kw, dev, c.get("offload", False))
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, kw["vocab_size"], (1, row["seq"]), generator=gen).to(dev)
    y = torch.randint(0, kw["vocab_size"], (1, row["seq"]), generator=gen).to(dev)
    x_full, y_full = x, y
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if toml and dev == "cuda" else {}))
    if dev == "cuda":
        torch.cuda.synchronize()
        row["setup"] = {"memory_allocated": torch.cuda.memory_allocated(),
                        "max_memory_allocated": torch.cuda.max_memory_allocated(),
                        "memory_reserved": torch.cuda.memory_reserved(), "seconds": round(time.time() - t, 1)}
    row["parameters_local"] = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in model.parameters())
    row["steps"] = []
    for _ in range(a.steps):
        s, t = {}, time.time()

        def fwd():
            logits = model(x).logits
            if toml:  # torchtitan/components/loss.py: cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
                return nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten(0, 1))
            return nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

        def bwd():
            loss.backward()
            if toml:  # torchtitan's clip_grad_norm_ (foreach) before the step
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        if cp_mesh is not None:  # torchtitan's train_context: forward, loss and backward inside context_parallel
            from torch.distributed.tensor.experimental import context_parallel
            x, y = x_full.clone(), y_full.clone()  # context_parallel shards its buffers in place (no restore)
            with context_parallel(cp_mesh, buffers=[x, y], buffer_seq_dims=[1, 1], no_restore_buffers={x, y}):
                loss = phase_peak(dev, s, "forward", fwd)
                phase_peak(dev, s, "backward", bwd)
                del loss
        else:
            loss = phase_peak(dev, s, "forward", fwd)
            phase_peak(dev, s, "backward", bwd)
            del loss
        phase_peak(dev, s, "step", opt.step)
        phase_peak(dev, s, "zero_grad", lambda: opt.zero_grad(set_to_none=True))
        s["seconds"] = round(time.time() - t, 2)
        row["steps"].append(s)
    if dev == "cuda":
        snap, tag = end_recording(row, a.frames)
        with gzip.open(os.path.join(a.out, name + tag + ".pickle.gz"), "wb", compresslevel=6) as f:
            pickle.dump(snap, f)
    return row


def rnn_case(a, dev):
    """The allocation stream of each RNN_GRID shape: forward (training) and backward."""
    rows = []
    for mode, inp, hid, layers, bi, batch, seq, dtype, proj, bf, drop in RNN_GRID:
        if a.dry_run:
            inp, hid, batch, seq, proj = 8, 16, 2, 5, min(proj, 8)
        kw = dict(num_layers=layers, bidirectional=bi, batch_first=bf, dropout=drop)
        if proj:
            kw["proj_size"] = proj
        cls = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN_TANH": nn.RNN, "RNN_RELU": nn.RNN}[mode]
        if mode.startswith("RNN_"):
            kw["nonlinearity"] = mode[4:].lower()
        torch.manual_seed(0)
        rnn = cls(inp, hid, **kw).to(dev, getattr(torch, dtype))
        shape = (batch, seq, inp) if bf else (seq, batch, inp)
        x = torch.randn(*shape, device=dev, dtype=getattr(torch, dtype), requires_grad=True)
        row = {"mode": mode, "input": inp, "hidden": hid, "layers": layers, "bidirectional": bi, "batch": batch,
               "seq": seq, "dtype": dtype, "proj_size": proj, "batch_first": bf, "dropout": drop}
        if dev == "cuda":
            torch.cuda.synchronize(); torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.memory._record_memory_history(max_entries=100000, context="alloc", stacks="python")
        out = rnn(x)[0]
        grad = torch.ones_like(out)
        if dev == "cuda":
            torch.cuda.synchronize()
            row["after_forward"] = torch.cuda.memory_allocated() - base
        out.backward(grad)
        if dev == "cuda":
            torch.cuda.synchronize()
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            row["events"] = [[e["action"], e["size"], e["addr"], [f["name"] for f in e.get("frames", [])[:3]]]
                             for e in snap["device_traces"][0] if e["action"] in ("alloc", "free_requested")]
            row["weights"] = [[n, list(p.shape), p.data_ptr()] for n, p in rnn.named_parameters()]
            row["x_ptr"], row["out_ptr"] = x.data_ptr(), out.data_ptr()
        del rnn, x, out, grad
        rows.append(row)
    return {"case": "cudnn_rnn", "cudnn": torch.backends.cudnn.version() if dev == "cuda" else None, "shapes": rows}


def one(a):
    """One case in this process (a child of main)."""
    dev = "cpu" if a.dry_run else "cuda"
    name = a.cases
    return run_child(a, {"case": name}, lambda: rnn_case(a, dev) if name == "cudnn_rnn" else llama_case(name, a, dev))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--alloc-confs", default=",expandable_segments:True",
                    help="PYTORCH_ALLOC_CONF values, comma-separated; each llama case runs under each")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--frames", type=int, default=4); ap.add_argument("--max-entries", type=int, default=400000)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        return one(a)
    summary = start_summary("record_ranks_gpu.py", a, CASES)
    runs = []
    for name in a.cases.split(","):
        confs = [""] if name == "cudnn_rnn" or a.dry_run else a.alloc_confs.split(",")
        runs += [(name, conf) for conf in confs]
    for i, (name, conf) in enumerate(runs):
        env = dict(os.environ, PYTORCH_ALLOC_CONF=conf)
        cmd = [sys.executable, os.path.abspath(__file__), a.out, "--child", "--index", str(i), "--cases", name,
               "--steps", str(a.steps), "--frames", str(a.frames), "--max-entries", str(a.max_entries)]
        t = time.time()
        rc = subprocess.call(cmd + (["--dry-run"] if a.dry_run else []), env=env)
        path = os.path.join(a.out, "_%s_%d.json" % (name, i))
        if os.path.exists(path):
            with open(path) as f:
                summary["cases"].append(json.load(f))
            os.remove(path)
        else:
            summary["cases"].append({"case": name, "alloc_conf": conf, "error": "the process ended with %d" % rc})
        print("record_ranks_gpu.py: %s [%s] %.1f s" % (name, conf or "default", time.time() - t), flush=True)
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
    failed = [c["case"] for c in summary["cases"] if "error" in c]
    print("record_ranks_gpu.py: %d runs, failed: %s" % (len(summary["cases"]), ", ".join(failed) or "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
