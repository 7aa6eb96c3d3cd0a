#!/usr/bin/env python3
"""One short GPU recording session: CUDA caching-allocator snapshots of PyTorch 2.x training steps.

The CPU traces of the kit (trace_step.py) cannot show what only CUDA does: the SDPA backend chosen
on the GPU (flash / efficient / cuDNN and their workspaces, the math path's fp32 upcast), cuBLAS
workspaces, cuDNN convolution workspaces and RNN reserve space, the caching allocator's blocks and
segments, the CUDA context and NCCL outside the allocator. A session lent a GPU (minutes only) runs
this script once and copies what it writes into tests/data/gpu; memsim's cuda profile is then
checked against the snapshots (docs/device-memory.md).

Cases (the allocator is emptied and its peak statistics reset between them). The language models
take the kit's loss, F.cross_entropy(logits.view(-1, V), y.view(-1)), inside autocast when there is
one; every case steps torch.optim.AdamW (foreach, PyTorch's CUDA default) and zero_grad(set_to_none):
  mlp_fp32              the kit's mlp (1000 -> 4 x 100 -> 10), batch 256, fp32
  nanogpt_fp32          nanoGPT GPT-2 small (graphs/llm_models.py, F.scaled_dot_product_attention,
                        is_causal), batch 4, seq 1024, fp32, SDPA backends as PyTorch picks
  nanogpt_bf16          the same under torch.autocast("cuda", torch.bfloat16)
  nanogpt_bf16_{flash,efficient,cudnn,math}
                        the same with one SDPA backend forced (torch.nn.attention.sdpa_kernel)
  llama_bf16            a small Llama (transformers LlamaConfig, d 1024, 8 layers, 16 heads, 4 KV
                        heads, vocab 32000), batch 4, seq 1024, sdpa attention, autocast bf16
  llama_bf16_sac        the same, every decoder layer checkpointed with torchtitan's selective policy
                        (the kit's --sac torchtitan)
  llama_lora_bf16       the same model in bf16 with peft LoRA r=16 on q_proj,v_proj (fp32 adapters,
                        peft's autocast_adapter_dtype), AdamW over the adapters, no autocast
  resnet18_fp32         torchvision resnet18, batch 64, 3 x 224 x 224, cross entropy, fp32
                        (cudnn.benchmark off: cuDNN's heuristics pick the algorithms)
  resnet18_bf16         the same under autocast bf16
  lstm_fp32             LSTMLM below: embedding 10000 x 512, nn.LSTM(512, 1024, 2 layers), linear to
                        the vocabulary, batch 32, seq 256 (cuDNN's fused RNN: weight buffer, reserve
                        space, workspace)
  nanogpt_bf16_compiled nanoGPT bf16 under torch.compile (Inductor, Triton), compiled in the warm-up
  llama_d128_bf16[_flash|_efficient|_math]
                        a two-layer Llama with Llama-3's head dim 128 (d 2048, 16 heads, 4 KV heads),
                        batch 2, seq 2048, autocast bf16, SDPA as PyTorch picks or forced
Probes (summary.json, no snapshot): `context` reads the device's used memory (cudaMemGetInfo, what
nvidia-smi shows) minus the allocator's reserved bytes after each library's first use (context,
first kernel, cuBLAS fp32 and bf16 GEMMs, cuDNN convolution, SDPA); `nccl` does the same around a
one-rank NCCL process group's first all_reduce.

Each case runs --warmup steps, then records --steps steps with
torch.cuda.memory._record_memory_history (alloc/free events with Python frames cut to --frames
entries) and stores CASE.pickle.gz in snapshots_K.tar (each tar under 15 MiB). summary.json (written
after every case, so that a run stopped early keeps what it did) holds per case max_memory_allocated
/ max_memory_reserved per recorded step, allocator counters, the device's used memory before and
after, the model's spec (to export the same graph with tools/export_torch.py) and the versions.

Usage (GPU):      python3 tests/oracle/gpu/record_gpu.py OUTDIR [--cases a,b] [--steps 2]
Usage (no GPU):   python3 tests/oracle/gpu/record_gpu.py OUTDIR --dry-run   (every case at tiny sizes,
                  one step on the CPU, no snapshot, no forced SDPA backend, no compile, cases whose
                  package is missing skipped: the ctest oracle.gpu_record_dry_run keeps the script
                  working on machines without a GPU)
"""
import argparse, contextlib, gzip, json, os, pickle, sys, tarfile, time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kit"))
sys.path.insert(1, os.path.join(HERE, "..", "..", "..", "graphs"))

