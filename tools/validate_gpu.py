#!/usr/bin/env python3
"""memsim's cuda profile against real H100 recordings of PyTorch 2.11 training steps.

tests/data/gpu/h100_2_11/ holds what tests/oracle/gpu/record_gpu.py recorded in one session on an
NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, cuDNN 9.19, transformers 5.17, peft 0.21):
  fresh/              each case in a process of its own, recorded from before the model moved to the
                      device, three steps (warm-up 0): the whole allocation stream of a cold start
  fresh_expandable/   the same under PYTORCH_ALLOC_CONF=expandable_segments:True
  shared_process/     every case in one process after two warm-up steps (segments and cuBLAS
                      workspaces left by earlier cases), two recorded steps; nanoGPT compiled too
  shared_process_cold/ the same process, three steps from the model's move (no warm-up)
Each folder: CASE.pickle.gz (torch.cuda.memory._snapshot(), frames cut to 4) and summary.json
(per step max_memory_allocated / max_memory_reserved, read with reset_peak_memory_stats).

Two checks:
  1. The allocator: `memsim replay` of every snapshot (every folder) must reproduce the recorded
     peaks and place every allocation at its recorded address.
  2. The step: `memsim run GRAPH --gpu H100 --steps 3` of each fresh case against the recorded
     per-step peaks (allocated: live bytes; reserved: the run's peak).
"""
import argparse, gzip, json, os, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "gpu", "h100_2_11")
G213 = os.path.join(ROOT, "tests", "data", "traces_2_13", "graphs")
NANO = [os.path.join(G213, "nanogpt_gpt2_small.json"), "--batch", "4", "--set", "seq=1024"]
LLAMA = [os.path.join(DATA, "graphs", "llama_d1024_l8.json"), "--batch", "4", "--set", "seq=1024"]
LLAMA_BF16 = [os.path.join(DATA, "graphs", "llama_d1024_l8_bf16.json"), "--batch", "4", "--set", "seq=1024"]
RESNET = [os.path.join(G213, "resnet18.json"), "--batch", "64"]
D128 = [os.path.join(DATA, "graphs", "llama_d2048_l2_hd128.json"), "--batch", "2", "--set", "seq=2048"]
# case -> memsim run arguments (None: no rule yet; the reason)
CASES = {
    "mlp_fp32": [os.path.join(G213, "mlp.json"), "--batch", "256"],
    "nanogpt_fp32": NANO, "nanogpt_bf16": NANO + ["--amp", "bf16"],
    "nanogpt_bf16_flash": NANO + ["--amp", "bf16", "--sdpa-backend", "flash"],
    "nanogpt_bf16_efficient": NANO + ["--amp", "bf16", "--sdpa-backend", "efficient"],
    "nanogpt_bf16_math": NANO + ["--amp", "bf16", "--sdpa-backend", "math"],
    "llama_bf16": LLAMA + ["--amp", "bf16"],
    "llama_bf16_sac": LLAMA + ["--amp", "bf16", "--checkpoint", "model.layers.*", "--sac", "torchtitan"],
    "llama_lora_bf16": LLAMA_BF16 + ["--lora", "r=16,alpha=32,targets=q_proj,v_proj"],
    "resnet18_fp32": RESNET, "resnet18_bf16": RESNET + ["--amp", "bf16"],
    "lstm_fp32": "no explicit cuDNN RNN rule is validated yet (cuDNN's fused LSTM: weight buffer, reserve space)",
    "llama_d128_bf16": D128 + ["--amp", "bf16"],
    "llama_d128_bf16_flash": D128 + ["--amp", "bf16", "--sdpa-backend", "flash"],
    "llama_d128_bf16_math": D128 + ["--amp", "bf16", "--sdpa-backend", "math"],
}
# the cases recorded in another folder (by default: fresh/)
FOLDER = {c: "fresh_d128_h200" for c in CASES if c.startswith("llama_d128")}
MIB = 1024.0 * 1024.0
TOLERANCE = 0.1  # % of the recorded peak, allocated, for every case not in KNOWN_GAPS
# case -> why memsim differs (shown in the table; its error is not checked)
KNOWN_GAPS = {
    "resnet18_fp32": "cuDNN 9's engines on the H100 take far larger convolution workspaces than memsim's `typical` "
                     "(cuDNN 8) row: forward alone up to 233 MiB a call (conv workspaces below)",
    "resnet18_bf16": "as resnet18_fp32",
    "llama_d128_bf16_math": "the math path's grouped-query attention (repeat_interleave of k and v to the query heads, "
                            "and its backward) is not modelled",
}


