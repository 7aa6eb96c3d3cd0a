"""Export by execution (--trace run) and torch.fx give graphs with the same memory: the same
`memsim run` peaks (overall and per phase) on both profiles, for zoo models fx can trace.
Needs the memsim binary: MEMSIM=path (set by tests/export/export.cmake; default build/memsim)."""
import json
import os
import subprocess
import tempfile
import unittest

import torchvision

from export_util import ROOT
import models
from memsim_export import export_model, write_graph
from memsim_export.eager import export_eager

MEMSIM = os.environ.get("MEMSIM") or os.path.join(ROOT, "build", "memsim")

CASES = [  # name, builder, input specs
    ("mlp", lambda: models.mlp()[0], ["x=batch,1000"]),
    ("resnet18", lambda: torchvision.models.resnet18(), ["x=batch,3,224,224"]),
    ("bert_small", lambda: models.bert_small()[0], [models.IDS]),
    ("gpt2_tiny", lambda: models.gpt2_tiny()[0], ["ids=int64:batch,64@0:1000"]),
]


def peaks(path, profile):
    out = subprocess.run([MEMSIM, "run", path, "--profile", profile, "--batch", "4", "--optimizer", "adam",
                          "--json"], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    return r["peak_live_bytes"], r["phase_peaks"]


class RunParity(unittest.TestCase):
    def test_same_peaks_as_fx(self):
        self.assertTrue(os.path.exists(MEMSIM), "no memsim binary at %s (set MEMSIM)" % MEMSIM)
        with tempfile.TemporaryDirectory() as d:
            for name, build, specs in CASES:
                with self.subTest(model=name):
                    fx, run = os.path.join(d, name + ".fx.json"), os.path.join(d, name + ".run.json")
                    write_graph(export_model(build(), specs, name=name), fx)
                    write_graph(export_eager(lambda _: build(), specs, name=name), run)
                    for profile in ("cuda", "cpu"):
                        self.assertEqual(peaks(run, profile), peaks(fx, profile), "%s %s" % (name, profile))


if __name__ == "__main__":
    unittest.main()
