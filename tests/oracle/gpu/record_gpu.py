#!/usr/bin/env python3
"""One short GPU recording session: CUDA caching-allocator snapshots of PyTorch 2.x training steps.

The CPU traces of the kit (trace_step.py) cannot show what only CUDA does: the SDPA backend chosen
on the GPU (flash / efficient / cuDNN and their workspaces, the math path's fp32 upcast), cuBLAS
workspaces, the caching allocator's blocks and segments. A session lent a GPU (minutes only) runs
this script once and copies what it writes into tests/data/gpu; memsim's cuda profile is then
checked against the snapshots (docs/device-memory.md).

Cases (each a fresh process state: the allocator is emptied and its statistics reset between them):
  nanogpt_fp32        nanoGPT GPT-2 small (graphs/llm_models.py, F.scaled_dot_product_attention,
                      is_causal), batch 4, seq 1024, AdamW, fp32
  nanogpt_bf16        the same under torch.autocast("cuda", torch.bfloat16)
  llama_bf16          a small Llama (transformers LlamaConfig, d 1024, 8 layers, 16 heads, 4 KV
                      heads, vocab 32000), batch 4, seq 1024, sdpa attention, autocast bf16, AdamW
  llama_bf16_sac      the same, every decoder layer checkpointed with torchtitan's selective policy
                      (the kit's --sac torchtitan)
  llama_lora_bf16     the same model in bf16 with peft LoRA r=16 on q_proj,v_proj (fp32 adapters,
                      peft's autocast_adapter_dtype), AdamW over the adapters

Each case runs --warmup steps, then records --steps steps with
torch.cuda.memory._record_memory_history (alloc/free events with Python frames cut to --frames
entries, so that a snapshot stays a few MiB) and writes CASE.pickle. summary.json holds, per case,
max_memory_allocated / max_memory_reserved per recorded step, the device's used memory before and
after (cudaMemGetInfo, what nvidia-smi shows), the SDPA backends enabled, the model's spec (to
export the same graph with tools/export_torch.py) and the versions.

Usage (GPU):      python3 tests/oracle/gpu/record_gpu.py OUTDIR [--cases a,b] [--steps 2]
Usage (no GPU):   python3 tests/oracle/gpu/record_gpu.py OUTDIR --dry-run   (every case, tiny sizes,
                  one step on the CPU, no snapshot: the ctest oracle.gpu_record_dry_run keeps the
                  script working on machines without a GPU)
"""
import argparse, json, os, pickle, sys, time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kit"))
sys.path.insert(1, os.path.join(HERE, "..", "..", "..", "graphs"))

LLAMA = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
             num_key_value_heads=4, max_position_embeddings=4096)
LLAMA_TINY = dict(LLAMA, vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2)
# case -> (model, autocast dtype or None, SAC, LoRA)
CASES = {"nanogpt_fp32": ("nanogpt", None, False, False), "nanogpt_bf16": ("nanogpt", torch.bfloat16, False, False),
         "llama_bf16": ("llama", torch.bfloat16, False, False), "llama_bf16_sac": ("llama", torch.bfloat16, True, False),
         "llama_lora_bf16": ("llama", None, False, True)}


def build(case, dry):
    """(model, vocab, spec for the exporter) of one case, on the CPU."""
    kind, _, sac, lora = CASES[case]
    torch.manual_seed(0)
    if kind == "nanogpt":
        import llm_models
        if dry:
            return llm_models.GPT(vocab_size=256, block_size=64, n_layer=2, n_head=2, n_embd=64), 256, "gpt2 (tiny)"
        factory, vocab = llm_models.LLM_MODELS["gpt2_small"]
        return factory(1024), vocab, "graphs/llm_models.py gpt2_small"
    import transformers
    kw = LLAMA_TINY if dry else LLAMA
    cfg = transformers.LlamaConfig(**kw)
    cfg._attn_implementation = "sdpa"; cfg.use_cache = False
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    spec = "hf:LlamaConfig:" + ",".join("%s=%s" % kv for kv in sorted(kw.items()))
    if sac:
        import trace_step
        n = trace_step._checkpoint_modules(model, r"model\.layers\.[0-9]+", sac="torchtitan")
        spec += " --checkpoint 'model.layers.*' --sac torchtitan (%d layers)" % n
    if lora:
        import trace_step
        model = trace_step.wrap_lora(model.to(torch.bfloat16), "r=16,alpha=32,targets=q_proj,v_proj")
        spec += ",dtype=bf16 --lora r=16,alpha=32,targets='*.q_proj,*.v_proj'"
    return model, kw["vocab_size"], spec


def step(model, opt, x, y, amp, dev):
    with torch.autocast(dev, dtype=amp, enabled=amp is not None):
        out = model(x)
        logits = out.logits if hasattr(out, "logits") else out
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
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


def run_case(case, a, dev):
    model, vocab, spec = build(case, a.dry_run)
    model = model.to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    batch, seq = (2, 32) if a.dry_run else (a.batch, a.seq)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, seq), generator=gen).to(dev)
    y = torch.randint(0, vocab, (batch, seq), generator=gen).to(dev)
    amp = CASES[case][1]
    row = {"case": case, "spec": spec, "batch": batch, "seq": seq, "optimizer": "adamw",
           "autocast": str(amp).replace("torch.", "") if amp else None,
           "parameters": sum(p.numel() for p in model.parameters()),
           "trainable": sum(p.numel() for p in params)}
    if dev == "cpu":
        step(model, opt, x, y, amp, dev)
        row["ran"] = "cpu dry run"
        return row
    for _ in range(a.warmup):
        step(model, opt, x, y, amp, dev)
    torch.cuda.synchronize()
    free0, total = torch.cuda.mem_get_info()
    torch.cuda.memory._record_memory_history(max_entries=a.max_entries, context="alloc", stacks="python")
    row["steps"] = []
    for _ in range(a.steps):
        torch.cuda.reset_peak_memory_stats()
        t = time.time()
        step(model, opt, x, y, amp, dev)
        torch.cuda.synchronize()
        row["steps"].append({"max_memory_allocated": torch.cuda.max_memory_allocated(),
                             "max_memory_reserved": torch.cuda.max_memory_reserved(),
                             "memory_allocated_after": torch.cuda.memory_allocated(), "seconds": time.time() - t})
    snap = cut_frames(torch.cuda.memory._snapshot(), a.frames)
    torch.cuda.memory._record_memory_history(enabled=None)
    free1, _ = torch.cuda.mem_get_info()
    row.update(device_used_before=total - free0, device_used_after=total - free1, device_total=total)
    with open(os.path.join(a.out, case + ".pickle"), "wb") as f:
        pickle.dump(snap, f)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--batch", type=int, default=4); ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=2); ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--frames", type=int, default=4); ap.add_argument("--max-entries", type=int, default=400000)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
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
                       alloc_conf=os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")),
                       sdpa={"flash": torch.backends.cuda.flash_sdp_enabled(),
                             "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                             "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                             "math": torch.backends.cuda.math_sdp_enabled()})
    for case in a.cases.split(","):
        try:
            summary["cases"].append(run_case(case, a, dev))
        except Exception as e:  # one failing case must not lose the others' snapshots
            summary["cases"].append({"case": case, "error": "%s: %s" % (type(e).__name__, e)})
        if dev == "cuda":
            torch.cuda.empty_cache()
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    failed = [c["case"] for c in summary["cases"] if "error" in c]
    print("record_gpu.py: %d cases, failed: %s" % (len(summary["cases"]), ", ".join(failed) or "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