LLAMA = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
             num_key_value_heads=4, max_position_embeddings=4096)
LLAMA_TINY = dict(LLAMA, vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2)
# Llama-3's head dim (128) and GQA ratio (4), two layers
LLAMA_D128 = dict(LLAMA, hidden_size=2048, intermediate_size=5632, num_hidden_layers=2, num_attention_heads=16,
                  num_key_value_heads=4)
BF16 = torch.bfloat16
# case -> model, autocast dtype, options (sac, lora, sdpa backend, compile); sizes per model in SIZES
CASES = {"mlp_fp32": ("mlp", None, {}), "nanogpt_fp32": ("nanogpt", None, {}), "nanogpt_bf16": ("nanogpt", BF16, {}),
         "nanogpt_bf16_flash": ("nanogpt", BF16, {"sdpa": "FLASH_ATTENTION"}),
         "nanogpt_bf16_efficient": ("nanogpt", BF16, {"sdpa": "EFFICIENT_ATTENTION"}),
         "nanogpt_bf16_cudnn": ("nanogpt", BF16, {"sdpa": "CUDNN_ATTENTION"}),
         "nanogpt_bf16_math": ("nanogpt", BF16, {"sdpa": "MATH"}),
         "llama_bf16": ("llama", BF16, {}), "llama_bf16_sac": ("llama", BF16, {"sac": True}),
         "llama_lora_bf16": ("llama", None, {"lora": True}),
         "resnet18_fp32": ("resnet18", None, {}), "resnet18_bf16": ("resnet18", BF16, {}),
         "lstm_fp32": ("lstm", None, {}), "nanogpt_bf16_compiled": ("nanogpt", BF16, {"compile": True}),
         "llama_d128_bf16": ("llama_d128", BF16, {}),
         "llama_d128_bf16_flash": ("llama_d128", BF16, {"sdpa": "FLASH_ATTENTION"}),
         "llama_d128_bf16_efficient": ("llama_d128", BF16, {"sdpa": "EFFICIENT_ATTENTION"}),
         "llama_d128_bf16_math": ("llama_d128", BF16, {"sdpa": "MATH"})}
# model -> (batch, seq or image side) on the GPU and in a dry run
SIZES = {"mlp": ((256, None), (8, None)), "nanogpt": ((4, 1024), (2, 32)), "llama": ((4, 1024), (2, 32)),
         "llama_d128": ((2, 2048), (2, 32)),
         "resnet18": ((64, 224), (2, 32)), "lstm": ((32, 256), (2, 16))}


class LSTMLM(nn.Module):
    """Embedding -> nn.LSTM (cuDNN's fused kernel on a GPU) -> linear over the vocabulary."""
    def __init__(self, vocab=10000, d=512, hidden=1024, layers=2):
        super().__init__()
        self.emb, self.rnn, self.head = nn.Embedding(vocab, d), nn.LSTM(d, hidden, layers, batch_first=True), nn.Linear(hidden, vocab)

    def forward(self, ids):
        return self.head(self.rnn(self.emb(ids))[0])


