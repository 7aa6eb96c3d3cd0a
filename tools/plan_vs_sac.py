#!/usr/bin/env python3
"""Compares `memsim plan` with PyTorch's Auto-SAC MILP (torch.distributed._tools.sac_ilp) on the
same model and budget, and writes docs/plan-sac.md (issue 30). Run with the torch 2.x
environment's Python (the one with torch.distributed._tools and PuLP):

  python tools/plan_vs_sac.py [--build build] [--out docs/plan-sac.md] [--batch 2] [--seq 256]

What runs where it can: memsim's plan and its simulated peaks; Auto-SAC's pipeline step by step
(MemTracker, RuntimeEstimator, SACEstimator, sac_milp) on nanoGPT GPT-2 small under
FakeTensorMode on this machine's device. A step that fails is reported with its exception, in
the page, as it was raised; nothing is estimated in its place.
"""
import argparse
import json
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, ".."))
GRAPH = "graphs/nanogpt_gpt2_small.json"


def gib(b):
    return "%.2f GiB" % (b / 2**30)


def memsim(build, *args):
    out = subprocess.run([os.path.join(build, "memsim")] + list(args), cwd=SRC, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(out.stderr.strip())
    return out.stdout


def first_line(e):
    return ("%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")).replace("|", "\\|")


