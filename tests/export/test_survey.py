"""The torchvision survey script on a few models (the full run writes docs/torchvision-export.md)."""
import os
import tempfile
import unittest

from export_util import ROOT, run_cli


class Survey(unittest.TestCase):
    def test_subset(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "s.md")
            r = run_cli(["-m", "memsim_export.torchvision_survey", "--only",
                         "squeezenet1_1,shufflenet_v2_x0_5,efficientnet_b0,swin_t", "-o", out])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                text = f.read()
        self.assertIn("| squeezenet1_1 |", text)
        self.assertIn("| efficientnet_b0 |", text)
        self.assertIn("Exported: **3**, not exported: **1**", text)
        self.assertIn("shifted_window_attention", text)

    def test_committed_doc_exists(self):
        path = os.path.join(ROOT, "docs", "torchvision-export.md")
        self.assertTrue(os.path.exists(path))


if __name__ == "__main__":
    unittest.main()
