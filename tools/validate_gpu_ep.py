#!/usr/bin/env python3
"""memsim's per-rank cuda figures against the expert-parallel ranks of Mixtral 8x7B recorded on one GPU.

tests/data/gpu/h200_2_11_ep/ holds what tests/oracle/gpu/record_ep_gpu.py records on an NVIDIA H200 (torch
2.11): ranks of torchtitan's MoE recipe for Mixtral 8x7B (EP 8 borrowing FSDP2's dp_shard ranks on 8, 16 and
64 GPUs, every layer checkpointed, MixedPrecisionPolicy(bf16, fp32), meta-device init, fused AdamW, batch 1 x
8192 tokens per rank, balanced routing forced by the recorder), each run alone through PyTorch's fake process
group, two steps. Each is simulated by its plan of docs/scenarios/llm_parallel.md section 4
(tools/scenarios/llm_parallel.py mixtral_plans()) on an H200; where the recording wrapped the experts apart
(torch 2.11's fully_shard takes no mesh per parameter: the summary's fsdp_flow "experts-apart"), with each
layer's experts a --wrap of their own before the layer's.

Compared per rank and phase: the recorded max_memory_allocated of forward (model and loss), backward and the
optimizer (step, zero_grad), the highest over the steps, against memsim's phase peaks of live bytes; the run's
max_memory_allocated / max_memory_reserved against memsim's peak allocated / reserved.

Alone: validate_gpu_ep.py [--memsim build/memsim] [--data DIR] (DIR: a record_ep_gpu.py output; a --dry-run's
has no device figures: its rows show memsim's alone, as a check of this script). Not yet a section of
tools/validate.py: it becomes one once the recording is in tests/data/gpu/h200_2_11_ep/.
"""
import json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "scenarios"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
DATA = os.path.join(ROOT, "tests", "data", "gpu", "h200_2_11_ep")
GIB = float(1 << 30)
TOLERANCE = 1.0  # % of the recorded peak allocated, each rank (the pipeline ranks' tolerance)
TOLERANCE_RESERVED = 3.0  # % of the recorded peak reserved, each rank
# recorded phase -> memsim's phase of the rank's phase_peaks
PHASES = (("forward", ("forward",), "forward"), ("backward", ("backward",), "backward"),
          ("optimizer", ("step", "zero_grad"), "optimizer"))


def recorded(c):
    """{phase: the highest max_memory_allocated over the steps}, and the run's (allocated, reserved) peaks."""
    phases = {name: max(st[p]["max_memory_allocated"] for st in c["steps"] for p in rec) for name, rec, _ in PHASES}
    runs = [v for st in c["steps"] for v in st.values() if isinstance(v, dict)]
    return phases, (max(p["max_memory_allocated"] for p in runs), max(p["max_memory_reserved"] for p in runs))


def plan_args(c):
    """The scenario page's plan of the recorded row |c| on an H200, under its allocator settings, steps and
    sequence, and its FSDP2 flow: (label, memsim options)."""
    import llm_parallel
    label, world, args = llm_parallel.mixtral_plans()[c["plan"]]
    mesh = args[args.index("--mesh") + 1]
    if mesh != c["mesh"]:
        sys.exit("validate_gpu_ep.py: %s: the recording's mesh %s is not its plan's (%s)" % (c["case"], c["mesh"], mesh))
    if ("--checkpoint" in args) != (c["ac"] == "full"):
        sys.exit("validate_gpu_ep.py: %s: the recording's checkpointing is not its plan's" % c["case"])
    args = ["H200" if x == "H100-80GB" else x for x in args]
    args[args.index("--steps") + 1] = str(len(c["steps"]))
    args[args.index("seq=8192")] = "seq=%d" % c["seq"]
    if "expandable_segments:True" not in c["alloc_conf"]:  # the page's plans use expandable segments
        i = args.index("--alloc-conf")
        del args[i:i + 2]
    if c.get("fsdp_flow") == "experts-apart":  # each layer's experts a fully_shard call of their own, before the layer's
        i = args.index("--wrap")
        args[i:i] = ["--wrap", "layers.*.moe.experts"]
    return label, args


def rows(memsim, graph, data):
    with open(os.path.join(data, "summary.json")) as f:
        s = json.load(f)
    runs, out = {}, []
    for c in s["cases"]:
        if "steps" not in c:
            continue
        label, args = plan_args(c)
        key = tuple(args)
        if key not in runs:
            r = subprocess.run([memsim, "run", graph] + args + ["--json"], check=True, capture_output=True, text=True)
            runs[key] = json.loads(r.stdout)
        sim = next(x for x in runs[key]["ranks"] if c["rank"] in x["ranks"])
        rec = recorded(c) if all("forward" in st for st in c["steps"]) else None  # a dry run has no device figures
        out.append((c, label, args, rec, sim))
    return s, out