def unpack(folder, tmp):
    """The folder's snapshots, decompressed into |tmp|: {case: path}."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".pickle.gz"):
            path = os.path.join(tmp, os.path.basename(folder) + "_" + name[:-3])
            with gzip.open(os.path.join(folder, name)) as f, open(path, "wb") as g:
                shutil.copyfileobj(f, g)
            out[name[:-len(".pickle.gz")]] = path
    return out


def err(pred, real):
    return 100.0 * (pred - real) / real if real else 0.0


def replay_rows(memsim, tmp):
    rows, failures = [], []
    for sub in ("fresh", "fresh_d128_h200", "shared_process", "shared_process_cold"):  # no expandable segments
        for case, path in unpack(os.path.join(DATA, sub), tmp).items():
            r = json.loads(subprocess.run([memsim, "replay", path, "--json"], check=True, capture_output=True,
                                          text=True).stdout)
            rec, sim = r["recorded_peak_reserved_bytes"], r["simulated_peak_reserved_bytes"]
            placed, total = r["alloc_decisions_matched"], r["allocs"]
            rows.append((sub, case, total, placed, rec, sim))
            if placed != total or rec != sim:
                failures.append("replay %s/%s: %d of %d at the recorded address, reserved %d vs %d" % (
                    sub, case, placed, total, sim, rec))
    return rows, failures


def requested_peak(folder, case):
    """The peak of live requested bytes over a fresh recording (every allocation since the model
    moved to the device is in it): alloc and free events carry the caller's requested size."""
    import pickle
    with gzip.open(os.path.join(folder, case + ".pickle.gz")) as f:
        trace = pickle.load(f)["device_traces"][0]
    live = peak = 0
    for e in trace:
        if e["action"] == "alloc":
            live += e["size"]
            peak = max(peak, live)
        elif e["action"] == "free_completed":
            live -= e["size"]
    return peak


def step_rows(memsim, sub="fresh", extra=()):
    """Per case: (case, recorded (requested, allocated, reserved) peaks, memsim's, why none)."""
    summary = {}
    for name in {sub} | (set(FOLDER.values()) if sub == "fresh" else set()):
        with open(os.path.join(DATA, name, "summary.json")) as f:
            summary.update({c["case"]: (os.path.join(DATA, name), c) for c in json.load(f)["cases"] if "steps" in c})
    rows = []
    for case, args in CASES.items():
        if case not in summary:
            continue
        folder, rec_case = summary[case]
        steps = rec_case["steps"]
        rec = (requested_peak(folder, case), max(s["max_memory_allocated"] for s in steps),
               max(s["max_memory_reserved"] for s in steps))
        if isinstance(args, str):
            rows.append((case, rec, None, args))
            continue
        cmd = [memsim, "run"] + args + ["--gpu", "H100", "--optimizer", "adamw", "--steps", str(len(steps)), "--loop-holds", "step"]
        r = json.loads(subprocess.run(cmd + list(extra) + ["--json"], check=True, capture_output=True, text=True).stdout)
        rows.append((case, rec, (r["peak_live_bytes"], r["peak_allocated_bytes"], r["peak_reserved_bytes"]), ""))
    return rows