def build(case, dry):
    """(model, vocab or classes, input kind, spec for the exporter) of one case, on the CPU."""
    kind, _, opt = CASES[case]
    torch.manual_seed(0)
    if kind == "mlp":
        import trace_step
        return trace_step.mlp()[0], 10, "vec1000", "tests/oracle/kit/trace_step.py mlp"
    if kind == "nanogpt":
        import llm_models
        if dry:
            return llm_models.GPT(vocab_size=256, block_size=64, n_layer=2, n_head=2, n_embd=64), 256, "ids", "gpt2 (tiny)"
        factory, vocab = llm_models.LLM_MODELS["gpt2_small"]
        return factory(1024), vocab, "ids", "graphs/llm_models.py gpt2_small"
    if kind == "resnet18":
        import torchvision
        return torchvision.models.resnet18(), 1000, "image", "torchvision:resnet18"
    if kind == "lstm":
        m = LSTMLM(256, 32, 64, 2) if dry else LSTMLM()
        return m, m.head.out_features, "ids", "tests/oracle/gpu/record_gpu.py LSTMLM (vocab 10000, d 512, hidden 1024, 2 layers)"
    import transformers
    kw = LLAMA_TINY if dry else LLAMA_D128 if kind == "llama_d128" else LLAMA
    cfg = transformers.LlamaConfig(**kw)
    cfg._attn_implementation = "sdpa"; cfg.use_cache = False
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    spec = "hf:LlamaConfig:" + ",".join("%s=%s" % kv for kv in sorted(kw.items()))
    if opt.get("sac"):
        import trace_step
        n = trace_step._checkpoint_modules(model, r"model\.layers\.[0-9]+", sac="torchtitan")
        spec += " --checkpoint 'model.layers.*' --sac torchtitan (%d layers)" % n
    if opt.get("lora"):
        import trace_step
        model = trace_step.wrap_lora(model.to(BF16), "r=16,alpha=32,targets=q_proj,v_proj")
        spec += ",dtype=bf16 --lora r=16,alpha=32,targets='*.q_proj,*.v_proj'"
    return model, kw["vocab_size"], "ids", spec


def step(model, opt, x, y, amp, dev, sdpa):
    with sdpa(), torch.autocast(dev, dtype=amp or BF16, enabled=amp is not None):
        out = model(x)
        logits = out.logits if hasattr(out, "logits") else out
        loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def cut_frames(snapshot, keep):
    """The snapshot with every event's and block's frames cut to |keep| entries (sizes stay whole)."""
    for trace in snapshot.get("device_traces", []):
        for e in trace:
            e["frames"] = e.get("frames", [])[:keep]
    for seg in snapshot.get("segments", []):
        for b in seg.get("blocks", []):
            b["frames"] = b.get("frames", [])[:keep]
    return snapshot


def store(out, name, obj, limit=15 << 20):
    """Pickle |obj| gzipped into the last snapshots_K.tar of |out| that stays under |limit| bytes."""
    path = os.path.join(out, name + ".pickle.gz")
    with gzip.open(path, "wb", compresslevel=6) as f:
        pickle.dump(obj, f)
    k = 1
    while os.path.exists(os.path.join(out, "snapshots_%d.tar" % k)) and \
            os.path.getsize(os.path.join(out, "snapshots_%d.tar" % k)) + os.path.getsize(path) > limit:
        k += 1
    with tarfile.open(os.path.join(out, "snapshots_%d.tar" % k), "a") as t:
        t.add(path, arcname=os.path.basename(path))
    os.remove(path)


def inputs(kind, vocab, batch, seq, dev):
    gen = torch.Generator().manual_seed(0)
    if kind == "image":
        x = torch.randn(batch, 3, seq, seq, generator=gen)
        y = torch.randint(0, vocab, (batch,), generator=gen)
    elif kind == "vec1000":
        x, y = torch.randn(batch, 1000, generator=gen), torch.randint(0, vocab, (batch,), generator=gen)
    else:
        x = torch.randint(0, vocab, (batch, seq), generator=gen)
        y = torch.randint(0, vocab, (batch, seq), generator=gen)
    return x.to(dev), y.to(dev)


STATS = ("num_alloc_retries", "num_device_alloc", "num_device_free", "segment.all.current", "segment.all.peak",
         "allocation.all.peak", "inactive_split_bytes.all.peak", "oversize_allocations.peak")


