"""Records a user's torch.optim.Optimizer as a memsim optimizer program (Note [Recorded
optimizers] in docs/op-rules.md): one step of it runs on three probe parameters under an
allocation spy, and the per-parameter pattern of allocations and frees is written into the graph
file (key "optimizer"), for memsim to replay on every parameter of the model.

    export_torch.py ... --optimizer FILE.py:CLASS[:KWARGS]     e.g. llm_models.py:CS336AdamW
"""
import os
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction

from .errors import ExportError

# Probe parameter lengths (fp32): distinct primes, so every allocation's size names the
# parameter it belongs to (size = ratio x parameter bytes for a small ratio).
PROBE = (1009, 1013, 1019)
RATIOS = [Fraction(1, 8), Fraction(1, 4), Fraction(1, 2), Fraction(1), Fraction(2), Fraction(4), Fraction(8)]
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_spec(spec):
    """FILE.py:CLASS[:KWARGS] (KWARGS a Python dict literal) -> (FILE.py:CLASS, KWARGS)."""
    parts = spec.split(":")
    if len(parts) < 2:
        raise ExportError("--optimizer %r: expected FILE.py:CLASS[:{kwargs}] or MODULE:CLASS" % spec)
    return ":".join(parts[:2]), ":".join(parts[2:])


def build_spy(workdir):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise ExportError("--optimizer needs a C compiler (cc) to build the allocation spy")
    so = os.path.join(workdir, "allocspy.so")
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", so, os.path.join(HERE, "allocspy.c"), "-ldl",
                        "-lpthread"], capture_output=True, text=True)
    if r.returncode != 0:
        raise ExportError("building the allocation spy failed:\n" + r.stderr)
    return so


