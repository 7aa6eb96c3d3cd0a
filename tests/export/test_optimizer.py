"""tools/export_torch.py --optimizer: recording a user's optimizer (Note [Recorded optimizers])."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from memsim_export.errors import ExportError  # noqa: E402
from memsim_export.optimizer_record import record_optimizer  # noqa: E402

CS336 = os.path.join(ROOT, "graphs", "llm_models.py") + ":CS336AdamW"


class RecordedOptimizerTest(unittest.TestCase):
    def test_cs336_adamw_keeps_two_states_and_frees_last_locals_after_the_loop(self):
        p = record_optimizer(CS336)
        self.assertEqual(p["name"], "CS336AdamW")
        first, steady = p["first_step"], p["steady_step"]
        self.assertEqual(first["resident"], [])
        self.assertEqual(steady["resident"], ["1", "1"])  # m and v, each the parameter's size
        # m_prev / v_prev (zeros_like on the first step, the old state later) live until the next
        # parameter's state.get rebinds them, and after the last parameter until step() returns.
        self.assertEqual(first["end"], ["free t3", "free t4"])
        self.assertIn("free prev t3", first["body"])
        self.assertEqual(steady["end"], ["free s0", "free s1"])
        self.assertIn("free prev s0", steady["body"])
        # Every expression is a new parameter-sized tensor: 14 per parameter per step.
        self.assertEqual(sum(1 for op in steady["body"] if op == "alloc 1"), 14)

    def test_state_made_in_the_constructor_is_the_first_steps_resident_state(self):
        p = record_optimizer("torch.optim:Adagrad")
        self.assertEqual(p["first_step"]["resident"], ["4B", "1"])  # step tensor and sum

    def test_built_in_optimizers_are_named_instead_of_recorded(self):
        with self.assertRaisesRegex(ExportError, "memsim run GRAPH --optimizer adamw8bit"):
            record_optimizer("bitsandbytes.optim:AdamW8bit")
        with self.assertRaisesRegex(ExportError, "--optimizer adafactor"):
            record_optimizer("torch.optim:Adafactor:{'lr': 0.01}")

    def test_two_loops_over_the_parameters_are_refused_with_a_reason(self):
        with self.assertRaisesRegex(ExportError, "out of order .* loop once over the parameters"):
            record_optimizer("torch.optim:AdamW")

    def test_a_failing_constructor_is_reported(self):
        with self.assertRaisesRegex(ExportError, "required optimization parameter lr"):
            record_optimizer("torch.optim:SGD")

    def test_graph_option_adds_the_optimizer_and_memsim_replays_it(self):
        memsim = os.environ.get("MEMSIM")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "mlp.json")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"), "--optimizer",
                                "torch.optim:SGD:{'lr': 0.1, 'momentum': 0.9}", "--graph",
                                os.path.join(ROOT, "graphs", "mlp.json"), "-o", out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                g = json.load(f)
            self.assertEqual(g["optimizer"]["name"], "SGD")
            if memsim:  # run by ctest with the binary (export.optimizer)
                rec = json.loads(subprocess.run([memsim, "run", out, "--profile", "cpu", "--torch", "1.13", "--optimizer", "recorded",
                                                 "--json"], capture_output=True, text=True, check=True).stdout)
                ref = json.loads(subprocess.run([memsim, "run", out, "--profile", "cpu", "--torch", "1.13", "--optimizer", "momentum",
                                                 "--json"], capture_output=True, text=True, check=True).stdout)
                self.assertEqual(rec["config"]["optimizer"], "recorded (SGD)")
                # torch's own SGD with momentum, recorded, against memsim's rule for it.
                self.assertEqual(rec["peak_live_bytes"], ref["peak_live_bytes"])
                self.assertEqual(rec["phase_peaks"], ref["phase_peaks"])


if __name__ == "__main__":
    unittest.main()
