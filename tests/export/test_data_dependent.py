"""Export by execution on CPU tensors (Note [Data-dependent sizes] in docs/exporter.md): a model whose
sizes follow its values falls back from meta to CPU tensors and keeps the sizes of that run; the ops
that decide them are marked; constants read in forward become buffers; `x[idx] = v` is recorded as a
write (the write used to be dropped by the run path); torch 1.13's tensor-indexed get/setitem reach
the recorder. Runs under Debian's 1.13 and the 2.x venv; the last test needs the memsim binary."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from export_util import ROOT, check_well_formed

import torch
import torch.nn as nn

from memsim_export.eager import DataDependentError, export_eager

MEMSIM = os.environ.get("MEMSIM", os.path.join(ROOT, "build", "memsim"))
RELEASE = "2.13" if torch.__version__.startswith("2.") else "1.13"


class Keep(nn.Module):
    """Keeps the rows whose first feature is positive (a score threshold), writes them into a
    zero tensor through an index, and reads a plain tensor attribute made in __init__."""

    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)
        self.anchors = [torch.arange(16, dtype=torch.float32)]  # neither parameter nor buffer

    def forward(self, x):
        h = self.fc(x) + self.anchors[0]
        keep = torch.where(h[:, 0] > 0)[0]
        kept = h[keep]
        out = torch.zeros_like(h)
        out[keep] = kept * 2
        return self.head(out).sum() + kept.sum()


def build(binding):
    torch.manual_seed(0)
    return Keep()


def export(device):
    return export_eager(build, ["64,16"], loss="output", name="keep", device=device)


def ops(g, kind):
    return [o for o in g["ops"] if o["op"] == kind]


class DataDependentTest(unittest.TestCase):
    def test_meta_refuses_with_the_reason(self):
        with self.assertRaises(DataDependentError) as cm:
            export("meta")
        self.assertIn("on meta tensors failed", str(cm.exception))
        self.assertGreater(cm.exception.param_bytes, 0)

    def test_cpu_run_keeps_the_real_sizes(self):
        g = export("cpu")
        check_well_formed(self, g)
        m = build({})
        torch.manual_seed(0)
        x = torch.randn(64, 16)  # the input export_eager draws on CPU tensors (seed 0)
        with torch.no_grad():
            n = int((m.fc(x) + m.anchors[0])[:, 0].gt(0).sum())
        self.assertTrue(0 < n < 64)
        kept = [o for o in ops(g, "index_select") if o["inputs"][0].startswith("add")]
        self.assertEqual(len(kept), 1)
        marked = [o for o in g["ops"] if o.get("attrs", {}).get("data_dependent")]
        self.assertEqual(len(marked), 1, "the where(cond) that decides the kept rows is marked")
        self.assertEqual(marked[0]["attrs"]["out0_shape"], [n])  # measured on the values it ran on
        self.assertIn(marked[0]["outputs"][0], kept[0]["inputs"])

    def test_constant_becomes_a_buffer(self):
        g = export("cpu")
        names = [b["name"] for b in g["buffers"]]
        self.assertIn("_constant", names)
        const = next(b for b in g["buffers"] if b["name"] == "_constant")
        self.assertEqual(const["shape"], [16])

    def test_setitem_is_a_write_that_later_ops_read(self):
        g = export("cpu")
        writes = ops(g, "view_write")
        self.assertEqual(len(writes), 1)
        self.assertEqual(writes[0]["attrs"]["write"], "index_put")
        head = next(o for o in ops(g, "linear") if o["inputs"][1] == "head.weight")
        self.assertEqual(head["inputs"][0], writes[0]["outputs"][0])

    def test_auto_falls_back_and_memsim_reports_it(self):
        if not os.path.exists(MEMSIM):
            self.fail("memsim binary not found at %s (set MEMSIM)" % MEMSIM)
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "keep.py")
            with open(src, "w") as f:
                f.write("import sys\nsys.path.insert(0, %r)\nfrom test_data_dependent import build as _b\n"
                        "def build():\n    return _b({})\n" % os.path.dirname(os.path.abspath(__file__)))
            out = os.path.join(d, "keep.json")
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools"))
            r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"),
                                src + ":build", "--input", "64,16", "--loss", "output", "--trace", "run", "-o", out],
                               env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([MEMSIM, "run", out, "--profile", "cpu", "--torch", RELEASE], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("data-dependent sizes: ", r.stdout)
            self.assertIn("kept the sizes of the input the graph was exported with", r.stdout)
            r = subprocess.run([MEMSIM, "run", out, "--profile", "cpu", "--torch", RELEASE, "--json"],
                               capture_output=True, text=True)
            rep = json.loads(r.stdout)
            self.assertTrue(rep["recorded_rules"]["data_dependent"])
            r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"),
                                src + ":build", "--input", "64,16", "--loss", "output", "--trace", "run",
                                "--device", "meta", "-o", out], env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("on meta tensors failed", r.stderr)


class IndexingTest(unittest.TestCase):
    def test_tensor_index_pair_is_recorded(self):
        class Pick(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                y = self.fc(x).reshape(2, -1)
                idx = y.topk(3, dim=1)[1]
                return torch.sigmoid(y[torch.arange(2)[:, None], idx]).sum()
        g = export_eager(lambda b: Pick(), ["2,8"], loss="output", name="pick")
        check_well_formed(self, g)
        self.assertTrue(any(o["op"] in ("recorded", "index") for o in g["ops"]))
        sig = ops(g, "sigmoid")[0]
        self.assertNotEqual(sig["inputs"][0], "")


if __name__ == "__main__":
    unittest.main()
