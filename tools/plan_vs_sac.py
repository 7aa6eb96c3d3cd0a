#!/usr/bin/env python3
"""Compares memsim with PyTorch's Auto-SAC MILP (torch.distributed._tools.sac_ilp) on the same
model and budgets, and writes docs/plan-sac.md (issue 30). Run with the torch 2.x environment's
Python (torch 2.13 with PuLP and pwlf, requirements/torch2.txt):

  .venv/bin/python tools/plan_vs_sac.py [--build build] [--out docs/plan-sac.md] [--batch 4] [--seq 512]

Auto-SAC's pipeline runs as PyTorch's own test runs it (test/distributed/_tools/test_sac_ilp.py):
MemTracker, RuntimeEstimator and SACEstimator under FakeTensorMode, then aggregate_stats,
parse_module_info, sac_milp and get_optimal_checkpointing_policy_per_module. On a CPU-only
machine three CUDA-only pieces are substituted (SUBSTITUTIONS below; each is written into the
page). The MILP's decisions are translated to `memsim run` flags and simulated; memsim's own
candidates (the checkpointings `memsim plan` searches) are simulated at the same batch.
"""
import argparse
import contextlib
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, ".."))
# The model exported under torch 2.13 (SDPA attention, as llm_models.gpt2_small runs under 2.x).
GRAPH = "tests/data/traces_2_13/graphs/nanogpt_gpt2_small.json"
GPU = "A100-80GB"
N_LAYER = 12
GiB = 2**30


def gib(b):
    return "%.2f GiB" % (b / GiB)