def run_case(case, a, dev):
    kind, amp, o = CASES[case]
    model, vocab, inp, spec = build(case, a.dry_run)
    if a.from_start and dev == "cuda":  # the whole stream: parameters, inputs, every step
        torch.cuda.memory._record_memory_history(max_entries=a.max_entries, context="alloc", stacks="python")
    model = model.to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    batch, seq = SIZES[kind][1 if a.dry_run else 0]
    x, y = inputs(inp, vocab, batch, seq, dev)
    row = {"case": case, "spec": spec, "batch": batch, "seq": seq, "optimizer": "adamw (foreach)",
           "autocast": str(amp).replace("torch.", "") if amp else None, "sdpa_forced": o.get("sdpa"),
           "compiled": bool(o.get("compile")), "parameters": sum(p.numel() for p in model.parameters()),
           "trainable": sum(p.numel() for p in params)}
    sdpa = contextlib.nullcontext
    if o.get("sdpa") and dev == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        sdpa = lambda: sdpa_kernel(getattr(SDPBackend, o["sdpa"]))
    if dev == "cpu":
        step(model, opt, x, y, amp, dev, sdpa)
        row["ran"] = "cpu dry run"
        return row
    if o.get("compile"):
        model = torch.compile(model)
    t = time.time()
    for _ in range(a.warmup):
        step(model, opt, x, y, amp, dev, sdpa)
    torch.cuda.synchronize()
    row["warmup_seconds"] = time.time() - t
    free0, total = torch.cuda.mem_get_info()
    row["reserved_before"] = torch.cuda.memory_reserved()
    row["allocated_before"] = torch.cuda.memory_allocated()
    if not a.from_start:
        torch.cuda.memory._record_memory_history(max_entries=a.max_entries, context="alloc", stacks="python")
    row["steps"] = []
    for _ in range(a.steps):
        torch.cuda.reset_peak_memory_stats()
        t = time.time()
        step(model, opt, x, y, amp, dev, sdpa)
        torch.cuda.synchronize()
        row["steps"].append({"max_memory_allocated": torch.cuda.max_memory_allocated(),
                             "max_memory_reserved": torch.cuda.max_memory_reserved(),
                             "memory_allocated_after": torch.cuda.memory_allocated(), "seconds": time.time() - t})
    snap = cut_frames(torch.cuda.memory._snapshot(), a.frames)
    torch.cuda.memory._record_memory_history(enabled=None)
    free1, _ = torch.cuda.mem_get_info()
    stats = torch.cuda.memory_stats()
    row["stats"] = {k: stats.get(k) for k in STATS}
    row.update(device_used_before=total - free0, device_used_after=total - free1, device_total=total,
               reserved_after=torch.cuda.memory_reserved())
    store(a.out, case, snap)
    del model, opt, params, x, y, snap
    return row


def used():
    free, total = torch.cuda.mem_get_info()
    return {"device_used": total - free, "reserved": torch.cuda.memory_reserved(),
            "allocated": torch.cuda.memory_allocated()}


def context_probe():
    """The device's used memory after each library's first use (lazy module loading decides when a
    kernel's module is loaded), beside the allocator's reserved bytes."""
    rows = [dict(used(), after="cuda init")]
    a = torch.ones(1, device="cuda"); torch.cuda.synchronize()
    rows.append(dict(used(), after="first kernel (torch.ones)"))
    m = torch.randn(1024, 1024, device="cuda"); (m @ m).sum().item()
    rows.append(dict(used(), after="cuBLAS fp32 GEMM"))
    mb = m.to(BF16); (mb @ mb).float().sum().item()
    rows.append(dict(used(), after="cuBLAS(Lt) bf16 GEMM"))
    conv = nn.Conv2d(3, 64, 7, 2, 3).cuda()
    conv(torch.randn(8, 3, 224, 224, device="cuda")).sum().backward(); torch.cuda.synchronize()
    rows.append(dict(used(), after="cuDNN conv2d forward + backward"))
    q = torch.randn(2, 8, 256, 64, device="cuda", dtype=BF16, requires_grad=True)
    nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward(); torch.cuda.synchronize()
    rows.append(dict(used(), after="SDPA bf16 forward + backward"))
    del a, m, mb, conv, q
    torch.cuda.empty_cache()
    rows.append(dict(used(), after="empty_cache"))
    return rows


def nccl_probe():
    """Used memory outside the allocator around a one-rank NCCL group's first all_reduce."""
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
    rows = [dict(used(), after="before init_process_group")]
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    rows.append(dict(used(), after="init_process_group (nccl, world 1)"))
    t = torch.ones(1 << 20, device="cuda"); dist.all_reduce(t); torch.cuda.synchronize()
    rows.append(dict(used(), after="first all_reduce (4 MiB)"))
    dist.destroy_process_group()
    rows.append(dict(used(), after="destroy_process_group"))
    return {"nccl_version": ".".join(map(str, torch.cuda.nccl.version())), "rows": rows}


