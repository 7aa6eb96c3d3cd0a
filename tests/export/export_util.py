"""Shared helpers for the exporter tests (run with /usr/bin/python3: Debian's torch 1.13)."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(ROOT, "tools")
GRAPHS = os.path.join(ROOT, "graphs")
TRACE_STEP = os.path.join(ROOT, "tests", "oracle", "kit", "trace_step.py")  # the recording kit
PY = "/usr/bin/python3"

for p in (TOOLS, GRAPHS):
    if p not in sys.path:
        sys.path.insert(0, p)

import torch  # noqa: E402

torch.set_num_threads(1)


def vocabulary():
    """Op names of the table in docs/graph-format.md."""
    with open(os.path.join(ROOT, "docs", "graph-format.md")) as f:
        text = f.read()
    ops = set()
    in_ops = False
    for line in text.splitlines():
        if line.startswith("## "):
            in_ops = line.strip() == "## Ops"
        if in_ops and line.startswith("| `"):
            first = line.split("|")[1]
            ops.update(re.findall(r"`([a-z_0-9]+)`", first))
    return ops


def trace_step_models():
    """The model table of the recording kit's trace_step.py (tests/oracle/kit; its source up to
    main(), executed without the allocation spy)."""
    with open(TRACE_STEP) as f:
        src = f.read()
    src = src[:src.index("\ndef main(")]
    src = src.replace("spy = ctypes.CDLL(None)", "spy = None")
    ns = {"__name__": "trace_step_models"}
    exec(compile(src, TRACE_STEP, "exec"), ns)
    return ns["MODELS"]


def run_cli(args, **kw):
    env = dict(os.environ)
    env["PYTHONPATH"] = TOOLS + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([PY] + args, cwd=ROOT, env=env, capture_output=True, text=True, **kw)


def check_well_formed(tc, g):
    """Structural checks every exported graph must pass."""
    tc.assertEqual(g["format"], "memsim-graph")
    tc.assertEqual(g["version"], 1)
    defined = set()
    for t in g["inputs"] + g["parameters"] + g["buffers"]:
        tc.assertNotIn(t["name"], defined, "duplicate tensor name %s" % t["name"])
        defined.add(t["name"])
    vocab = vocabulary()
    for i, op in enumerate(g["ops"]):
        tc.assertIn(op["op"], vocab, "op %d %s not in docs/graph-format.md" % (i, op["op"]))
        for name in op["inputs"]:
            tc.assertIn(name, defined, "op %d (%s) reads %s before it is defined" % (i, op["op"], name))
        for name in op.get("attrs", {}).get("keep_alive", []):
            tc.assertIn(name, defined, "op %d (%s) keeps %s alive before it is defined" % (i, op["op"], name))
        for name in op["outputs"]:
            tc.assertNotIn(name, defined, "op %d redefines %s" % (i, name))
            defined.add(name)
    for name in g.get("outputs", []):
        tc.assertIn(name, defined)
    if "loss" in g:
        tc.assertIn(g["loss"], defined)
    used = {n for op in g["ops"] for n in op["inputs"]}
    for p in g["parameters"]:
        tc.assertIn(p["name"], used, "parameter %s is never used" % p["name"])


def ops_of(g, kind):
    return [o for o in g["ops"] if o["op"] == kind]