def err(pred, real):
    return 100.0 * (pred - real) / real


def cells(rec, sim):
    """The table's figures of one rank: run peaks allocated and reserved, then each phase's error."""
    gib = lambda b: "%.3f GiB" % (b / GIB)
    if rec is None:
        return ["—", gib(sim["peak_allocated_bytes"]), "", "—", gib(sim["peak_reserved_bytes"]), "", "—"]
    phases, (alloc, res) = rec
    per = ", ".join("%s %+.2f %%" % (name, err(sim["phase_peaks"][m], phases[name])) for name, _, m in PHASES)
    return [gib(alloc), gib(sim["peak_allocated_bytes"]), "%+.2f %%" % err(sim["peak_allocated_bytes"], alloc),
            gib(res), gib(sim["peak_reserved_bytes"]), "%+.2f %%" % err(sim["peak_reserved_bytes"], res), per]


def section(memsim, data=DATA):
    import validate_gpu_ranks as vr
    import llm_parallel
    with tempfile.TemporaryDirectory() as tmp:
        graph = vr.fsdp2_mp_graph(llm_parallel.GRAPH_MIXTRAL, os.path.join(tmp, "mixtral_8x7b_fp32.json"))
        s, rs = rows(memsim, graph, data)
    lines = ["", "## Per rank on CUDA: the expert-parallel ranks of Mixtral 8x7B (EP 8 × FSDP2) on one %s (PyTorch %s)"
             % (s.get("device", "CPU (dry run)"), s["torch"]), "",
             "Generated by `tools/validate_gpu_ep.py` from `%s`, recorded by" % os.path.relpath(data, ROOT),
             "`tests/oracle/gpu/record_ep_gpu.py`: ranks of the plans of `docs/scenarios/llm_parallel.md` section 4 run",
             "alone through PyTorch's `fake` process group (collectives are no-ops; every shard, FSDP2 buffer on both",
             "meshes, dispatch and combine buffer is allocated as on a real rank), the router forced to the balanced",
             "routing the page simulates (each expert tokens × 2 / 8 rows from every rank) and the counts' all-to-all",
             "made to return what a symmetric world sends, two steps. memsim: that page's plans with `--gpu H200`; a",
             "recording whose torch has no per-parameter FSDP2 mesh wraps each layer's experts apart (torchtitan's flow",
             "before it), simulated with `--wrap 'layers.*.moe.experts'` before `--wrap 'layers.*'`. Allocated = the",
             "run's highest `max_memory_allocated()` (memsim: the rank's peak allocated); reserved = its",
             "`max_memory_reserved()`; per phase: the recorded `max_memory_allocated()` of forward (model and loss),",
             "backward and the optimizer (step and zero_grad) against memsim's phase peaks. Tolerance: allocated within",
             "%.1f %% on every rank, reserved within %.1f %%; the phases are reported." % (TOLERANCE, TOLERANCE_RESERVED), "",
             "| plan | FSDP2 flow | allocator | rank | allocated: recorded | memsim | error | reserved: recorded | memsim | error | per phase |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    failures, errors = [], []
    for c, label, args, rec, sim in rs:
        if rec is not None:
            e = err(sim["peak_allocated_bytes"], rec[1][0])
            errors.append(abs(e))
            r = err(sim["peak_reserved_bytes"], rec[1][1])
            for what, x, tol in (("allocated", e, TOLERANCE), ("reserved", r, TOLERANCE_RESERVED)):
                if abs(x) > tol:
                    failures.append("gpu ep %s %s rank %d: %s %.3f %% (tolerance %.1f %%)" % (
                        c["case"], c["alloc_conf"] or "default", c["rank"], what, x, tol))
        lines.append("| %s | %s | %s | %d | %s |" % (
            label, c.get("fsdp_flow", "per-parameter"), "expandable" if "expandable" in c["alloc_conf"] else "default",
            c["rank"], " | ".join(cells(rec, sim))))
    errors.sort()
    lines += ["", "%d ranks (%d recorded on the device): allocated error median %.2f %%, worst %.2f %%." % (
        len(rs), len(errors), errors[len(errors) // 2] if errors else 0.0, errors[-1] if errors else 0.0)]
    return lines, failures


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import validate_gpu
    sys.exit(validate_gpu.main(section, __doc__, DATA))
