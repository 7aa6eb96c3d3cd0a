#!/usr/bin/env python3
"""What memsim takes: every torchvision builder, every torch.nn module, ~70 functional ops and the
Hugging Face architectures, exported as a user would and simulated; writes docs/coverage.md.

    tools/coverage.py --memsim build/memsim --python /usr/bin/python3 --python .venv/bin/python -o docs/coverage.md
    tools/coverage.py --quick --memsim build/memsim        # a few known rows (ctest export.coverage)
    tools/coverage.py --render build/coverage -o docs/coverage.md   # from the workers' saved results

Each --python runs a worker (this script with --worker) over the cases its environment has
(torchvision, transformers; tools/coverage_cases.py) and saves its rows as JSON under --work;
the table puts one column per PyTorch release. A case is exported through the command line's own
front door (memsim_export.cli.main: fx, or export by execution when fx cannot trace; hf:ARCH),
then run with `memsim run GRAPH --profile cpu --torch 1.13|2.13`. Results: **ran** (exported and
simulated), **recorded** (ran, with N ops on recorded rules), **refused** (the exporter's one-line
refusal), **memsim failed** (exported; the simulator refused the graph), **build failed** (the
model itself could not be built in that release). torchvision models are built on the meta
device (no random initialisation: minutes saved, the same graph) and on the CPU when that fails.
"""
import argparse
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# --quick: (section, name) that must export and run in any release the worker has
QUICK = [("torchvision classification", "resnet18"), ("torch.nn module", "Linear"), ("torch.nn module", "GELU"),
         ("torch.nn module", "LayerNorm"), ("functional op", "F.relu"), ("functional op", "F.softmax"),
         ("torch.nn module", "AdaptiveMaxPool3d"), ("Hugging Face", "llama attn=sdpa"), ("Hugging Face", "gpt2 attn=sdpa"),
         ("Hugging Face", "mixtral attn=sdpa")]
RECORDED_KINDS = ("recorded", "opaque")  # op kinds replayed from a measurement (Note [Recorded rules])
CASE_TIMEOUT_S = 240


# ---- worker: one Python environment -------------------------------------------------------------

class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _first_line(text):
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    lines = [_scrub(ln) for ln in lines]
    again = [ln for ln in lines if ln.startswith("recording it as it runs failed too: ")]
    if again:  # fx could not trace it, nor export by execution: the second reason is the one
        return again[0][len("recording it as it runs failed too: "):][:240]
    said = [ln for ln in lines if ln.startswith("export_torch.py: ")]
    if said:  # the CLI's message, after whatever a library printed before it
        lines = lines[lines.index(said[0]):]
    elif lines[0].startswith("Traceback"):  # an uncaught error printed whole: its last line says what
        lines = lines[-1:]
    if lines[0].startswith("export_torch.py: unsupported by memsim") and lines[-1].startswith("unsupported ops:"):
        return lines[-1]  # the summary line names every unsupported op kind
    return lines[0].replace("export_torch.py: ", "")[:240]


def _scrub(line):
    """No machine paths in the table: the repository's and site-packages' prefixes dropped."""
    line = line.replace(ROOT + os.sep, "")
    for mark in ("site-packages/", "dist-packages/"):
        while mark in line:
            i = line.index(mark)
            j = line.rfind(" ", 0, i) + 1
            line = line[:j] + line[i + len(mark):]
    return line


def _meta_first(build):
    """The builder, run with tensor factories on the meta device (no random init)."""
    from memsim_export.eager import meta_device

    def b():
        with meta_device():
            return build()
    return b


def export_case(case, out_path, meta):
    """Exports one case with the CLI's main(); returns (rc, stderr)."""
    from memsim_export import cli
    section, name, build, inputs, loss = case
    if isinstance(build, str):  # hf:ARCH
        argv = [build, "--set", "batch=2", "--set", "seq=64"]
    else:
        mod = types.ModuleType("memsim_coverage_case")
        mod.build = _meta_first(build) if meta else build
        sys.modules["memsim_coverage_case"] = mod
        argv = ["memsim_coverage_case:build", "--loss", loss, "--set", "batch=2"]
        for spec in inputs:
            argv += ["--input", spec]
    argv += ["--name", name.replace(" ", "_"), "-o", out_path]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = cli.main(argv)
        except _Timeout:
            raise
        except Exception as e:  # noqa: BLE001 - an exporter bug or the model's own error: a row
            rc, err = 3, io.StringIO("%s: %s" % (type(e).__name__, e))
    return rc, err.getvalue()