def conv_workspaces(folder, case):
    """The forward convolution workspaces of the first recorded step: an allocation under conv.py
    freed by the very next event (cuDNN's workspace around the kernel), in call order."""
    import pickle
    with gzip.open(os.path.join(folder, case + ".pickle.gz")) as f:
        ev = [e for e in pickle.load(f)["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
    out, seen = [], set()
    for a, b in zip(ev, ev[1:]):
        frames = a.get("frames") or [{}]
        if a["action"] == "alloc" and b["action"] == "free_completed" and b["addr"] == a["addr"] and \
                frames[0].get("filename", "").endswith("conv.py"):
            if len(out) and a["size"] == out[0] and len(out) > 3:
                break  # the next step begins
            out.append(a["size"])
    return out


def memsim_conv_workspaces(memsim, policy):
    """memsim's forward cuDNN workspaces for resnet18 fp32 batch 64 on the H100, in call order."""
    with tempfile.TemporaryDirectory() as tmp:
        ev = os.path.join(tmp, "events.txt")
        subprocess.run([memsim, "run"] + RESNET + ["--gpu", "H100", "--optimizer", "adamw", "--cudnn-workspace", policy,
                                                   "--events", ev], check=True, capture_output=True)
        with open(ev) as f:
            rows = [l.split() for l in f]
    return [int(r[2]) for r in rows if r[0] == "A" and r[1] == "forward" and "cudnn workspace" in " ".join(r[3:])]


def table_lines(steps, failures, checked=True):
    lines = ["| case | requested: recorded | memsim | error | allocated: recorded | memsim | error | reserved: recorded | memsim | error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for case, rec, pred, why in steps:
        if pred is not None and case not in KNOWN_GAPS and checked:
            worst = max(abs(err(p, r)) for p, r in zip(pred[:2], rec[:2]))
            if worst > TOLERANCE:
                failures.append("gpu %s: peak off by %.3f %% (tolerance %.1f %%)" % (case, worst, TOLERANCE))
        why = why or KNOWN_GAPS.get(case, "")
        cells = []
        for k in range(3):
            cells.append("%.2f MiB | %s | %s" % (rec[k] / MIB, "%.2f MiB" % (pred[k] / MIB) if pred else "—",
                                                 "%+.3f %%" % err(pred[k], rec[k]) if pred else ""))
        lines.append("| %s | %s |%s" % (case, " | ".join(cells), " " + why if why else ""))
    return lines


def section(memsim):
    """Markdown lines and failures (a replay that is not exact, a case off by more than TOLERANCE)."""
    with tempfile.TemporaryDirectory() as tmp:
        replays, failures = replay_rows(memsim, tmp)
    steps = step_rows(memsim)
    with open(os.path.join(DATA, "fresh", "summary.json")) as f:
        s = json.load(f)
    lines = ["", "## cuda profile vs real H100 recordings (PyTorch %s, CUDA %s, cuDNN %s)" % (
                 s["torch"], s["cuda"], s["cudnn"]), "",
             "Generated by `tools/validate_gpu.py` from `tests/data/gpu/h100_2_11/`, recorded by",
             "`tests/oracle/gpu/record_gpu.py` on an %s (every case in a fresh process, three steps of" % s["device"],
             "AdamW (foreach) from the model's move to the device; the `llama_d128` cases, Llama-3's head dim, on an",
             "H200 of the same generation and SM count). Each case is simulated by `memsim run GRAPH --gpu H100",
             "--optimizer adamw --steps 3 --loop-holds step` with the case's settings (the recording's `step()`",
             "holds `out`, `logits` and `loss` until it returns). requested = the peak of live",
             "requested bytes (the snapshot's events; memsim's peak live bytes), allocated = `max_memory_allocated()`",
             "(the caching allocator's blocks), reserved = `max_memory_reserved()`, over the three steps.", "",
             "Tolerance: requested and allocated peaks within %.1f %% (known gaps named in the row)." % TOLERANCE, "",
             ]
    lines += table_lines(steps, failures)
    exp = step_rows(memsim, "fresh_expandable", ["--alloc-conf", "expandable_segments:True"])
    lines += ["", "The same cases recorded under `PYTORCH_ALLOC_CONF=expandable_segments:True` (`fresh_expandable/`),",
              "simulated with `--alloc-conf expandable_segments:True`:", ""]
    lines += table_lines(exp, failures)
    ws = conv_workspaces(os.path.join(DATA, "fresh"), "resnet18_fp32")
    fmt = lambda xs: ", ".join("%.1f" % (b / MIB) for b in xs)
    lines += ["", "Convolution workspaces, the forward calls of resnet18 fp32 (batch 64) in call order (MiB; a call",
              "without one is left out): recorded " + fmt(ws) + "; memsim `typical` (hopper) " +
              fmt(memsim_conv_workspaces(memsim, "typical")) + "; `max` " + fmt(memsim_conv_workspaces(memsim, "max")) + ".",
              "memsim's hopper row follows cuDNN 8's algorithm choice (docs/device-memory.md); cuDNN 9's engines",
              "on this H100 took the recorded sizes, which no rule of memsim derives yet."]
    exact = sum(1 for r in replays if r[2] == r[3] and r[4] == r[5])
    lines += ["", "The allocator: `memsim replay` of each of the %d snapshots (fresh processes, and one shared process, warm" % len(replays),
              "and cold; replay takes no expandable-segment recording) places",
              "every allocation at its recorded address and reproduces the recorded reserved peak in %d of %d." % (exact, len(replays)), ""]
    return lines, failures


def main(section=section, doc=__doc__, data=None):
    """Prints one section (a module's section(memsim), or section(memsim, data) with --data, whose default
    is |data|) and its failures; exit 1 on any."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--memsim", default=os.path.join(ROOT, "build", "memsim"))
    if data is not None:
        ap.add_argument("--data", default=data, help="a recording's folder (default: %(default)s)")
    a = ap.parse_args()
    if data is not None and not os.path.exists(os.path.join(a.data, "summary.json")):
        sys.exit("%s: %s: no summary.json (the recorder writes it)" % (os.path.basename(sys.argv[0]), a.data))
    lines, failures = section(a.memsim, a.data) if data is not None else section(a.memsim)
    print("\n".join(lines))
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
