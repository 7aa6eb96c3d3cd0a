"""--loss FILE.py:FUNC --target SPEC: the user's loss function applied to the model's output,
recorded as it runs (module "loss"), with the output held across the step as a loop holding it
does. F.cross_entropy as the user's function gives the graph and the memsim peaks of the built-in
--loss cross_entropy. Needs the memsim binary: MEMSIM=path (set by tests/export/export.cmake)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from export_util import ROOT

MEMSIM = os.environ.get("MEMSIM") or os.path.join(ROOT, "build", "memsim")
MODEL = '''import torch.nn as nn
import torch.nn.functional as F
def build():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
def ce(out, y):
    return F.cross_entropy(out, y)
def ce_l2(out, y):
    return F.cross_entropy(out, y) + 0.01 * out.pow(2).mean()
'''


def export(d, *args):
    out = os.path.join(d, "g.json")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"), os.path.join(d, "m.py:build"),
                        "--input", "batch,16", "--set", "batch=4", "-o", out] + list(args),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r
    with open(out) as f:
        return json.load(f), r


def peaks(g, d):
    path = os.path.join(d, "p.json")
    with open(path, "w") as f:
        json.dump(g, f)
    out = subprocess.run([MEMSIM, "run", path, "--profile", "cpu", "--batch", "4", "--json"], capture_output=True,
                         text=True, check=True).stdout
    r = json.loads(out)
    return r["peak_live_bytes"], r["phase_peaks"]


class UserLoss(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tempfile.mkdtemp()
        with open(os.path.join(cls.d, "m.py"), "w") as f:
            f.write(MODEL)

    def test_recorded_after_the_model_and_output_held(self):
        g, r = export(self.d, "--loss", os.path.join(self.d, "m.py:ce_l2"), "--target", "int64:batch@0:10")
        self.assertIsNotNone(g, r.stderr)
        self.assertEqual([i["name"] for i in g["inputs"]], ["input", "target"])
        loss_ops = [o["op"] for o in g["ops"] if o.get("module") == "loss"]
        self.assertEqual(loss_ops, ["cross_entropy", "pow", "mean", "mul", "add"])
        self.assertEqual(g["outputs"], ["linear_1"])  # the logits, held across the step
        self.assertEqual(g["loss"], g["ops"][-1]["outputs"][0])

    def test_same_as_the_builtin_cross_entropy(self):
        self.assertTrue(os.path.exists(MEMSIM), "no memsim binary at %s (set MEMSIM)" % MEMSIM)
        user, r = export(self.d, "--loss", os.path.join(self.d, "m.py:ce"), "--target", "int64:batch@0:10")
        self.assertIsNotNone(user, r.stderr)
        builtin, r = export(self.d, "--trace", "run")
        self.assertIsNotNone(builtin, r.stderr)
        self.assertEqual([o["op"] for o in user["ops"]], [o["op"] for o in builtin["ops"]])
        self.assertEqual(peaks(user, self.d), peaks(builtin, self.d))

    def test_errors(self):
        g, r = export(self.d, "--loss", os.path.join(self.d, "m.py:ce"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs --target SPEC", r.stderr)
        g, r = export(self.d, "--loss", "nosuchloss")
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected one of cross_entropy", r.stderr)
        g, r = export(self.d, "--target", "int64:batch")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--target applies with --loss FILE.py:FUNC", r.stderr)


if __name__ == "__main__":
    unittest.main()