def run_probe(spec, kwargs):
    """Runs optimizer_probe.py under the spy; returns the log's lines."""
    with tempfile.TemporaryDirectory(prefix="memsim-optim-") as d:
        so = build_spy(d)
        out = os.path.join(d, "optim.trace")
        env = dict(os.environ, LD_PRELOAD=so, PYTHONPATH=os.path.dirname(HERE))
        r = subprocess.run([sys.executable, "-m", "memsim_export.optimizer_probe", spec, kwargs,
                            ",".join(map(str, PROBE)), out], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise ExportError("running %s on probe parameters failed:\n%s" % (spec, r.stderr.strip()[-2000:]))
        with open(out) as f:
            return f.read().splitlines()


def split_steps(lines):
    """{'CTOR': [...], 'STEP 1': [...], ...}: per section, ('A'|'F', bytes, ptr) in order."""
    sections, cur = {}, None
    for ln in lines:
        f = ln.split(" ", 3)
        if f[0] == "M":
            cur = f[2] if len(f) < 4 else f[2] + " " + f[3]
            sections[cur] = []
        elif cur is not None:
            sections[cur].append((f[0], int(f[2]), f[3]))
    for need in ("CTOR", "STEP 1", "STEP 2", "STEP 3"):
        if need not in sections:
            raise ExportError("the allocation log has no %s section (did step() raise?)" % need)
    return sections


def owner(nbytes):
    """(parameter index, ratio) for a parameter-relative size, or (None, None) for a constant."""
    for j, n in enumerate(PROBE):
        for r in RATIOS:
            if Fraction(nbytes) == r * 4 * n:
                return j, r
    return None, None


def size_text(r, nbytes):
    return "%dB" % nbytes if r is None else str(r)


class Segmenter:
    """Walks the allocation log of the constructor and the steps, naming every object by the
    parameter it belongs to and its position in that parameter's iteration."""

    def __init__(self):
        self.live = {}    # ptr -> object, across sections
        self.count = 0    # allocation order over all sections

    def section(self, events, name):
        """The program (resident, before, body, end) of one section of the log."""
        resident = {j: sorted((o for o in self.live.values() if o["param"] == j), key=lambda o: o["seq"])
                    for j in range(len(PROBE))}
        for objs in resident.values():
            for i, o in enumerate(objs):
                o["ref"] = ("state", i, o["param"])
        ops, starts, cur = [], [], -1
        for kind, nbytes, ptr in events:
            if kind == "A":
                j, r = owner(nbytes)
                if j is not None and j != cur:
                    if j != cur + 1:
                        raise ExportError("%s: the step visits the parameters out of order (parameter %d after %d); "
                                          "memsim records optimizers that loop once over the parameters" % (name, j, cur))
                    cur = j
                    starts.append(len(ops))
                self.count += 1
                o = {"param": None, "seq": self.count, "size": size_text(r, nbytes), "ratio": r}
                self.live[ptr] = o
                ops.append(("alloc", o))
            elif ptr in self.live:  # else allocated before recording (a grad, a parameter)
                ops.append(("free", self.live.pop(ptr)))
        if starts and len(starts) != len(PROBE):
            raise ExportError("%s: the step touched %d of the %d parameters" % (name, len(starts), len(PROBE)))
        if not starts:  # nothing parameter-sized (plain SGD): no loop to find
            starts = [len(ops)] * len(PROBE)
        # An iteration may begin with scalar (0-dim) allocations before its first parameter-sized
        # one: try every shift of the iteration boundaries and keep the first that is periodic.
        last_error = None
        for d in range(0, min(b - a for a, b in zip([0] + starts, starts)) + 1):
            bounds = [a - d for a in starts]
            iters = [ops[b:e] for b, e in zip(bounds, bounds[1:] + [len(ops)])]
            self._name(ops[:bounds[0]], -1, "global")
            for j, it in enumerate(iters):
                self._name(it, j, "temp")
            try:
                return program(resident, iters, ops[:bounds[0]])
            except ExportError as e:
                last_error = ExportError("%s: %s" % (name, e))
        raise last_error

    @staticmethod
    def _name(ops, j, what):
        """Objects allocated in |ops| belong to parameter |j|, numbered in allocation order."""
        k = 0
        for kind, o in ops:
            if kind == "alloc":
                o["param"], o["ref"] = j, (what, k, j)
                k += 1


def op_text(op, j):
    kind, o = op
    if kind == "alloc":
        return "alloc " + o["size"]
    what, i, p = o["ref"]
    if what == "global":
        return "free g%d" % i
    if p not in (j, j - 1):
        raise ExportError("parameter %d's iteration frees an object of parameter %d; memsim records frees of the "
                          "current or the previous parameter's objects only" % (j, p))
    return "free %s%s%d" % ("prev " if p == j - 1 else "", "t" if what == "temp" else "s", i)


def program(resident, iters, prologue):
    """The template (from the middle parameter) and the frees after the last one, checked by
    regenerating all three parameters' events from it."""
    pro = [op_text(op, -1) for op in prologue]
    if any(t.startswith("free ") and not t.startswith("free g") for t in pro):
        raise ExportError("before the loop over the parameters the step frees parameter-sized objects; not supported")
    body = [op_text(op, 1) for op in iters[1]]
    if any(t.startswith("free g") for t in body):
        raise ExportError("the loop over the parameters frees an object made before it; not supported")
    n_body = len(body)
    last = [op_text(op, 2) for op in iters[2]]
    if last[:n_body] != body:
        raise ExportError("the first and last parameters' iterations differ; not a per-parameter loop")
    end = last[n_body:]
    if any(not t.startswith("free ") or t.startswith("free prev") for t in end):
        raise ExportError("after the last parameter the step allocates or frees older objects; not supported")
    first = [t for t in body if not t.startswith("free prev")]
    if [op_text(op, 0) for op in iters[0]] != first:
        raise ExportError("the first parameter's iteration is not the others' without the previous parameter")
    res = [o["size"] for o in resident[1]]
    if [o["size"] for o in resident[0]] != res or [o["size"] for o in resident[2]] != res:
        raise ExportError("the parameters hold different optimizer state")
    return {"resident": res, "before": pro, "body": body, "end": end}


# Optimizers memsim has built in because their state is not a fixed fraction of each parameter's
# bytes (block-wise 8-bit states with fp32 below min_8bit_size, factored moments): MODULE:CLASS ->
# the --optimizer name (Notes [bitsandbytes optimizers] and [Adafactor] in docs/op-rules.md).
BUILTIN = {"torch.optim:Adafactor": "adafactor"}
BUILTIN.update({"bitsandbytes.optim:" + c: n for c, n in (
    ("Adam8bit", "adam8bit"), ("AdamW8bit", "adamw8bit"), ("PagedAdam8bit", "paged_adam8bit"),
    ("PagedAdamW8bit", "paged_adamw8bit"), ("PagedAdam", "paged_adam"), ("PagedAdamW", "paged_adamw"),
    ("Lion8bit", "lion8bit"), ("PagedLion8bit", "paged_lion8bit"))})


def record_optimizer(spec):
    """The graph file's "optimizer" value for FILE.py:CLASS[:KWARGS]."""
    cls_spec, kwargs = parse_spec(spec)
    builtin = BUILTIN.get(cls_spec.replace("bitsandbytes:", "bitsandbytes.optim:"))
    if builtin:
        raise ExportError("--optimizer %s: memsim has it built in (its state is not a fixed fraction of each "
                          "parameter); export without --optimizer and run `memsim run GRAPH --optimizer %s`"
                          % (cls_spec, builtin))
    import torch
    sections = split_steps(run_probe(cls_spec, kwargs))
    seg = Segmenter()
    # State made in __init__ (as Adagrad does) is the first step's resident state.
    ctor = seg.section(sections["CTOR"], "the constructor")
    if ctor["before"] or ctor["end"] or any(not t.startswith("alloc") for t in ctor["body"]):
        raise ExportError("the constructor allocates scalars or frees tensors; not supported")
    first = seg.section(sections["STEP 1"], "step 1")
    steady = seg.section(sections["STEP 2"], "step 2")
    third = seg.section(sections["STEP 3"], "step 3")
    if third != steady:
        raise ExportError("steps 2 and 3 allocate differently: the optimizer has no steady state memsim can replay")
    return {
        "name": cls_spec.rsplit(":", 1)[1],
        "source": "tools/export_torch.py --optimizer " + spec,
        "recorded_with": "torch %s CPU, fp32 probe parameters of %s elements" % (
            torch.__version__, ", ".join(map(str, PROBE))),
        "first_step": first,
        "steady_step": steady,
    }
