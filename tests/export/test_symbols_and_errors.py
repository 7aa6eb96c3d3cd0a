"""Symbolic dimensions, in-place operators, unsupported ops / untraceable code (exit code 2)."""
import json
import os
import tempfile
import textwrap
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F
from export_util import check_well_formed, ops_of, run_cli

from memsim_export import ExportError, UnsupportedError, export_model


class Heads(nn.Module):
    """Sizes that depend on batch and seq: view(seq, batch*heads, hd), reshape(batch*seq, -1)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 32)

    def forward(self, x):  # x [batch, seq, 32]
        b, s, d = x.shape
        h = self.proj(x).transpose(0, 1).contiguous().view(s, b * 4, d // 4)
        h = h.transpose(0, 1)
        y = h.reshape(b * s, -1)
        pos = torch.arange(x.size(1))
        return y[:, :8] + pos[:8].unsqueeze(0)


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        y += x
        y = F.relu(y, inplace=True)
        y.mul_(2.0)
        z = torch.relu_(y)
        return F.dropout(z, 0.2, training=self.training, inplace=True)


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 8)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.erfinv(self.fc(x))
        return torch.logcumsumexp(h, 1) + self.rnn(x)[0].sum()


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


class Symbols(unittest.TestCase):
    def test_batch_and_seq_products(self):
        g = export_model(Heads(), ["batch,seq,32"], symbols={"seq": 16}, name="heads", loss="none")
        check_well_formed(self, g)
        self.assertEqual(g["symbols"], {"batch": 32, "seq": 16})
        self.assertNotIn("loss", g)
        self.assertEqual(ops_of(g, "view")[0]["attrs"]["shape"], ["seq", "batch*4", 8])
        self.assertEqual(ops_of(g, "reshape")[0]["attrs"]["shape"], ["batch*seq", -1])
        self.assertEqual(ops_of(g, "arange")[0]["attrs"]["end"], "seq")
        self.assertEqual([o["attrs"] for o in ops_of(g, "slice")],
                         [{"dim": 0, "start": 0, "end": None, "step": 1}, {"dim": 1, "start": 0, "end": 8, "step": 1},
                          {"dim": 0, "start": 0, "end": 8, "step": 1}])

    def test_no_baked_batch(self):
        # exported with probes 2 and 3: no attribute may hold 2*k or 3*k where batch*k is meant
        g = export_model(Heads(), ["batch,seq,32"], symbols={"seq": 16, "batch": 7}, name="heads")
        text = json.dumps(g["ops"])
        self.assertIn("batch*4", text)
        self.assertEqual(g["symbols"]["batch"], 7)

    def test_missing_symbol_default(self):
        with self.assertRaises(ExportError):
            export_model(Heads(), ["batch,seq,32"], name="heads")

    def test_inplace_flags(self):
        g = export_model(InPlace(), ["batch,8"], name="inplace")
        check_well_formed(self, g)
        kinds = [(o["op"], o["attrs"].get("inplace")) for o in g["ops"][1:-1]]
        self.assertEqual(kinds, [("add", True), ("relu", True), ("mul", True), ("relu", True), ("dropout", True)])
        self.assertEqual(ops_of(g, "mul")[0]["attrs"]["scalar"], 2.0)

    def test_unsupported_lists_everything(self):
        with self.assertRaises(UnsupportedError) as cm:
            export_model(Unsupported(), ["batch,8"], name="bad")
        msg = str(cm.exception)
        self.assertIn("nn.LSTM with an unbatched (2-D) input", msg)  # expanded when batched (Note [Recurrent layers])
        self.assertIn("function torch.erfinv", msg)
        self.assertIn("function torch.logcumsumexp", msg)
        self.assertIn("module rnn", msg)
        self.assertEqual(len(cm.exception.kinds), 3)


class Cli(unittest.TestCase):
    def write(self, d, body):
        path = os.path.join(d, "user_model.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        return path

    def test_unsupported_exit_code(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.write(d, """
                import torch, torch.nn as nn
                class M(nn.Module):
                    def __init__(s):
                        super().__init__(); s.fc = nn.Linear(4, 4)
                    def forward(s, x):
                        return torch.msort(s.fc(x))
                def build():
                    return M()
            """)
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,4", "--no-recorded"])
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("function torch.msort", r.stderr)
            self.assertIn("node msort", r.stderr)
            self.assertEqual(r.stdout, "")
            # --trace auto runs the model instead and measures msort's ATen sort (Note [Recorded rules])
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,4"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn('"target": "aten.sort.default"', r.stdout)
            # --trace fx measures it in the fx graph
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,4", "--trace", "fx"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn('"target": "torch.msort"', r.stdout)

    def test_untraceable_exit_code(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.write(d, """
                import torch.nn as nn
                class M(nn.Module):
                    def forward(s, x):
                        if x.sum() > 0:
                            return x
                        return -x
                def build():
                    return M()
            """)
            # on meta tensors only: refused, naming the line that reads the value
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,4", "--device", "meta"])
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("cannot trace", r.stderr)
            self.assertIn("user_model.py", r.stderr)
            # --device auto runs it on CPU tensors (Note [Data-dependent sizes]): the branch the exported
            # input takes, and the op whose value decided it marked data_dependent
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,4"])
            self.assertEqual(r.returncode, 0, r.stderr)
            g = json.loads(r.stdout)
            marked = [op["op"] for op in g["ops"] if op.get("attrs", {}).get("data_dependent")]
            self.assertEqual(marked, ["gt"])  # `x.sum() > 0` read by `if`

    def test_graph_fx_traces_but_cannot_run_is_recorded_as_it_runs(self):
        with tempfile.TemporaryDirectory() as d:
            # torchvision's swin3d: a torch.fx.wrap'd helper that writes into the list it is given;
            # fx records it as one call whose list argument is immutable, so the traced graph cannot
            # run (shape propagation) while the model itself does
            path = self.write(d, """
                import torch, torch.fx, torch.nn as nn
                def window(sizes):
                    sizes[0] = min(sizes[0], 3)
                    return sizes[0]
                torch.fx.wrap("window")
                class M(nn.Module):
                    def __init__(s):
                        super().__init__()
                        s.lin = nn.Linear(4, 4)
                    def forward(s, x):
                        n = window([x.shape[1]])
                        return s.lin(x[:, :n])
                def build():
                    return M()
            """)
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,5,4", "--trace", "fx"])
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("shape propagation failed", r.stderr)
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,5,4"])
            self.assertEqual(r.returncode, 0, r.stderr)
            g = json.loads(r.stdout)
            self.assertIn("linear", [op["op"] for op in g["ops"]])

    def test_value_reads_are_not_ops_and_float_ranges_hold(self):
        with tempfile.TemporaryDirectory() as d:
            # GaussianNLLLoss reads `torch.any(var < 0)` (run on CPU tensors: the variance must be
            # positive, hence @1:2); the read makes no op of its own
            path = self.write(d, """
                import torch, torch.nn as nn
                class P(nn.Module):
                    def __init__(s):
                        super().__init__()
                        s.w = nn.Parameter(torch.ones(1))
                        s.f = nn.GaussianNLLLoss()
                    def forward(s, x, y, var):
                        return s.f(x * s.w, y, var)
                def build():
                    return P()
            """)
            r = run_cli(["tools/export_torch.py", "--module", path + ":build", "--input", "batch,16", "--input",
                         "batch,16", "--input", "var=batch,16@1:2", "--loss", "output"])
            self.assertEqual(r.returncode, 0, r.stderr)
            g = json.loads(r.stdout)
            self.assertTrue(all(op["outputs"] for op in g["ops"]), [op for op in g["ops"] if not op["outputs"]])
            self.assertNotIn("_local_scalar_dense", r.stdout)

    def test_module_with_specs_and_python_m(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.write(d, """
                import torch.nn as nn
                def build():
                    return nn.Sequential(nn.Embedding(100, 8), nn.Flatten(), nn.Linear(8 * 5, 3)), ["tok=int64:batch,5@0:100"]
            """)
            out = os.path.join(d, "g.json")
            r = run_cli(["-m", "memsim_export", "--module", path + ":build", "--name", "emb", "-o", out])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                g = json.load(f)
            self.assertEqual(g["name"], "emb")
            self.assertEqual(g["inputs"][0], {"name": "tok", "shape": ["batch", 5], "dtype": "int64"})
            self.assertEqual([o["op"] for o in g["ops"]], ["embedding", "flatten", "linear", "cross_entropy"])

    def test_bad_input_spec(self):
        r = run_cli(["tools/export_torch.py", "torchvision:resnet18", "--input", "batch,3,2x4"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("bad dimension", r.stderr)

    def test_mse_loss_and_stdout(self):
        r = run_cli(["tools/export_torch.py", "torchvision:squeezenet1_1", "--input", "batch,3,64,64",
                     "--loss", "mse"])
        self.assertEqual(r.returncode, 0, r.stderr)
        g = json.loads(r.stdout)
        self.assertEqual(g["ops"][-1]["op"], "mse_loss")
        self.assertEqual(g["inputs"][-1], {"name": "target", "shape": ["batch", 1000], "dtype": "float32"})


if __name__ == "__main__":
    unittest.main()


class KeepAlive(unittest.TestCase):
    """Python references (module arguments, forward locals at return) become attrs.keep_alive."""

    def test_block_argument_and_locals(self):
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(8, 8)
                self.b = nn.Linear(8, 8)

            def forward(self, x):
                h = self.a(x)          # a local that is dead after the next line in fx terms
                y = torch.relu(h)
                x = x + y              # rebinding: the argument stays on the caller's stack
                return self.b(x)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.pre = nn.Linear(8, 8)
                self.blk = Block()

            def forward(self, x):
                return self.blk(self.pre(x))

        g = export_model(Net(), ["batch,8"], name="k")
        check_well_formed(self, g)
        last = [o for o in g["ops"] if o.get("module") == "blk.b"][0]
        self.assertEqual(sorted(last["attrs"]["keep_alive"]), sorted(["pre", "blk_a", "relu"]))  # "add" is an input of the op itself
        defined = {t["name"] for t in g["inputs"]} | {o for op in g["ops"] for o in op["outputs"]}
        for op in g["ops"]:
            for n in op.get("attrs", {}).get("keep_alive", []):
                self.assertIn(n, defined)

    def test_transformer_encoder_src(self):
        import models
        m, specs = models.bert_small()
        g = export_model(m, specs, name="b")
        keeps = [(o["op"], o["attrs"]["keep_alive"]) for o in g["ops"] if "keep_alive" in o.get("attrs", {})]
        enc_in = [o for o in g["ops"] if o.get("module") == "text.drop"][0]["outputs"][0]
        # the encoder input is kept by TransformerEncoder.forward until its last op (layer 3's norm2)
        last_norm = [o for o in g["ops"] if o.get("module") == "text.enc.layers.3.norm2"][0]
        self.assertIn(enc_in, last_norm["attrs"]["keep_alive"])
        # multi_head_attention_forward keeps the per-head q (and so its contiguous copy) until it returns
        self.assertTrue(any("text_enc:l0.sa.q_h" in k for _, k in keeps))


class NearProduct(unittest.TestCase):
    def test_a_recorded_buffer_a_few_bytes_off_a_product_is_the_product(self):
        # EmbeddingBag's offset2bag: int64 [batch*5 + 1] = 88, 128 bytes at batch 2, 3
        from memsim_export.symbols import merge
        probes = [{"batch": 2}, {"batch": 3}]
        self.assertEqual(merge([88, 128], probes, ["batch"], "/ops/2/attrs/fwd_bytes/1"), "batch*40")
        with self.assertRaises(Exception):  # elsewhere (a shape) it stays an error
            merge([88, 128], probes, ["batch"], "/ops/2/attrs/scalar")
        with self.assertRaises(Exception):  # too far from a product
            merge([1080, 1120], probes, ["batch"], "/ops/2/attrs/fwd_bytes/1")


class LazyModules(unittest.TestCase):
    def test_a_lazy_modules_shapes_come_from_a_first_forward(self):
        # nn.LazyLinear(8) on [batch, 16]: its weight is [8, 16] once a forward ran (LazyModuleMixin)
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "m.py")
            with open(src, "w") as f:
                f.write("import torch.nn as nn\ndef build():\n"
                        "    return nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.Linear(8, 2))\n")
            out = os.path.join(d, "g.json")
            r = run_cli(["tools/export_torch.py", src + ":build", "--input", "batch,16", "-o", out])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                g = json.load(f)
            check_well_formed(self, g)
            self.assertEqual(g["parameters"][0]["shape"], [8, 16])
