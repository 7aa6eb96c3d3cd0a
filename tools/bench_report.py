#!/usr/bin/env python3
"""Regenerates docs/benchmarks.md from measurements taken now, on this machine:

  * memsim_bench (Google Benchmark, bench/*.cc): the allocator, each stage of one configuration,
    the compiled per-configuration path, `fit`;
  * `memsim sweep` end to end (ResNet-50, batch x optimizer), with 1 and 2 threads;
  * `memsim plan` of Llama-3-8B on 8 x H100-80GB end to end (docs/plan.md);
  * recording the same step with real PyTorch (the oracle's trace_step.py under allocspy.so),
    for the ratio printed beside memsim's figures.

usage: tools/bench_report.py [--build build] [--oracle DIR] [--out docs/benchmarks.md]
  (--oracle: the recording kit's directory, with trace_step.py and allocspy.c; default
  tests/oracle/kit, the repository's copy)
       [--quick]   (shorter runs, for a smoke test)
       [--plan-only]  (only `memsim plan` of Llama-3-8B: rewrites its target row and section)
The machine's load (uptime) before and after is written into the page: the figures of a shared
machine are only as good as its load.
"""
import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def uptime():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def bench(binary, flt, min_time, reps):
    r = subprocess.run([binary, "--benchmark_filter=" + flt, "--benchmark_format=json",
                        "--benchmark_min_time=%g" % min_time, "--benchmark_repetitions=%d" % reps,
                        "--benchmark_report_aggregates_only=true"], capture_output=True, text=True, check=True)
    out = {}
    for b in json.loads(r.stdout)["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        name = b.get("run_name", b["name"]).replace("_median", "")
        out[name] = b
    return out


def cpu_us(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    return b["cpu_time"] * scale


def sweep_rates(memsim, src, batches, optimizers, rounds=10):
    """Configurations/s of `memsim sweep` on 1 and on 2 threads, and the best wall times: the two
    run alternately, best of |rounds| each, so that a busy moment of this shared machine does not
    fall on one thread count only."""
    args = [memsim, "sweep", "graphs/resnet50.json", "--batch", ",".join(str(b) for b in range(1, batches + 1)),
            "--optimizer", ",".join(optimizers), "--csv", "--threads"]
    best = {1: None, 2: None}
    for _ in range(rounds):
        for threads in (1, 2):
            t0 = time.perf_counter()
            subprocess.run(args + [str(threads)], cwd=src, stdout=subprocess.DEVNULL, check=True)
            dt = time.perf_counter() - t0
            best[threads] = dt if best[threads] is None else min(best[threads], dt)
    n = batches * len(optimizers)
    return n / best[1], best[1], n / best[2], best[2]


PLAN_ARGS = ["plan", "graphs/llama3_8b.json", "--gpus", "8xH100-80GB", "--global-batch", "512", "--threads", "2",
             "--json"]


def plan_run(memsim, src, rounds=3):
    """`memsim plan` of Llama-3-8B over its whole space (issue 30): the best wall clock of
    |rounds| runs on 2 threads, that run's CPU time (user + system, both threads), and the
    search's counts (from its JSON) of that run."""
    best, cpu, counts = None, None, None
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run([memsim] + PLAN_ARGS, cwd=src, capture_output=True, text=True, check=True).stdout
        dt = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if best is None or dt < best:
            best, cpu, counts = dt, used, json.loads(out)
    return best, cpu, counts


def plan_target_row(plan_s, plan_cpu):
    return ("| `memsim plan` Llama-3-8B, 8×H100-80GB, global batch 512, whole space, 2 threads: < 10 s | %.1f s wall (%.1f s CPU) | %s |"
            % (plan_s, plan_cpu, "yes" if plan_s < 10 else "no"))


def plan_section(plan_s, plan_cpu, plan, rounds, load_before, load_after):
    """The lines of the planner's section of the page."""
    L = ["## The planner (`memsim plan`, docs/plan.md)", ""]
    L.append("`memsim %s` (wall clock, best of %d, start-up and graph parsing included; CPU: user +" % (" ".join(PLAN_ARGS), rounds))
    L.append("system time of that run, both threads; load average before %s, after %s):" % (load_before, load_after))
    L.append("")
    L.append("| candidates | simulated | fit | from their first 5 passes | pruned by the floor | dominated | left out once settled | wall clock | CPU |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    L.append("| %d | %d | %d | %d | %d | %d | %d | %.1f s | %.1f s |" % (
        plan["candidates"], plan["simulated"], plan["fitting"], plan.get("shortened", 0), plan["pruned_by_floor"],
        plan["pruned_dominated"], plan["beyond_horizon"], plan_s, plan_cpu))
    L.append("")
    L.append("With a load average above the 2 cores, the wall clock is that of a shared machine; the CPU time")
    L.append("is what the search costs, whatever the load (not measured on an idle machine).")
    chosen = plan["chosen"]
    if chosen:
        L.append("")
        L.append("Chosen: %s (step time %.2f s estimated, device used %.2f GiB)."
                 % (chosen["plan"], chosen["step_time"]["total_s"], chosen["figures"]["peak_device_used_bytes"] / 2**30))
    L.append("")
    return L


def update_plan_only(memsim, src, out, rounds):
    """--plan-only: measures the planner alone and rewrites its target row and section of |out|
    (the other figures stay those of the page's last full generation)."""
    load_before = uptime()
    plan_s, plan_cpu, plan = plan_run(memsim, src, rounds=rounds)
    load_after = uptime()
    lines = open(out).read().split("\n")
    lines = [l for l in lines if not l.startswith("| `memsim plan` Llama-3-8B")]
    # The section: from its heading to the next one (or before "## Per configuration").
    if "## The planner (`memsim plan`, docs/plan.md)" in lines:
        a = lines.index("## The planner (`memsim plan`, docs/plan.md)")
        b = next(i for i in range(a + 1, len(lines)) if lines[i].startswith("## "))
        del lines[a:b]
    at = next(i for i, l in enumerate(lines) if l.startswith("## Per configuration"))
    lines[at:at] = plan_section(plan_s, plan_cpu, plan, rounds, load_before, load_after)
    # The target row: the last row of the targets' table.
    t = lines.index("## Targets (issue 11)")
    end = next(i for i in range(t + 4, len(lines)) if not lines[i].startswith("|"))
    lines.insert(end, plan_target_row(plan_s, plan_cpu))
    open(out, "w").write("\n".join(lines))
    print("plan: %.1f s wall, %.1f s CPU (load %s -> %s); wrote %s" % (plan_s, plan_cpu, load_before, load_after, out))


def torch_python():
    """The Python that has torch (Debian's python3-torch lives in /usr/bin/python3)."""
    for exe in ("/usr/bin/python3", sys.executable):
        if os.path.exists(exe) and subprocess.run([exe, "-c", "import torch, torchvision"], capture_output=True).returncode == 0:
            return exe
    raise SystemExit("no Python with torch and torchvision (apt-get install python3-torch python3-torchvision)")


def pytorch_step_seconds(oracle, batch):
    """Wall time of trace_step.py recording one ResNet-50 step (batch |batch|, Adam), and of the
    same script's start-up alone (python + torch import + model build), best of 2."""
    if not oracle or not os.path.exists(os.path.join(oracle, "trace_step.py")):
        return None
    tmp = tempfile.mkdtemp(prefix="memsim-bench-")
    try:
        so = os.path.join(tmp, "allocspy.so")
        spy = os.path.join(oracle, "allocspy.c")  # the kit's own, or memsim's copy of it
        if not os.path.exists(spy):
            spy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memsim_export", "allocspy.c")
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", spy, "-o", so, "-ldl"], check=True)
        env = dict(os.environ, LD_PRELOAD=so)
        best = None
        for _ in range(2):
            t0 = time.perf_counter()
            subprocess.run([torch_python(), os.path.join(oracle, "trace_step.py"), "resnet50", os.path.join(tmp, "t.trace"),
                            "--batch", str(batch), "--opt", "adam"], env=env, check=True, cwd=oracle,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        return best
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--oracle", default=os.environ.get("MEMSIM_ORACLE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle", "kit")),
                    help="the recording kit's directory (trace_step.py, allocspy.c); default $MEMSIM_ORACLE")
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plan-only", action="store_true",
                    help="measure `memsim plan` only and rewrite its rows of --out (issue 30)")
    a = ap.parse_args()
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    build = os.path.abspath(os.path.join(src, a.build)) if not os.path.isabs(a.build) else a.build
    memsim, binary = os.path.join(build, "memsim"), os.path.join(build, "memsim_bench")
    if a.plan_only:
        return update_plan_only(memsim, src, os.path.join(src, a.out) if not os.path.isabs(a.out) else a.out,
                                1 if a.quick else 3)
    min_time, reps = (0.1, 1) if a.quick else (0.5, 3)
    load_before = uptime()
    b = bench(binary, "BM_(Compiled|One|Stage|Fit|CachingAllocator|ReplaySnapshot)", min_time, reps)
    batches, opts = (50, 4) if a.quick else (1000, 4)  # the sweep: batch 1-1,000 x 4 optimizers
    optimizers = ["sgd", "adam", "adamw", "rmsprop"][:opts]
    rate1, t1, rate2, t2 = sweep_rates(memsim, src, batches, optimizers)
    plan_s, plan_cpu, plan = plan_run(memsim, src, rounds=1 if a.quick else 3)
    torch_s = pytorch_step_seconds(os.path.abspath(a.oracle) if a.oracle else "", 32)
    load_after = uptime()

    def us(name):
        return cpu_us(b[name]) if name in b else float("nan")

    r50 = us("BM_CompiledConfiguration/resnet50")
    L = []
    L.append("# Benchmarks")
    L.append("")
    L.append("Generated by `tools/bench_report.py` (do not edit by hand): Google Benchmark (`bench/*.cc`,")
    L.append("`memsim_bench`), `memsim sweep` end to end, and the oracle's `trace_step.py` for the ratio to")
    L.append("recording the same step with real PyTorch. Times are the benchmark thread's CPU time (median")
    L.append("of %d), except `memsim sweep` and PyTorch (wall clock: the sweep on 1 and on 2 threads run" % reps)
    L.append("alternately, best of 10 each; PyTorch best of 2).")
    L.append("")
    L.append("Machine: %s, %d CPUs, Python %s. **Load average (1, 5, 15 min) before: %s, after: %s** —"
             % (platform.processor() or platform.machine(), os.cpu_count(), platform.python_version(), load_before, load_after))
    L.append("the machine is shared; with a load above its 2 cores the wall-clock figures (sweep rates, the")
    L.append("2-thread speed-up) are those of a busy machine, and CPU times are inflated by shared caches.")
    L.append("")
    L.append("## Targets (issue 11)")
    L.append("")
    L.append("| target | measured | met |")
    L.append("|---|---|---|")
    L.append("| ResNet-50 full step with the caching allocator, per configuration, one core: ≤ 100 µs | %.0f µs | %s |"
             % (r50, "yes" if r50 <= 100 else "no"))
    L.append("| `memsim sweep` ResNet-50, 2 threads: ≥ 20,000 configurations/s | %.0f /s (%d configurations in %.2f s) | %s |"
             % (rate2, batches * len(optimizers), t2, "yes" if rate2 >= 20000 else "no"))
    L.append("| 2 threads ≥ 1.8 × one thread | %.2f × (1 thread: %.0f /s) | %s |"
             % (rate2 / rate1, rate1, "yes" if rate2 / rate1 >= 1.8 else "no"))
    for m in ("resnet50", "bert_base"):
        f = us("BM_Fit/" + m) / 1000
        L.append("| `memsim fit` %s (V100-16GB, Adam): ≤ 5 ms | %.1f ms | %s |" % (m, f, "yes" if f <= 5 else "no"))
    if torch_s:
        L.append("| ratio to recording the step with PyTorch (`trace_step.py resnet50 --batch 32 --opt adam`, %.1f s wall, start-up included) | memsim %.0f µs → %.0f × faster | — |"
                 % (torch_s, r50, torch_s * 1e6 / r50))
    L.append(plan_target_row(plan_s, plan_cpu))
    L.append("")
    L.extend(plan_section(plan_s, plan_cpu, plan, 1 if a.quick else 3, load_before, load_after))
    L.append("## Per configuration (`bench/compiled_bench.cc`, `bench/sweep_bench.cc`)")
    L.append("")
    L.append("`BM_CompiledConfiguration`: what `memsim sweep` and `fit` do per configuration — one compiled")
    L.append("step with the size schedule of a sweep over batch 1–64 (Notes [Compiled step] and [Size")
    L.append("schedule], docs/sweeps.md), a different batch each time, Adam, cuda profile, caching allocator.")
    L.append("`BM_OneConfiguration`: the same configuration compiled for itself (`RunOne`: no schedule, the")
    L.append("step engine runs, names off — what one `run` costs).")
    L.append("")
    L.append("| graph | compiled path | configurations/s/core | compiled alone (`RunOne`) |")
    L.append("|---|---:|---:|---:|")
    for m in ("mlp", "resnet18", "resnet50", "bert_base"):
        c, o = us("BM_CompiledConfiguration/" + m), us("BM_OneConfiguration/" + m)
        L.append("| %s | %.0f µs | %s | %.0f µs |" % (m, c, format(int(1e6 / c), ","), o))
    L.append("")
    L.append("Where the time of one ResNet-50 configuration goes (batch 32, Adam; each stage alone). With the")
    L.append("size schedule a configuration costs its sizes and the allocator; binding and the step engine")
    L.append("run only when the schedule is built (and for `run`):")
    L.append("")
    L.append("| stage | time |")
    L.append("|---|---:|")
    ev = b.get("BM_StageStep/resnet50_lean", {}).get("events", 0)
    L.append("| bind (symbols → shapes, shape inference of 176 ops) | %.0f µs |" % us("BM_StageBind/resnet50"))
    L.append("| step engine, buffer names on (`run`) | %.0f µs |" % us("BM_StageStep/resnet50_names"))
    L.append("| step engine, names off (sweep rows), %d events, + peak analysis | %.0f µs |" % (ev, us("BM_StageStep/resnet50_lean")))
    L.append("| caching allocator over the stream | %.0f µs |" % us("BM_StageAllocator/resnet50"))
    runs = b.get("BM_StageScheduleBuild/resnet50", {}).get("engine_runs", 0)
    L.append("| size schedule: every size and the live peak of one configuration (replaces bind + engine) | %.0f µs |"
             % us("BM_StageScheduleSizes/resnet50"))
    L.append("| size schedule: building it, once per structural option set (%d engine runs) | %.0f µs |"
             % (runs, us("BM_StageScheduleBuild/resnet50")))
    L.append("")
    L.append("## Allocator throughput (`bench/allocator_bench.cc`)")
    L.append("")
    L.append("| benchmark | median CPU time | rate |")
    L.append("|---|---:|---:|")
    for name in sorted(k for k in b if k.startswith(("BM_CachingAllocator", "BM_ReplaySnapshot"))):
        ips = b[name].get("items_per_second")
        L.append("| `%s` | %.0f µs | %s |" % (name, cpu_us(b[name]), "%.1f M events/s" % (ips / 1e6) if ips else ""))
    L.append("")
    L.append("`BM_CachingAllocatorTrace` replays the 3,440 malloc/free events of")
    L.append("`transformer_small_ctx256_bs32_fwd_bwd_warm.pickle` through a fresh allocator per pass; `Warm`")
    L.append("replays it again and again on one allocator; `Random` is a synthetic stress of up to 2,000 live")
    L.append("blocks; `BM_ReplaySnapshot` is `memsim replay` of that snapshot end to end.")
    L.append("")
    L.append("Commands: `cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 --target memsim memsim_bench`,")
    L.append("then `tools/bench_report.py`.")
    with open(os.path.join(src, a.out) if not os.path.isabs(a.out) else a.out, "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
