#!/usr/bin/env python3
"""Validate memsim against the real PyTorch allocation traces in tests/data/traces.

For every trace: read its CONFIG line, run `memsim run --profile cpu --step first` with the same
model, batch, optimizer, in-place and freeze settings, and compare peak live bytes overall and per
phase (forward, backward, optimizer step). Writes a Markdown table (docs/validation.md) and exits
non-zero when an error exceeds the tolerance (3 % for any peak, 1 % for the median peak error).
Usage: validate.py --memsim build/memsim [--traces DIR] [--graphs DIR] [--out docs/validation.md]
"""
import argparse, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# trace_step.py model name -> zoo graph, where the zoo keeps another network under that name.
GRAPH_FOR_MODEL = {"alexnet": "alexnet_torchvision"}
OPT = {"sgd": "sgd", "momentum": "momentum", "adam": "adam", "none": "none"}
MAX_ERR, MAX_MEDIAN = 3.0, 1.0


def summarize(path):
    """Peak live bytes overall and per phase, as the recording kit's summarize.py computes them."""
    live = peak = 0
    phase, ph, base, cfg = None, {}, 0, {}
    for line in open(path):
        t = line.split(maxsplit=3)
        if t[0] == "A":
            live += int(t[2])
        elif t[0] == "F":
            live -= int(t[2])
        elif t[0] == "M" and t[2] == "PHASE":
            phase = t[3].strip()
            ph.setdefault(phase, live)
        elif t[0] == "M" and t[2] == "BASE":
            base = int(t[3])
        elif t[0] == "M" and t[2] == "CONFIG":
            cfg = dict(kv.split("=", 1) for kv in t[3].split())
        if t[0] in "AF":
            peak = max(peak, live)
            ph[phase] = max(ph.get(phase, 0), live)
    phases = {k: base + v for k, v in ph.items()}
    return cfg, base, base + peak, phases


def run_memsim(memsim, graph, cfg):
    cmd = [memsim, "run", graph, "--profile", "cpu", "--step", "first", "--json",
           "--batch", cfg["batch"], "--optimizer", OPT[cfg.get("opt", "sgd")],
           "--inplace-activations", "on" if cfg.get("inplace") == "True" else "off",
           "--freeze-params", cfg.get("freeze", "0")]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + out.stderr.strip())
    return cmd, json.loads(out.stdout)


def gpu_stream_section(memsim, graphs, gpu_dir):
    """The cuda profile against a real GPU allocation stream (memory_viz alloc_data of resnet18,
    batch 8, SGD momentum, first iteration, late-2022 PyTorch). Informational: the recording's
    script and version differ from memsim's 2.x defaults in known ways, listed with the figures."""
    path = os.path.join(gpu_dir, "resnet18_bs8_sgd_momentum_first_iter_alloc_data.json")
    if not os.path.exists(path):
        raise FileNotFoundError("validate: missing GPU stream %s (tests/data/gpu is part of the repository)" % path)
    import difflib, tempfile
    d = json.load(open(path))
    sz, alive, gpu = d["elements_size"], set(), []
    for a in d["actions"]:
        gpu.append(("F" if a in alive else "A", sz[a], a))
        (alive.remove if a in alive else alive.add)(a)
    with tempfile.TemporaryDirectory() as tmp:
        ev = os.path.join(tmp, "events")
        # That PyTorch's cuBLAS workspace was 4 MiB (CUBLAS_WORKSPACE_CONFIG default of the time).
        subprocess.run([memsim, "run", os.path.join(graphs, "resnet18.json"), "--batch", "8", "--optimizer", "momentum",
                        "--cublas-workspace", "4194304", "--events", ev], check=True, capture_output=True)
        ours = [(t[0], int(t[2]), t[3]) for t in (line.split() for line in open(ev))]

    def strip(seq):  # drop transient alloc/free pairs (cuDNN workspaces, scratch)
        out, i = [], 0
        while i < len(seq):
            if i + 1 < len(seq) and seq[i][0] == "A" and seq[i + 1][0] == "F" and seq[i][2] == seq[i + 1][2]:
                i += 2
                continue
            out.append(seq[i][:2])
            i += 1
        return out
    g, m = strip(gpu), strip(ours)
    sm = difflib.SequenceMatcher(a=g, b=m, autojunk=False)
    prefix = next((i for i, (x, y) in enumerate(zip(g, m)) if x != y), min(len(g), len(m)))
    blocks = [op for op in sm.get_opcodes() if op[0] != "equal"]
    lines = ["", "## cuda profile vs a real GPU allocation stream", "",
             "`tests/data/gpu/resnet18_bs8_sgd_momentum_first_iter_alloc_data.json` (torchvision resnet18,",
             "batch 8, SGD momentum, first iteration, recorded with late-2022 PyTorch on a GPU) against",
             "`memsim run graphs/resnet18.json --batch 8 --optimizer momentum --cublas-workspace 4194304`",
             "(the cuBLAS workspace of that release), both with transient alloc/free pairs removed (cuDNN",
             "workspaces, which depend on the algorithm cuDNN picks). Informational, no tolerance.", "",
             "| | recorded | memsim |", "|---|---:|---:|",
             "| allocate/free events | %d | %d |" % (len(g), len(m)),
             "| identical leading events (setup, whole forward, loss) | %d | %d |" % (prefix, prefix),
             "| sequence similarity (difflib ratio) | %.3f | |" % sm.ratio(),
             "| differing blocks | %d | |" % len(blocks), "",
             "Known causes of the differing blocks: that release's cuBLASLt 1 MiB per-call workspace; 1.13-era",
             "out-of-place accumulation of residual grads (memsim's cuda profile follows 2.x: in place); the",
             "recording script keeps `.grad` (zero_grad(set_to_none=False), the 1.13 default) and its `loss`",
             "alive at the end, where memsim's step frees them."]
    return lines