def run_memsim(memsim, graph, torch_release):
    r = subprocess.run([memsim, "run", graph, "--profile", "cpu", "--torch", torch_release, "--json"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, _first_line(r.stderr or r.stdout)
    return json.loads(r.stdout), ""


def try_case(case, memsim, torch_release, tmp):
    section, name = case[0], case[1]
    row = {"section": section, "name": name}
    path = os.path.join(tmp, "g.json")
    if os.path.exists(path):
        os.remove(path)
    t0 = time.time()
    signal.alarm(CASE_TIMEOUT_S)
    try:
        meta = section.startswith("torchvision")
        rc, err = export_case(case, path, meta)
        if rc != 0 and meta:
            rc, err = export_case(case, path, False)
    except _Timeout:
        rc, err = 4, "timed out after %d s" % CASE_TIMEOUT_S
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.time() - t0, 1)
    if rc != 0:
        msg = _first_line(err)
        row.update(status="build failed" if _is_build_error(msg) else "refused", message=msg)
        return row
    with open(path) as f:
        g = json.load(f)
    row["ops"] = len(g["ops"])
    recorded = sorted({o["op"] for o in g["ops"] if o["op"] in RECORDED_KINDS or o.get("recorded")})
    out, msg = run_memsim(memsim, path, torch_release)
    if out is None:
        row.update(status="memsim failed", message=msg)
        return row
    row["peak_mib"] = round(out["peak_allocated_bytes"] / 2**20, 2)
    n_rec = sum(1 for o in g["ops"] if o["op"] in RECORDED_KINDS or o.get("recorded"))
    row.update(status="recorded" if n_rec else "ran", recorded=n_rec, recorded_kinds=recorded)
    return row


def _is_build_error(msg):
    return msg.startswith("cannot import") or "has no attribute" in msg


def worker(a):
    import torch
    import coverage_cases
    torch.set_num_threads(1)
    release = "1.13" if torch.__version__.startswith("1.") else "2.13"
    cases = []
    for s in a.sections.split(","):
        cases += coverage_cases.SECTIONS[s]()
    if a.only:
        want = set(a.only.split(","))
        cases = [c for c in cases if c[1] in want]
    rows = []
    signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            r = try_case(c, a.memsim, release, tmp)
            sys.stderr.write("%-28s %-30s %-13s %5.1fs %s\n" % (r["section"], r["name"], r["status"], r["seconds"],
                                                               r.get("message", "")[:100]))
            rows.append(r)
    versions = {"torch": torch.__version__.split("+")[0]}
    for pkg in ("torchvision", "transformers"):
        try:
            versions[pkg] = __import__(pkg).__version__.split("+")[0]
        except ImportError:
            pass
    if a.only and os.path.exists(a.json):  # --only with saved results: those rows replaced
        with open(a.json) as f:
            old = json.load(f)["rows"]
        new = {(r["section"], r["name"]): r for r in rows}
        rows = [new.pop((r["section"], r["name"]), r) for r in old] + list(new.values())
    doc = {"versions": versions, "release": release, "rows": rows}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    return 0


# ---- driver -------------------------------------------------------------------------------------

def spawn(python, a, json_path, sections, only=None):
    cmd = [python, os.path.abspath(__file__), "--worker", "--memsim", a.memsim, "--json", json_path,
           "--sections", sections]
    if only:
        cmd += ["--only", only]
    env = dict(os.environ, OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore")
    return subprocess.run(cmd, env=env, cwd=ROOT).returncode


def _cell(r):
    if r is None:
        return "—"
    s = r["status"]
    if s == "ran":
        return "ran"
    if s == "recorded":
        return "ran, %d recorded (%s)" % (r["recorded"], ", ".join(r["recorded_kinds"]))
    return "**%s**: %s" % (s, _scrub(r.get("message", "")).replace("|", "\\|"))


def render(docs, cmdline):
    """docs: the workers' results → Markdown (one column per release; rows in section order)."""
    cols = [d for d in docs]
    head = ["torch %s%s" % (d["versions"]["torch"], "".join(", %s %s" % (k, v) for k, v in sorted(d["versions"].items())
                                                         if k != "torch")) for d in cols]
    sections, index = [], {}
    for i, d in enumerate(cols):
        for r in d["rows"]:
            key = (r["section"], r["name"])
            if key not in index:
                index[key] = [None] * len(cols)
                if r["section"] not in sections:
                    sections.append(r["section"])
            index[key][i] = r
    lines = ["# Coverage: what the exporter and memsim take", "",
             "Generated by `%s` (tools/coverage.py; the cases are tools/coverage_cases.py). Each case is exported "
             "as a user would (`export_torch.py`'s front door: torch.fx, or export by execution when fx cannot "
             "trace; `hf:ARCH` for Hugging Face) and run with `memsim run GRAPH --profile cpu --torch R`. "
             "*ran*: exported and simulated; *recorded*: ran with ops on recorded rules; *refused*: the exporter's "
             "message; *memsim failed*: exported, refused by the simulator; *build failed*: the model cannot be "
             "built in that release; —: not available in that environment." % cmdline, "",
             "Environments: " + "; ".join("column %d: %s" % (i + 1, h) for i, h in enumerate(head)) + ".", "",
             "## Summary", "", "| section | " + " | ".join("ran / tried (%d)" % (i + 1) for i in range(len(cols))) + " |",
             "|---|" + "---:|" * len(cols)]
    total = [[0, 0] for _ in cols]
    for s in sections:
        cells = []
        for i in range(len(cols)):
            rs = [v[i] for (sec, _), v in index.items() if sec == s and v[i] is not None]
            ok = sum(1 for r in rs if r["status"] in ("ran", "recorded"))
            total[i][0] += ok
            total[i][1] += len(rs)
            cells.append("%d / %d" % (ok, len(rs)) if rs else "—")
        lines.append("| %s | %s |" % (s, " | ".join(cells)))
    lines.append("| **all** | %s |" % " | ".join("**%d / %d**" % tuple(t) for t in total))
    for s in sections:
        lines += ["", "## " + s, "", "| case | " + " | ".join("(%d)" % (i + 1) for i in range(len(cols))) + " |",
                  "|---|" + "---|" * len(cols)]
        for (sec, name), v in index.items():
            if sec == s:
                lines.append("| %s | %s |" % (name, " | ".join(_cell(r) for r in v)))
    lines.append("")
    return "\n".join(lines)


def quick(a):
    """Exports and runs the QUICK rows under this Python; fails when a known row regresses."""
    import coverage_cases  # noqa: F401
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "quick.json")
        only = ",".join(n for _, n in QUICK)
        sections = "torchvision,nn,functional,hf"
        if spawn(sys.executable, a, js, sections, only) != 0:
            return 1
        with open(js) as f:
            doc = json.load(f)
    got = {(r["section"], r["name"]): r for r in doc["rows"]}
    bad = [k for k in QUICK if k in got and got[k]["status"] not in ("ran", "recorded")]
    if not got or bad:
        for k in bad:
            sys.stderr.write("coverage --quick: %s %s: %s\n" % (k[0], k[1], _cell(got[k])))
        sys.stderr.write("coverage --quick: %d rows, %d regressed\n" % (len(got), len(bad)))
        return 1
    print(render([doc], "tools/coverage.py --quick"))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memsim", default=os.path.join(ROOT, "build", "memsim"), help="the memsim binary")
    ap.add_argument("--python", action="append", default=[], help="an interpreter to run the cases under "
                    "(repeat; default: this one)")
    ap.add_argument("--sections", default="torchvision,nn,functional,hf")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "coverage"), help="where the workers' JSON goes")
    ap.add_argument("--render", metavar="DIR", help="only render the table from DIR's saved results")
    ap.add_argument("--quick", action="store_true", help="a few known rows under this Python (ctest)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args(argv)
    a.memsim = os.path.abspath(a.memsim)
    if a.worker:
        return worker(a)
    if not os.path.exists(a.memsim):
        sys.stderr.write("coverage.py: no memsim binary at %s: build it (make) or give --memsim PATH\n" % a.memsim)
        return 2
    if a.quick:
        return quick(a)
    work = a.render or a.work
    if not a.render:
        os.makedirs(work, exist_ok=True)
        for i, py in enumerate(a.python or [sys.executable]):
            if spawn(py, a, os.path.join(work, "env%d.json" % i), a.sections, a.only) != 0:
                sys.stderr.write("coverage.py: the worker under %s failed\n" % py)
                return 1
    docs = []
    for fn in sorted(os.listdir(work)):
        if fn.startswith("env") and fn.endswith(".json"):
            with open(os.path.join(work, fn)) as f:
                docs.append(json.load(f))
    cmd = "tools/coverage.py " + " ".join("--python %s" % _portable(p, i) for i, p in enumerate(a.python)) \
        if a.python else "tools/coverage.py"
    text = render(docs, cmd)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


def _portable(path, i):
    """An interpreter as the docs show it: repository-relative, Debian's, or PYTHON<column>
    (a venv elsewhere; the Environments line gives its versions)."""
    p = os.path.abspath(path)
    if p.startswith(ROOT + os.sep):
        return os.path.relpath(p, ROOT)
    return path if path.startswith("/usr/") else "PYTHON%d" % (i + 1)


if __name__ == "__main__":
    sys.exit(main())
