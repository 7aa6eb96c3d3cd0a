"""Language models export by execution with no edit of their code (graphs/llm_models.py is a verbatim
copy of the oracle's model file: the CS336 course transformer and nanoGPT) and no edit of the JSON:
cheap configurations of the three oracle models, the zoo's Llama-style decoder, the course loss
returned by the model, and what the recorder maps (einsum to its ATen ops, Python lifetimes)."""
import os
import subprocess
import tempfile
import unittest

import torch
import torch.nn as nn

import export_util  # noqa: F401  (sets sys.path)
from export_util import PY, ROOT, check_well_formed
import llm_models
import llm_zoo
from memsim_export.eager import export_eager

IDS = "ids=int64:batch,seq@0:1000"


def export(builder, inputs=(IDS,), seq=16, **kw):
    return export_eager(lambda b: builder(b["seq"]), list(inputs), symbols={"batch": 2, "seq": seq},
                        builder_symbols=["seq"], **kw)


def ops(g, kind):
    return [o for o in g["ops"] if o["op"] == kind]


class OracleModels(unittest.TestCase):
    def test_cs336_tiny(self):
        g = export(lambda s: llm_models.BasicsTransformerLM(1000, s, 64, 2, 4, 128))
        check_well_formed(self, g)
        self.assertEqual(g["symbols"], {"batch": 2, "seq": 16})
        self.assertEqual(g["buffers"][0]["shape"], [2, "seq", 8])      # the RoPE cache follows seq
        self.assertEqual(len(ops(g, "index")), 1)                       # weight[ids, :]
        self.assertEqual(len(ops(g, "where")), 2)                       # causal mask per layer
        self.assertEqual(len(ops(g, "ge")), 2)
        self.assertEqual(len(ops(g, "bmm")), 2 * 9 + 1)                 # einsum: 7 linears + 2 attention
        self.assertEqual(len(ops(g, "max")), 2)
        self.assertEqual(ops(g, "arange")[0]["attrs"]["end"], "seq")
        self.assertEqual(g["loss"], "loss")

    def test_nanogpt_tiny(self):
        g = export_eager(lambda b: llm_models.GPT(vocab_size=1000, block_size=32, n_layer=2, n_head=4, n_embd=64),
                         [IDS], symbols={"batch": 2, "seq": 16})
        check_well_formed(self, g)
        self.assertEqual(len(ops(g, "masked_fill")), 2)
        self.assertEqual(len(ops(g, "eq")), 2)
        ends = [o["attrs"]["end"] for o in ops(g, "slice") if o["attrs"]["dim"] in (2, 3)]
        self.assertEqual(ends[:2], ["seq", "seq"])                       # bias[:, :, :T, :T]
        names = [p["name"] for p in g["parameters"]]
        self.assertNotIn("lm_head.weight", names)                       # tied: one parameter

    def test_course_loss_returned_by_the_model(self):
        g = export(lambda s: llm_zoo.WithCS336Loss(llm_models.BasicsTransformerLM(1000, s, 64, 1, 4, 128),
                                                   keep_logits=True),
                   inputs=(IDS, "targets=int64:batch,seq@0:1000"), loss="output")
        check_well_formed(self, g)
        last = g["ops"][-1]
        self.assertEqual(last["op"], "mean")
        self.assertEqual(g["loss"], last["outputs"][0])
        self.assertEqual(len(g["outputs"]), 1)                          # the logits stay held
        self.assertEqual(len(ops(g, "gather")), 1)
        self.assertEqual(len(ops(g, "log")), 1)
        self.assertFalse(any(o["op"] == "cross_entropy" for o in g["ops"]))

    def test_llama_tiny(self):
        g = export(llm_zoo.llama_tiny)
        check_well_formed(self, g)
        self.assertEqual(len(ops(g, "rsqrt")), 5)
        self.assertEqual([b["shape"] for b in g["buffers"]], [["seq", 16], ["seq", 16], ["seq", "seq"]])


class Recorder(unittest.TestCase):
    def test_python_lifetimes_become_keep_alive(self):
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.a = nn.Linear(8, 8)
                s.b = nn.Linear(8, 8)

            def forward(s, x):
                h = s.a(x)
                y = torch.exp(h)           # h's last use as an input ...
                return s.b(y) * 2          # ... but the local keeps it alive until return
        g = export_eager(lambda b: M(), ["batch,8"], loss="none")
        last = g["ops"][-1]
        self.assertIn("linear", last["attrs"]["keep_alive"])

    def test_op_with_no_rule_is_recorded(self):
        class M(nn.Module):
            def forward(s, x):
                return torch.msort(x)      # no handler: its ATen sort (no ATen handler) is measured
        g = export_eager(lambda b: M(), ["batch,8"])  # measured into a recorded rule (Note [Recorded rules])
        rec = [o for o in g["ops"] if o["op"] == "recorded"]
        self.assertEqual([o["attrs"]["target"] for o in rec], ["aten.sort.default"])
        self.assertEqual(rec[0]["attrs"]["out0_shape"], ["batch", 8])
        self.assertEqual(rec[0]["attrs"]["out1_dtype"], "int64")

    def test_meta_construction_allocates_no_weights(self):
        built = []

        def build(seq):
            m = llm_zoo.llama_tiny(seq)
            built.append(m)
            return m
        export(build)
        self.assertTrue(all(p.is_meta for p in built[0].parameters()))


class Cli(unittest.TestCase):
    def test_zoo_llm_via_cli(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "l.json")
            r = subprocess.run([PY, "tools/export_torch.py", "graphs/llm_zoo.py:llama_tiny", "--trace", "run",
                                "--input", IDS, "--set", "seq=32", "--set", "batch=2", "-o", out],
                               cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                self.assertIn('"seq"', f.read())

    def test_auto_falls_back_to_running_the_model(self):
        # nanoGPT's `assert t <= self.block_size` stops torch.fx; --trace auto records it as it runs
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "g.json")
            r = subprocess.run([PY, "tools/export_torch.py", "graphs/llm_zoo.py:gpt2_small",
                                "--input", "ids=int64:batch,seq@0:50304", "--set", "seq=64", "-o", out],
                               cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