def err(pred, real):
    return 100.0 * (pred - real) / real if real else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memsim", default=os.path.join(ROOT, "build", "memsim"))
    ap.add_argument("--traces", action="append", default=None,
                    help="trace directory (repeatable); default: tests/data/traces and tests/oracle")
    ap.add_argument("--graphs", default=os.path.join(ROOT, "graphs"))
    ap.add_argument("--out", default=None, help="write the Markdown report here")
    a = ap.parse_args()
    dirs = a.traces or [os.path.join(ROOT, "tests", "data", "traces"), os.path.join(ROOT, "tests", "oracle")]
    files = []
    for d in dirs:
        if not os.path.isdir(d):
            print("validate: no traces at %s" % d, file=sys.stderr)
            return 2
        files += [(os.path.basename(os.path.normpath(os.path.dirname(os.path.join(d, n)))), os.path.join(d, n))
                  for n in sorted(os.listdir(d)) if n.endswith(".trace")]
    rows, peak_errs, failures = [], [], []
    for source, path in files:
        name = os.path.basename(path)
        cfg, base, peak, phases = summarize(path)
        graph = os.path.join(a.graphs, GRAPH_FOR_MODEL.get(cfg["model"], cfg["model"]) + ".json")
        if not os.path.exists(graph):
            failures.append("%s: no graph %s" % (name, graph))
            continue
        _, r = run_memsim(a.memsim, graph, cfg)
        pp = r["phase_peaks"]
        cells = [("peak", r["peak_live_bytes"], peak), ("forward", pp["forward"], phases.get("forward", 0)),
                 ("backward", pp["backward"], phases.get("backward", 0))]
        if cfg.get("opt", "sgd") != "none":
            cells.append(("step", pp["optimizer"], max(phases.get("step", 0), phases.get("zero_grad", 0))))
        for label, pred, real in cells:
            e = err(pred, real)
            if label == "peak":
                peak_errs.append(abs(e))
            if abs(e) > MAX_ERR:
                failures.append("%s: %s error %.3f %% (predicted %d, measured %d)" % (name, label, e, pred, real))
        rows.append((name[:-6] + ("" if source == "traces" else " (%s)" % source), cfg, cells))
    med = statistics.median(peak_errs) if peak_errs else 0.0
    if med > MAX_MEDIAN:
        failures.append("median peak error %.3f %% exceeds %.1f %%" % (med, MAX_MEDIAN))

    lines = ["# Validation against real PyTorch traces", "",
             "Generated by `tools/validate.py` (run by `make validate` and by ctest); do not edit by hand.",
             "Each row is one real PyTorch 1.13.1 CPU training step, from `tests/data/traces/` or, marked",
             "(oracle), from `tests/oracle/` (recorded here the same way, see tests/oracle/README.md; both by",
             "the recording kit's `trace_step.py`), predicted by",
             "`memsim run graphs/MODEL.json --profile cpu --step first` with the trace's batch, optimizer,",
             "in-place and freeze settings. Bytes are peak live bytes (exact requested sizes).",
             "Tolerance: every peak within %.0f %%, median peak error within %.0f %%." % (MAX_ERR, MAX_MEDIAN), "",
             "| trace | config | phase | measured | predicted | error |", "|---|---|---|---:|---:|---:|"]
    for name, cfg, cells in rows:
        c = "batch %s, %s%s%s" % (cfg["batch"], cfg.get("opt", "sgd"), ", in-place ReLU" if cfg.get("inplace") == "True" else "",
                                  ", freeze %s" % cfg["freeze"] if cfg.get("freeze", "0") != "0" else "")
        for i, (label, pred, real) in enumerate(cells):
            lines.append("| %s | %s | %s | %d | %d | %+.3f %% |" % (name if i == 0 else "", c if i == 0 else "", label,
                                                                   real, pred, err(pred, real)))
    lines += ["", "Median absolute peak error: **%.3f %%** over %d traces; largest: **%.3f %%**." %
              (med, len(peak_errs), max(peak_errs) if peak_errs else 0.0)]
    lines += gpu_stream_section(a.memsim, a.graphs, os.path.join(ROOT, "tests", "data", "gpu"))
    if failures:
        lines += ["", "Failures:", ""] + ["- " + f for f in failures]
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    if failures:
        print("validate: FAILED\n" + "\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
