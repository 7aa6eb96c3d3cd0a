#!/usr/bin/env python3
"""memsim's per-rank cuda figures against rank 0 of real multi-GPU steps recorded on one GPU.

tests/data/gpu/h200_2_11_ranks/ holds what tests/oracle/gpu/record_ranks_gpu.py recorded on an
NVIDIA H200 (torch 2.11.0+cu130, transformers 5.17): rank 0 of Llama 3.1 8B under FSDP2 (and FSDP2
x TP) as torchtitan runs it, through PyTorch's fake process group (every collective a no-op, every
buffer allocated as on a real rank), two steps, under the default allocator settings and under
expandable segments. Each case is simulated by `memsim run` of graphs/llama3_8b.json with its
parameters marked float32 (fsdp2_mp_graph: the model is built in fp32, MixedPrecisionPolicy
computes in bf16) and the recording's settings.

Run by tools/validate.py (a section of docs/validation.md); alone: validate_gpu_ranks.py --memsim PATH.
"""
import json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "gpu", "h200_2_11_ranks")
GRAPH = os.path.join(ROOT, "graphs", "llama3_8b.json")
GIB = float(1 << 30)
TOLERANCE = 0.1  # % of the recorded per-step peak allocated
PHASES = ("forward", "backward", "step", "zero_grad")


def fsdp2_mp_graph(src, dst):
    """|src| (a graph exported in bf16, its casts recorded) with its parameters and buffers marked
    float32: the model FSDP2's MixedPrecisionPolicy(param_dtype=bf16) is built as (torchtitan
    builds it in fp32). The ops stay bf16: the policy binds them in param_dtype."""
    with open(src) as f:
        g = json.load(f)
    for t in g["parameters"] + g.get("buffers", []):
        if t.get("dtype") in ("bfloat16", "float16"):
            t["dtype"] = "float32"
    g["recorded_dtype"] = "bfloat16"  # its casts are recorded: no warning that they were lost
    g["provenance"] = g.get("provenance", "") + "; parameters and buffers marked float32 (built in fp32 for FSDP2 mixed precision)"
    with open(dst, "w") as f:
        json.dump(g, f)
    return dst


def torchtitan_loss_graph(src, dst):
    """|src| with torchtitan's loss: cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
    (torchtitan/components/loss.py): the logits upcast to fp32 before the cross entropy."""
    with open(src) as f:
        g = json.load(f)
    ops = g["ops"]
    view = next(i for i, o in enumerate(ops) if o["op"] == "view" and o["outputs"] == ["loss:logits"])
    ops.insert(view, {"op": "to_dtype", "module": "loss", "inputs": [ops[view]["inputs"][0]], "outputs": ["loss:pred_fp32"],
                      "attrs": {"dtype": "float32"}})
    ops[view + 1]["inputs"] = ["loss:pred_fp32"]
    g["provenance"] += "; torchtitan's loss: the logits cast to float32 before the cross entropy"
    with open(dst, "w") as f:
        json.dump(g, f)
    return dst


def torchtitan_args(mesh, sac=None, alloc_conf="", seq=8192):
    """The memsim options of torchtitan's Llama step as record_ranks_gpu.py runs it (batch 1, seq
    8192, every decoder layer checkpointed, FSDP2 on each layer then the root, bf16 / fp32
    mixed precision, meta-device init, AdamW, `loss = loss_fn(model(x), y)`)."""
    a = ["--mesh", mesh, "--wrap", "model.layers.*", "--fsdp2-mp", "param=bf16,reduce=fp32", "--init", "meta",
         "--checkpoint", "model.layers.*", "--set", "seq=%d" % seq, "--batch", "1", "--optimizer", "adamw",
         "--loop-holds", "loss", "--torch", "2.13"]
    if sac:
        a += ["--sac", sac]
    if alloc_conf:
        a += ["--alloc-conf", alloc_conf]
    return a


def case_run(c, graphs):
    """(graph, memsim options) of one recorded case: its mesh, policy, sequence and allocator; the
    TOML case (torchtitan's llama3_8b.toml as given) with torchtitan's loss, fused AdamW and grad clipping."""
    args = torchtitan_args(c["mesh"], c["sac"], c["alloc_conf"], c["seq"])
    if c.get("clip_grad_norm"):
        args += ["--foreach", "fused", "--clip-grad-norm", str(c["clip_grad_norm"])]
    if c.get("offload"):  # torchtitan's enable_cpu_offload: FSDP2's CPUOffloadPolicy
        args += ["--offload", "params"]
    return graphs["torchtitan" if c.get("loss", "").startswith("torchtitan") else "kit"], args


