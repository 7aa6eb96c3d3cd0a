"""Recorded rules (Note [Recorded rules]): the round trip measure -> graph -> simulate for ops that
also have an explicit rule (gelu, layer_norm, softplus), whose recorded plan must give memsim the
same allocations as the explicit rule; and export of ops with no rule (torch.special, cumulative
ops, a user's autograd.Function) by --trace auto. Needs the memsim binary (MEMSIM)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from export_util import GRAPHS, ROOT, run_cli  # noqa: F401  (puts tools/ on sys.path)

import torch
import torch.nn as nn
import torch.nn.functional as F

from memsim_export import record
from memsim_export.eager import export_eager

MEMSIM = os.environ.get("MEMSIM", os.path.join(ROOT, "build", "memsim"))
RELEASE = "2.13" if torch.__version__.startswith("2.") else "1.13"


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(64, 128), nn.Linear(128, 128), nn.Linear(128, 10)
        self.ln = nn.LayerNorm(128)

    def forward(self, x):
        h = F.gelu(self.a(x))
        h = F.softplus(self.b(self.ln(h)))
        return self.c(h)


class Deconv(nn.Module):  # F.conv_transpose2d, strided, on an input that requires grad (Note [Transposed convolution])
    def __init__(self):
        super().__init__()
        self.pre, self.fc = nn.Conv2d(16, 16, 3, padding=1), nn.Linear(16 * 16 * 16, 10)
        self.up = nn.ConvTranspose2d(16, 16, 4, stride=2, padding=1)

    def forward(self, x):
        h = F.conv_transpose2d(torch.relu(self.pre(x)), self.up.weight, self.up.bias, stride=2, padding=1)
        return self.fc(torch.relu(h).flatten(1))


def export(always=(), model=Mixed, shape="batch,64"):
    record.ALWAYS_RECORD.clear()
    record.ALWAYS_RECORD.update(always)
    try:
        return export_eager(lambda binding: model(), [shape], name=model.__name__.lower())
    finally:
        record.ALWAYS_RECORD.clear()


def simulate(g, *extra):
    """(report JSON, [(A|F, phase, bytes)] of the event stream) of memsim run on graph g."""
    with tempfile.TemporaryDirectory() as d:
        path, ev = os.path.join(d, "g.json"), os.path.join(d, "events.txt")
        with open(path, "w") as f:
            json.dump(g, f)
        r = subprocess.run([MEMSIM, "run", path, "--profile", "cpu", "--torch", RELEASE, "--json", "--events", ev]
                           + list(extra), capture_output=True, text=True)
        if r.returncode != 0:
            return r, None
        with open(ev) as f:
            events = [tuple(line.split()[:3]) for line in f]
        return json.loads(r.stdout), events


class RoundTripTest(unittest.TestCase):
    def test_recorded_plans_match_the_explicit_rules(self):
        explicit = export()
        recorded = export({"gelu", "softplus", "layer_norm"})
        kinds = [op["op"] for op in recorded["ops"]]
        self.assertEqual(kinds.count("recorded"), 3, kinds)
        self.assertNotIn("recorded", [op["op"] for op in explicit["ops"]])
        for op in recorded["ops"]:
            if op["op"] == "recorded":  # sizes follow the op's tensors, so they scale with the batch
                self.assertNotIn("-", op["attrs"]["fwd_like"].split()[:1], op)
        rep_e, ev_e = simulate(explicit)
        rep_r, ev_r = simulate(recorded)
        self.assertIsNotNone(ev_e, rep_e)
        self.assertIsNotNone(ev_r, rep_r)
        self.assertEqual(ev_r, ev_e, "the recorded rules' allocations differ from the explicit rules'")
        self.assertEqual(rep_r["peak_live_bytes"], rep_e["peak_live_bytes"])
        self.assertEqual(len(rep_r["recorded_rules"]["ops"]), 3)
        self.assertNotIn("recorded_rules", rep_e)

    def test_recorded_conv_transpose_matches_the_explicit_rule(self):
        explicit = export((), Deconv, "batch,16,8,8")
        recorded = export({"conv_transpose2d"}, Deconv, "batch,16,8,8")
        self.assertIn("conv_transpose2d", [op["op"] for op in explicit["ops"]])
        self.assertEqual([op["op"] for op in recorded["ops"]].count("recorded"), 1)
        rep_e, ev_e = simulate(explicit)
        rep_r, ev_r = simulate(recorded)
        self.assertIsNotNone(ev_e, rep_e)
        self.assertIsNotNone(ev_r, rep_r)
        self.maxDiff = None
        self.assertEqual(ev_r, ev_e, "the recorded conv_transpose2d's allocations differ from the explicit rule's")

    def test_strict_refuses_recorded_rules(self):
        r, _ = simulate(export({"gelu"}), "--strict")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("--strict", r.stderr)


class NoRuleExportTest(unittest.TestCase):
    def test_auto_falls_back_to_recording_ops_with_no_rule(self):
        for name, spec in (("special_mlp", "x=batch,256"), ("custom_fn_mlp", "x=batch,256"),
                           ("cum_cnn", "x=batch,3,16,16")):
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "g.json")
                r = run_cli(["tools/export_torch.py", "graphs/recorded_models.py:%s_export" % name, "--input", spec,
                             "-o", out])
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out) as f:
                    g = json.load(f)
                targets = [op["attrs"]["target"] for op in g["ops"] if op["op"] == "recorded"]
                self.assertTrue(targets, name)
                if name == "custom_fn_mlp":
                    self.assertIn("SquaredRelu.apply", targets)
                rep, _ = simulate(g)
                self.assertIn("recorded_rules", rep)


if __name__ == "__main__":
    unittest.main()