def memsim_report(build, B, S, flags, optimizer="none", step="steady"):
    """memsim's report (JSON) of one steady-state step, the CPU profile under 2.13 rules, by default
    with no optimizer (the MILP's memory scope: parameters, gradients, activations; no optimizer states)."""
    cmd = [os.path.join(build, "memsim"), "run", GRAPH, "--profile", "cpu", "--torch", "2.13",
           "--optimizer", optimizer, "--step", step, "--batch", str(B), "--set", "seq=%d" % S, "--json"] + flags
    out = subprocess.run(cmd, cwd=SRC, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def memsim_peak(build, B, S, flags):
    return memsim_report(build, B, S, flags)["peak_live_bytes"]


def block_order(path):
    """transformer.h.10 after transformer.h.9."""
    return [int(t) if t.isdigit() else t for t in path.split(".")]


def first_line(e):
    s = str(e).strip()
    return ("%s: %s" % (type(e).__name__, s.splitlines()[0] if s else "")).replace("|", "\\|")


def gpu_rates():
    rows = {r["gpu"]: r for r in json.load(open(os.path.join(SRC, "sim", "data", "gpu_perf.json")))["rows"]}
    return rows[GPU]


@contextlib.contextmanager
def cuda_substitutes(rates):
    """The roofline estimator's CUDA-only inputs, replaced while the estimators run (and restored):
    the GPU's peak FLOP/s and DRAM bandwidth from memsim's catalog, and torch.cuda.is_available()
    (which RuntimeEstimator._roofline_estimate asserts) answered True."""
    import torch
    import torch.utils._runtime_estimation as re_mod
    saved = (re_mod.get_device_tflops, re_mod.get_gpu_dram_gbps, torch.cuda.is_available)
    tflops = {torch.float32: rates["fp32_tflops"], torch.float64: rates["fp32_tflops"],
              torch.float16: rates["fp16_tflops"], torch.bfloat16: rates["bf16_tflops"]}
    re_mod.get_device_tflops = lambda dtype: tflops[dtype]
    re_mod.get_gpu_dram_gbps = lambda: rates["hbm_gbps"]
    torch.cuda.is_available = lambda: True
    try:
        yield
    finally:
        re_mod.get_device_tflops, re_mod.get_gpu_dram_gbps, torch.cuda.is_available = saved


def fake_cuda_outcome():
    """Whether FakeTensorMode makes fake CUDA tensors with this (CPU) build of torch."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    try:
        with FakeTensorMode():
            torch.empty(4).to("cuda")
        return "ok"
    except Exception as e:  # noqa: BLE001 - the page reports whatever is raised
        return first_line(e)


def ops_unchanged_by_patch(rates):
    """Whether one step's ATen ops (with output shapes) under FakeTensorMode are the same with and
    without cuda_substitutes (batch 2, seq 64): the patch changes no decision of the model's code."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode
    sys.path.insert(0, os.path.join(SRC, "graphs"))
    from llm_models import gpt2_small

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            outs = out if isinstance(out, (tuple, list)) else [out]
            self.ops.append((str(func), tuple(tuple(o.shape) if isinstance(o, torch.Tensor) else None for o in outs)))
            return out

    def log():
        with FakeTensorMode():
            model = gpt2_small()
            x, y = torch.randint(0, 50257, (2, 64)), torch.randint(0, 50257, (2, 64))
            with Log() as rec:
                out = model(x)
                torch.nn.functional.cross_entropy(out.view(-1, out.size(-1)), y.view(-1)).backward()
        return rec.ops
    plain = log()
    with cuda_substitutes(rates):
        patched = log()
    return plain == patched, len(plain)


def auto_sac(B, S, rates):
    """Runs MemTracker, RuntimeEstimator and SACEstimator on GPT-2 small under FakeTensorMode
    (CPU device) and returns (graph, sac_stats per module, baseline peak, baseline ms, MemTracker peak)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.ilp_utils import aggregate_stats, get_peak_memory_runtime_baseline, parse_module_info
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed._tools.runtime_estimator import RuntimeEstimator
    from torch.distributed._tools.sac_estimator import SACEstimator
    sys.path.insert(0, os.path.join(SRC, "graphs"))
    from llm_models import gpt2_small
    dev = torch.device("cpu")
    with FakeTensorMode():
        model = gpt2_small()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randint(0, 50257, (B, S))
        y = torch.randint(0, 50257, (B, S))

        def step():
            out = model(x)
            torch.nn.functional.cross_entropy(out.view(-1, out.size(-1)), y.view(-1)).backward()

        mt = MemTracker()
        mt.track_external(model, opt)
        with mt:
            for i in range(2):
                step()
                opt.step()
                opt.zero_grad()
                if i == 0:
                    mt.reset_mod_stats()
        mt_peak = mt.get_tracker_snapshot("peak")[dev]["Total"]
        rt, sac = RuntimeEstimator(), SACEstimator()
        with cuda_substitutes(rates):
            with rt("operator-level-cost-model"):
                step()
            with sac("operator-level-cost-model"):
                step()
    # pwlf's piecewise-linear fits (in aggregate_stats) start from numpy's global random state.
    import numpy
    numpy.random.seed(0)
    info = aggregate_stats(model, mt, rt, sac, dev)
    graph = parse_module_info(info)
    peak, ms = get_peak_memory_runtime_baseline(graph)
    return graph, sac.sac_mod_stats, peak, ms, mt_peak


def translate(decisions, sac_stats):
    """The MILP's per-module discard ratios as memsim flags. A ratio of 1 is torch.utils.checkpoint
    of the module (`--checkpoint PATH`); a ratio r < 1 is SAC in the module, its ops chosen by
    get_optimal_checkpointing_policy_per_module(stats, 1 - r). memsim's --sac is one policy by op
    name for every --checkpoint module, so the saved names are the union over the partial modules
    (an op name is saved if the per-op MILP saves any of its instances). Returns variants:
    [(label, flags, approximate?)]."""
    from torch.distributed._tools.sac_ilp import get_optimal_checkpointing_policy_per_module
    full, partial, saved = [], [], set()
    for fqn, r in sorted(decisions.items(), key=lambda kv: block_order(kv[0])):
        path = fqn.split(".", 1)[1] if "." in fqn else ""
        if r >= 0.9999:
            full.append(path)
            continue
        partial.append(path)
        st = sac_stats[fqn]
        keep = get_optimal_checkpointing_policy_per_module(st, 1.0 - r)
        saved |= {st.func_names[i] for i, k in enumerate(keep) if k == 1 and st.memory[i] > 0}
    ck = [f for p in sorted(full + partial, key=block_order) for f in ("--checkpoint", p)]
    if not partial:
        return [("full checkpoint of the chosen modules", ck, False)], full, partial, saved
    sac = ck + ["--sac", "ops:" + ",".join(sorted(saved))] if saved else ck
    out = [("partial modules as SAC (ops saved: %s)%s" % (", ".join(sorted(saved)) or "none",
                                                           "; full ones too" if full else ""), sac, True),
           ("every chosen module fully checkpointed", ck, True)]
    return out, full, partial, saved


def trace_key(flags):
    """The file name (without .trace) of a recording of the run with these memsim flags."""
    blocks = [flags[i + 1] for i, f in enumerate(flags) if f == "--checkpoint"]
    idx = sorted(int(b.rsplit(".", 1)[1]) for b in blocks if b != "transformer.h.*")
    ck = "none" if not blocks else "all" if "transformer.h.*" in blocks or len(idx) == N_LAYER else \
        "h" + "-".join(map(str, idx))
    sac = flags[flags.index("--sac") + 1] if "--sac" in flags else ""
    return ck + ("_sac-" + re.sub("[^A-Za-z0-9]+", "-", sac.replace("_scaled_dot_product_flash_attention_for_cpu", "sdpa"))
                 if sac else "")


def kit_flags(flags):
    """trace_step.py's options for the run with these memsim flags (a regex of the blocks)."""
    blocks = [flags[i + 1] for i, f in enumerate(flags) if f == "--checkpoint"]
    out = []
    if blocks:
        idx = sorted(int(b.rsplit(".", 1)[1]) for b in blocks if b != "transformer.h.*")
        rx = "[0-9]+" if "transformer.h.*" in blocks or len(idx) == N_LAYER else "(%s)" % "|".join(map(str, idx))
        out += ["--checkpoint", "'transformer\\.h\\.%s'" % rx]
    if "--sac" in flags:
        out += ["--sac", flags[flags.index("--sac") + 1]]
    return out


def trace_peak(path):
    """Peak live bytes of a recorded trace (validate.py's summary, as the kit's summarize.py)."""
    sys.path.insert(0, HERE)
    from validate import summarize
    return summarize(path)[2]


def memsim_candidates():
    """The checkpointings `memsim plan --checkpoints none,every-K,all,sac-all` searches, as run flags
    (every-K: blocks whose 1-based index is a multiple of K, torchtitan's ac_freq), cheapest first."""
    def blocks(k):
        return [f for i in range(N_LAYER) if (i + 1) % k == 0 for f in ("--checkpoint", "transformer.h.%d" % i)]
    every = ["--checkpoint", "transformer.h.*"]
    return [("none", []), ("every-4", blocks(4)), ("every-3", blocks(3)), ("every-2", blocks(2)),
            ("sac-all (torchtitan)", every + ["--sac", "torchtitan"]), ("all", every)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="docs/plan-sac.md")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--traces", default="tests/data/traces_plan_sac",
                    help="recordings of the simulated runs (trace_step.py), named by trace_key")
    a = ap.parse_args()
    build = a.build if os.path.isabs(a.build) else os.path.join(SRC, a.build)
    B, S = a.batch, a.seq
    import pulp
    import pwlf
    import torch
    from torch.distributed._tools.sac_ilp import sac_milp
    rates = gpu_rates()
    fake_cuda = fake_cuda_outcome()
    same_ops, n_ops = ops_unchanged_by_patch(rates)
    graph, sac_stats, base_peak, base_ms, mt_peak = auto_sac(B, S, rates)
    cands = [(n, f, memsim_peak(build, B, S, f)) for n, f in memsim_candidates()]
    measured = {}  # trace key -> ([what], memsim flags)
    for n, f, _ in cands:
        measured.setdefault(trace_key(f), ([], f))[0].append("memsim candidate " + n)
    none_peak, all_peak = cands[0][2], cands[-1][2]
    none_rep = memsim_report(build, B, S, [])
    adamw_peak = memsim_report(build, B, S, [], "adamw")["peak_live_bytes"]
    top = none_rep["top_tensors_at_peak"][:4]
    # Budgets: memsim's midpoint between no checkpointing and every block checkpointed, and two
    # that force the MILP to recompute by its own memory model (fractions of its baseline peak).
    budgets = [("memsim midpoint (none + all) / 2", (none_peak + all_peak) / 2),
               ("0.75 x the MILP's baseline", 0.75 * base_peak),
               ("0.6 x the MILP's baseline", 0.6 * base_peak)]
    cflags = " ".join("--" + x for x in ["profile cpu", "torch 2.13", "optimizer none", "step steady",
                                             "batch %d" % B, "set seq=%d" % S])
    L = ["# memsim and PyTorch's Auto-SAC MILP", "",
         "Generated by `tools/plan_vs_sac.py` (do not edit by hand) with torch %s, PuLP %s, pwlf %s, on a"
         % (torch.__version__, pulp.__version__, pwlf.__version__),
         "CPU-only machine. Issue 30: memsim's choice and the MILP's plan "
         "(`torch.distributed._tools.sac_ilp.sac_milp`) on the same model and budget, both simulated by memsim.", "",
         "Model: nanoGPT GPT-2 small (`graphs/llm_models.py` `gpt2_small`, SDPA attention under 2.x), batch %d, "
         "seq %d, fp32, cross entropy, AdamW. memsim simulates `%s` (the model exported under 2.13) with `%s`."
         % (B, S, GRAPH, cflags), "",
         "## How the MILP gets its input here", "",
         "Auto-SAC's pipeline runs as PyTorch's test runs it (`test/distributed/_tools/test_sac_ilp.py`): "
         "MemTracker (2 steps, AdamW), RuntimeEstimator and SACEstimator (roofline mode, "
         "`operator-level-cost-model`) under `FakeTensorMode`, then `aggregate_stats`, `parse_module_info`, "
         "`sac_milp`, and `get_optimal_checkpointing_policy_per_module` for the per-op policies. "
         "Its CUDA-only pieces are substituted, and nothing else:", "",
         "1. Device: the CPU. Fake CUDA tensors under `FakeTensorMode` on this build: `%s`. So the model, "
         "inputs and MemTracker's memory are on the (fake) CPU device, fp32. SACEstimator of torch 2.13 counts "
         "CPU output storages as well as CUDA ones (`sac_estimator.py` `__torch_dispatch__`), so it needs no "
         "patch; CPU storages are counted at their size, CUDA ones rounded up to 512 bytes." % fake_cuda,
         "2. `torch.utils._runtime_estimation.get_device_tflops` and `get_gpu_dram_gbps` (the roofline's peak "
         "FLOP/s and DRAM bandwidth, read from the GPU through Triton) return memsim's catalog figures for "
         "the %s (`sim/data/gpu_perf.json`: %s TFLOP/s fp32, %s fp16, %s bf16, %s GB/s). The roofline "
         "uses 75 %% of that peak (`flops_to_ns`)." % (GPU, rates["fp32_tflops"], rates["fp16_tflops"],
                                                    rates["bf16_tflops"], rates["hbm_gbps"]),
         "3. `torch.cuda.is_available()` answers True while the two estimators run (the roofline asserts it "
         "before estimating). One step's %d ATen ops and output shapes under `FakeTensorMode` (batch 2, seq 64) "
         "are %s with the three substitutions as without them. All three are restored afterwards."
         % (n_ops, "the same" if same_ops else "NOT the same"),
         "", "The MILP then runs unchanged (CBC through PuLP, its own 5 % gap and time limit). Its memory model "
         "counts parameters, gradients, activations and activation gradients of the model's modules, "
         "not optimizer states (`get_peak_memory_runtime_baseline`), so memsim's figures below are the same "
         "step with `--optimizer none` (parameters, gradients, activations, temporaries, the loss).", "",
         "| | peak |", "|---|---:|",
         "| MemTracker peak, whole step with AdamW states (fake tensors, CPU) | %s |" % gib(mt_peak),
         "| memsim peak live, the same step with AdamW states (`--optimizer adamw`) | %s |" % gib(adamw_peak),
         "| the MILP's baseline peak, no checkpointing (its memory model) | %s |" % gib(base_peak),
         "| memsim peak live, no checkpointing | %s |" % gib(none_peak),
         "| memsim peak live, every block checkpointed | %s |" % gib(all_peak), "",
         "The MILP's baseline runtime (roofline, %s): %.1f ms per step." % (GPU, base_ms), "",
         "memsim's peak without checkpointing is in %s at op `%s`; the largest tensors alive there: %s. "
         "The loss (log_softmax, the gradients of the logits) runs outside the model's modules, after the forward "
         "and before any block's backward: checkpointing blocks removes the block activations alive there, not "
         "these tensors, and the MILP's module-wise memory model does not count them."
         % (none_rep["peak_phase"], none_rep["peak_op"],
            ", ".join("`%s` (%s, %s)" % (t["name"], t["category"], gib(t["bytes"])) for t in top)), "",
         "## memsim's candidates", "",
         "The checkpointings `memsim plan` searches, simulated at this batch (every-K: blocks whose "
         "1-based index is a multiple of K):", "", "| checkpointing | memsim peak live |", "|---|---:|"]
    for n, _, p in cands:
        L.append("| %s | %s |" % (n, gib(p)))
    L += ["", "memsim's choice for a budget is the first candidate of this list (least recomputation: "
          "none, every 4th, 3rd, 2nd block, all with torchtitan's SAC, all) whose simulated peak fits.", ""]
    L += ["## The MILP's plans, simulated", "",
          "The MILP's decisions (module: fraction of its activation memory to discard) are translated to "
          "`memsim run` flags: a module discarding everything is `--checkpoint PATH` (torch.utils.checkpoint); "
          "a module discarding part is checkpointed with `--sac ops:...`, the op names its per-op MILP "
          "(`get_optimal_checkpointing_policy_per_module(stats, 1 - discard)`) saves. This is approximate "
          "where marked: memsim's `--sac` is one policy by op name for all `--checkpoint` modules, so the "
          "names are the union over the partial modules, an op name is saved wherever the per-op MILP saves any "
          "of its instances, and when full and partial modules mix the page gives both bounds (all as SAC, "
          "all full).", ""]
    summary = ["## Summary", "",
               "| budget | MILP peak bound | MILP plan simulated by memsim | memsim's choice |", "|---|---:|---:|---|"]
    for label, budget in budgets:
        dec, rct, mpeak = sac_milp(graph, memory_budget=budget / GiB, world_size=1)
        sims = []
        fits = [n for n, _, p in cands if p <= budget]
        L += ["### Budget %s (%s)" % (gib(budget), label), ""]
        if mpeak < 0:
            L += ["The MILP finds no solution.", ""]
        else:
            shown = ", ".join("%s %.2f" % (k.replace("GPT.transformer.", ""), v)
                              for k, v in sorted(dec.items(), key=lambda kv: block_order(kv[0]))) or "none"
            L += ["- MILP decisions (discard fraction): %s" % shown,
                  "- MILP: recomputation %.2f ms (roofline), peak bound %s (its returned upper bound on the peak, "
                  "from its memory model)" % (rct, gib(mpeak))]
            variants, full, partial, _ = translate(dec, sac_stats) if dec else ([("no checkpointing", [], False)], [], [], set())
            for vl, flags, approx in variants:
                p = memsim_peak(build, B, S, flags)
                sims.append(p)
                measured.setdefault(trace_key(flags), ([], flags))[0].append(
                    "MILP plan at %s, %s" % (gib(budget), "as SAC" if "--sac" in flags else
                                             "fully checkpointed" if flags else "no checkpointing"))
                L.append("- memsim, MILP plan%s, %s: peak live %s (%s the budget); flags `%s`"
                         % (" (approximate translation)" if approx else "", vl, gib(p),
                            "within" if p <= budget else "over", " ".join(flags) or "(none)"))
        choice = ("%s, peak live %s" % (fits[0], gib([p for n, _, p in cands if n == fits[0]][0]))
                  if fits else "none of its candidates fits (smallest: %s, %s)"
                  % (min(cands, key=lambda c: c[2])[0], gib(min(c[2] for c in cands))))
        L += ["- memsim's choice: " + choice, ""]
        summary.append("| %s (%s) | %s | %s | %s |" % (
            gib(budget), label, gib(mpeak) if mpeak >= 0 else "no solution",
            " to ".join(sorted({gib(x) for x in sims})) or "-", choice))
    at = L.index("## How the MILP gets its input here")
    L[at:at] = summary + ["", "The MILP's plans, translated to memsim's flags (a range where the translation is "
                          "approximate, see below), and memsim's candidates are simulated by memsim with the MILP's "
                          "memory scope (no optimizer states); the simulated runs recorded on the CPU are compared with "
                          "memsim in section Measured on the CPU.", ""]
    tdir = a.traces if os.path.isabs(a.traces) else os.path.join(SRC, a.traces)
    L += ["## Measured on the CPU", "",
          "Each simulated run recorded with the kit, one real PyTorch %s CPU training step (the same model, batch, "
          "seq, no optimizer, non-reentrant checkpointing with early stop): `OMP_NUM_THREADS=1 LD_PRELOAD=allocspy.so "
          "python tests/oracle/kit/trace_step.py gpt2_small OUT --batch %d --seq %d --opt none FLAGS`, the traces in "
          "`%s/`. memsim is the same run with `--step first` (as `tools/validate.py` runs the 2.13 traces)."
          % (torch.__version__.split("+")[0], B, S, a.traces), "",
          "| run | kit FLAGS | recorded peak | memsim peak | error |", "|---|---|---:|---:|---:|"]
    missing = []
    for k, (whats, flags) in sorted(measured.items(), key=lambda kv: kv[0]):
        what = "; ".join(whats)
        path = os.path.join(tdir, k + ".trace")
        if not os.path.exists(path):
            missing.append("`%s` (%s)" % (k, what))
            continue
        rec = trace_peak(path)
        sim = memsim_report(build, B, S, flags, step="first")["peak_live_bytes"]
        L.append("| %s: `%s` | `%s` | %d | %d | %+.3f %% |" % (what, k, " ".join(kit_flags(flags)).replace("|", "\\|") or "(none)", rec, sim,
                                                          100.0 * (sim - rec) / rec))
    if missing:
        L += ["", "Not recorded: %s." % ", ".join(missing)]
    L += ["", "## Not done", "",
          "- Timing: the MILP's recomputation times are its roofline estimates with the substituted %s "
          "rates; memsim's plan timing is not compared." % GPU,
          "- A GPU run of the unpatched pipeline (real CUDA storages, Triton's own peak rates).", ""]
    with open(os.path.join(SRC, a.out), "w") as f:
        f.write("\n".join(L))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