def rows(memsim, graphs):
    with open(os.path.join(DATA, "summary.json")) as f:
        s = json.load(f)
    out = []
    for c in s["cases"]:
        if "steps" not in c:
            continue
        graph, args = case_run(c, graphs)
        args += ["--gpu", "H200", "--steps", str(len(c["steps"]))]
        r = json.loads(subprocess.run([memsim, "run", graph] + args + ["--json"], check=True, capture_output=True,
                                      text=True).stdout)
        real = [max(st[p]["max_memory_allocated"] for p in PHASES) for st in c["steps"]]
        reserved = max(st[p]["max_memory_reserved"] for st in c["steps"] for p in PHASES)
        sim = [x["peak_live_bytes"] for x in r["steps"]]
        out.append((c, real, reserved, sim, r["peak_reserved_bytes"]))
    return s, out


def err(pred, real):
    return 100.0 * (pred - real) / real


def section(memsim):
    with tempfile.TemporaryDirectory() as tmp:
        kit = fsdp2_mp_graph(GRAPH, os.path.join(tmp, "llama3_8b_fp32.json"))
        s, rs = rows(memsim, {"kit": kit, "torchtitan": torchtitan_loss_graph(kit, os.path.join(tmp, "tt.json"))})
    failures = []
    lines = ["", "## Per rank on CUDA: rank 0 of Llama 3.1 8B under FSDP2 on one %s (PyTorch %s)" % (s["device"], s["torch"]), "",
             "Generated by `tools/validate_gpu_ranks.py` from `tests/data/gpu/h200_2_11_ranks/`, recorded by",
             "`tests/oracle/gpu/record_ranks_gpu.py`: rank 0 of an 8-GPU job run alone through PyTorch's `fake`",
             "process group (collectives are no-ops; every shard, all-gather and reduce-scatter buffer is allocated as on a",
             "real rank, on FSDP2's own CUDA streams), torchtitan's flow (meta-device init, FSDP2 on each decoder layer",
             "then the root, MixedPrecisionPolicy bf16 / fp32, every layer checkpointed, AdamW), batch 1, seq 8192, two",
             "steps. memsim: `memsim run graphs/llama3_8b.json` (parameters marked fp32) `%s --gpu H200 --steps 2 "
             "[--sac torchtitan] [--alloc-conf expandable_segments:True]`." % " ".join(
                 "'%s'" % x if "*" in x else x for x in torchtitan_args("MESH")),
             "Allocated = each step's `max_memory_allocated()` (memsim: the step's peak live bytes); reserved = the run's",
             "`max_memory_reserved()`. Tolerance: allocated within %.1f %%; reserved is reported." % TOLERANCE, "",
             "The `toml` rows are torchtitan's llama3_8b.toml as given (its loss upcasts the logits to fp32, fused AdamW,",
             "`clip_grad_norm_(1.0)`: memsim `--foreach fused --clip-grad-norm 1.0` on the graph with that loss); the",
             "`cp=8` rows a 131072-token sequence under context parallelism (ring attention, all-gather rotation) with",
             "FSDP2 over the 16 ranks of dp_shard × cp; the `CPU offload` rows torchtitan's `enable_cpu_offload` (FSDP2's",
             "`CPUOffloadPolicy(pin_memory=True)`: shards, grads and AdamW state in pinned host memory, each unshard",
             "copying the host shards to the device; memsim `--offload params`, recorded in a later session).", "",
             "| mesh | seq | AC | recipe | allocator | step 1 allocated: recorded | memsim | error | step 2: recorded | memsim | error | reserved: recorded | memsim | error |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c, real, reserved, sim, sim_res in rs:
        cells = []
        for k in range(len(real)):
            e = err(sim[k], real[k])
            if abs(e) > TOLERANCE:
                failures.append("gpu ranks %s %s step %d: %.3f %% (tolerance %.1f %%)" % (c["case"], c["alloc_conf"], k + 1, e, TOLERANCE))
            cells.append("%.3f GiB | %.3f GiB | %+.3f %%" % (real[k] / GIB, sim[k] / GIB, e))
        lines.append("| %s | %d | %s | %s | %s | %s | %.3f GiB | %.3f GiB | %+.3f %% |" % (
            c["mesh"], c["seq"], "selective (torchtitan op policy)" if c["sac"] else "full",
            ("toml" if c.get("clip_grad_norm") else "kit") + (", CPU offload" if c.get("offload") else ""),
            c["alloc_conf"] or "default",
            " | ".join(cells), reserved / GIB, sim_res / GIB, err(sim_res, reserved)))
    return lines, failures


if __name__ == "__main__":
    import validate_gpu
    sys.exit(validate_gpu.main(section, __doc__))