def auto_sac(batch, seq, budget_gib):
    """Auto-SAC's pipeline as PyTorch's own test runs it (test/distributed/_tools/test_sac_ilp.py),
    on the CPU: each step's outcome, and MemTracker's peak when it gets that far."""
    steps, peak = [], None
    try:
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.mem_tracker import MemTracker
        from torch.distributed._tools.runtime_estimator import RuntimeEstimator
        from torch.distributed._tools.sac_estimator import SACEstimator
        steps.append(("import torch.distributed._tools (torch %s)" % torch.__version__, "ok"))
    except Exception as e:  # noqa: BLE001 - the page reports whatever is raised
        return [("import torch.distributed._tools", first_line(e))], None
    try:
        import torch.distributed._tools.sac_ilp  # noqa: F401 - needs PuLP
        steps.append(("import sac_ilp (PuLP %s)" % __import__("pulp").__version__, "ok"))
    except Exception as e:  # noqa: BLE001
        steps.append(("import sac_ilp", first_line(e)))
    sys.path.insert(0, os.path.join(SRC, "graphs"))
    from llm_models import gpt2_small
    with FakeTensorMode():
        model = gpt2_small()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randint(0, 50257, (batch, seq))
        y = torch.randint(0, 50257, (batch, seq))

        def step():
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out.view(-1, out.size(-1)), y.view(-1))
            loss.backward()

        try:
            mt = MemTracker()
            mt.track_external(model, opt)
            with mt:
                for i in range(2):
                    step()
                    opt.step()
                    opt.zero_grad()
                    if i == 0:
                        mt.reset_mod_stats()
            snap = mt.get_tracker_snapshot("peak")
            cpu = snap.get(torch.device("cpu"), {})
            peak = cpu.get("Total", sum(cpu.values())) if cpu else None
            steps.append(("MemTracker (2 steps, FakeTensorMode, CPU)", "ok"))
        except Exception as e:  # noqa: BLE001
            steps.append(("MemTracker", first_line(e)))
        for mode in ("operator-level-cost-model", "operator-level-benchmark"):
            try:
                with RuntimeEstimator()(mode):
                    step()
                steps.append(("RuntimeEstimator(%s)" % mode, "ok"))
            except Exception as e:  # noqa: BLE001
                steps.append(("RuntimeEstimator(%s)" % mode, first_line(e)))
        try:
            with SACEstimator()(estimate_mode_type="operator-level-cost-model"):
                step()
            steps.append(("SACEstimator(operator-level-cost-model)", "ok"))
        except Exception as e:  # noqa: BLE001
            steps.append(("SACEstimator(operator-level-cost-model)", first_line(e)))
    return steps, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="docs/plan-sac.md")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    a = ap.parse_args()
    build = os.path.join(SRC, a.build) if not os.path.isabs(a.build) else a.build
    B, S = a.batch, a.seq
    # The same step in memsim: the CPU profile (what MemTracker sees on this machine), no
    # checkpointing, then the plan on one GPU whose budget makes checkpointing matter.
    run = json.loads(memsim(build, "run", GRAPH, "--profile", "cpu", "--optimizer", "adamw", "--batch", str(B),
                            "--set", "seq=%d" % S, "--json"))
    gpu, global_batch = "T4", 16
    plan = json.loads(memsim(build, "plan", GRAPH, "--gpus", "1x" + gpu, "--global-batch", str(global_batch),
                             "--seq", "1024", "--precision", "fp32",
                             "--checkpoints", "none,every-4,every-2,all,sac-all", "--no-timing", "--json"))
    steps, mt_peak = auto_sac(B, S, 0)
    L = ["# memsim plan and PyTorch's Auto-SAC MILP", "",
         "Generated by `tools/plan_vs_sac.py` (do not edit by hand) on this machine (CPU only, torch from",
         "the 2.x environment). Issue 30 asks for memsim's plan and the MILP's plan",
         "(`torch.distributed._tools.sac_ilp.sac_milp`) on the same model and budget, both simulated by",
         "memsim and measured with the recording kit. `sac_ilp` needs PuLP (`pip install pulp`; not",
         "pinned in requirements/torch2.txt: no test needs it).", ""]
    L += ["## Auto-SAC on this machine", "",
          "Its pipeline, as PyTorch's own test runs it (`test/distributed/_tools/test_sac_ilp.py`: "
          "MemTracker, RuntimeEstimator and SACEstimator under `FakeTensorMode`, then `aggregate_stats`, "
          "`parse_module_info`, `sac_milp`), on nanoGPT GPT-2 small (`graphs/llm_models.py`), batch %d, "
          "seq %d, AdamW:" % (B, S), "",
          "| step | outcome |", "|---|---|"]
    for name, outcome in steps:
        L.append("| %s | %s |" % (name, outcome))
    L += ["",
          "The MILP needs each module's runtime and each op's recomputation time: both estimators need",
          "a CUDA device (the roofline mode reads the GPU's peak FLOP/s and bandwidth; the benchmark",
          "mode times ops with `torch.cuda.Event`), and SACEstimator counts only CUDA storages. On a",
          "CPU-only machine `sac_milp` therefore has no input, and no MILP plan could be made here:",
          "the comparison of the two plans, simulated and recorded, is not done (it needs a GPU).", ""]
    L += ["## What can be compared here", "",
          "The memory both planners start from, for the step without checkpointing:", "",
          "| | peak |", "|---|---:|"]
    if mt_peak:
        L.append("| MemTracker (the MILP's memory input), CPU, fake tensors | %s |" % gib(mt_peak))
    L.append("| memsim `run --profile cpu` peak live (the profile checked against CPU traces, docs/validation.md) | %s |"
             % gib(run["peak_live_bytes"]))
    L.append("| memsim `run --profile cpu` peak reserved | %s |" % gib(run["peak_reserved_bytes"]))
    chosen = plan.get("chosen")
    L += ["", "memsim's plan for the same model on one %s (seq 1024, global batch %d, fp32, checkpointing "
          "none / every 4th / every 2nd / all blocks / all with SAC):" % (gpu, global_batch), ""]
    if chosen:
        L.append("- chosen: %s, step time %.3f s estimated, device used %s (simulated)"
                 % (chosen["plan"], chosen["step_time"]["total_s"], gib(chosen["figures"]["peak_device_used_bytes"])))
        L.append("- reproduce: `%s`" % chosen["run"])
    L.append("- front: %d plans, %d candidates simulated" % (len(plan["front"]), plan["simulated"]))
    L += ["", "Unlike the MILP, memsim's choice between checkpointing none, every k-th block, all, or",
          "all with SAC is simulated through the caching allocator for every plan it reports, so its",
          "peak is not a linear sum of module memories (the MILP's model: a module's activation memory",
          "times its kept fraction, plus hand-tuned slack).", ""]
    with open(os.path.join(SRC, a.out), "w") as f:
        f.write("\n".join(L))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