def fresh_processes(a):
    """Each case in a process of its own (same options, no probes), |a.jobs| at a time."""
    import subprocess, shutil
    os.makedirs(a.out, exist_ok=True)
    base = [sys.executable, os.path.abspath(__file__), "--warmup", str(a.warmup), "--steps", str(a.steps),
            "--frames", str(a.frames), "--max-entries", str(a.max_entries), "--no-probes"]
    base += ["--from-start"] if a.from_start else []
    base += ["--dry-run"] if a.dry_run else []
    cases, running, summary = a.cases.split(","), [], None
    for case in cases + [None] * a.jobs:
        while running and (len(running) >= a.jobs or case is None):
            running.pop(0).wait()
        if case:
            d = os.path.join(a.out, "_" + case)
            running.append(subprocess.Popen(base + [d, "--cases", case]))
    for case in cases:
        d = os.path.join(a.out, "_" + case)
        with open(os.path.join(d, "summary.json")) as f:
            one = json.load(f)
        if summary is None:
            summary = dict(one, cases=[], fresh_process_per_case=True)
        summary["cases"] += one["cases"]
        for name in sorted(os.listdir(d)):
            if name.endswith(".tar"):
                with tarfile.open(os.path.join(d, name)) as t:
                    for m in t.getmembers():
                        store(a.out, m.name[:-len(".pickle.gz")], pickle.loads(gzip.decompress(t.extractfile(m).read())))
        shutil.rmtree(d)
    write(a.out, summary)
    failed = [c["case"] for c in summary["cases"] if "error" in c]
    print("record_gpu.py: %d cases in fresh processes, failed: %s" % (len(summary["cases"]), ", ".join(failed) or "none"))
    return 1 if failed else 0


def write(out, summary):
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--warmup", type=int, default=2); ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--frames", type=int, default=4); ap.add_argument("--max-entries", type=int, default=400000)
    ap.add_argument("--no-probes", action="store_true", help="skip the context and NCCL probes")
    ap.add_argument("--from-start", action="store_true",
                    help="record from before the model moves to the device (with --warmup 0: the whole stream)")
    ap.add_argument("--jobs", type=int, default=0,
                    help="run each case in a fresh process (a cold start: no cuBLAS workspace or segment left by "
                         "another case), at most JOBS at once; the parent merges their summaries and snapshots")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    if a.jobs:
        return fresh_processes(a)
    unknown = [c for c in a.cases.split(",") if c not in CASES]
    if unknown:
        sys.exit("record_gpu.py: --cases: unknown %s (known: %s)" % (",".join(unknown), ",".join(CASES)))
    dev = "cpu" if a.dry_run else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("record_gpu.py: no CUDA device here; --dry-run checks the script on the CPU")
    os.makedirs(a.out, exist_ok=True)
    summary = {"torch": torch.__version__, "cuda": torch.version.cuda, "cases": []}
    if dev == "cuda":
        summary.update(device=torch.cuda.get_device_name(), capability=list(torch.cuda.get_device_capability()),
                       cudnn=torch.backends.cudnn.version(), lazy_loading=os.environ.get("CUDA_MODULE_LOADING"),
                       alloc_conf=os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")),
                       sdpa={"flash": torch.backends.cuda.flash_sdp_enabled(),
                             "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                             "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                             "math": torch.backends.cuda.math_sdp_enabled()})
        if not a.no_probes:
            summary["context"] = context_probe()
            try:
                summary["nccl"] = nccl_probe()
            except Exception as e:
                summary["nccl"] = {"error": "%s: %s" % (type(e).__name__, e)}
            torch.cuda.empty_cache()
            write(a.out, summary)
    for case in a.cases.split(","):
        t = time.time()
        try:
            summary["cases"].append(run_case(case, a, dev))
        except ModuleNotFoundError as e:
            if dev == "cuda":
                raise
            summary["cases"].append({"case": case, "skipped": "dry run: %s" % e})
        except Exception as e:  # one failing case must not lose the others' snapshots
            summary["cases"].append({"case": case, "error": "%s: %s" % (type(e).__name__, e)})
        summary["cases"][-1]["case_seconds"] = round(time.time() - t, 1)
        print("record_gpu.py: %s %.1f s" % (case, time.time() - t), flush=True)
        if dev == "cuda":
            torch.cuda.empty_cache()
        write(a.out, summary)
    failed = [c["case"] for c in summary["cases"] if "error" in c]
    skipped = [c["case"] for c in summary["cases"] if "skipped" in c]
    print("record_gpu.py: %d cases, failed: %s, skipped: %s" % (len(summary["cases"]), ", ".join(failed) or "none",
                                                               ", ".join(skipped) or "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
