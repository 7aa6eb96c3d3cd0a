"""The seed models of graphs/models.py: same networks as trace_step.py, exact parameters/buffers."""
import unittest

from export_util import check_well_formed, ops_of, trace_step_models

import models
from memsim_export import export_model


def export(builder, **kw):
    m, specs = builder()
    return m, export_model(m, specs, name=builder.__name__, **kw)


class SeedModels(unittest.TestCase):
    def check_params(self, model, g):
        exp = [(n, list(p.shape), p.requires_grad) for n, p in model.named_parameters()]
        got = [(p["name"], p["shape"], p.get("requires_grad", True)) for p in g["parameters"]]
        self.assertEqual(got, exp)
        self.assertEqual(len(g["parameters"]), len(list(model.parameters())))
        expb = [(n, list(b.shape), str(b.dtype).replace("torch.", "")) for n, b in model.named_buffers()]
        gotb = [(b["name"], b["shape"], b["dtype"]) for b in g["buffers"]]
        self.assertEqual(gotb, expb)

    def test_mlp(self):
        m, g = export(models.mlp)
        check_well_formed(self, g)
        self.check_params(m, g)
        self.assertEqual(sum(p.numel() for p in m.parameters()), 131410)
        self.assertEqual([o["op"] for o in g["ops"]], ["linear", "relu"] * 4 + ["linear", "cross_entropy"])
        self.assertEqual(g["inputs"][0]["shape"], ["batch", 1000])
        self.assertEqual(g["inputs"][1], {"name": "target", "shape": ["batch"], "dtype": "int64"})
        self.assertEqual(g["symbols"], {"batch": 32})

    def test_mnist_cnn(self):
        m, g = export(models.mnist_cnn)
        check_well_formed(self, g)
        self.check_params(m, g)
        self.assertEqual([o["op"] for o in g["ops"]],
                         ["conv2d", "relu", "max_pool2d", "conv2d", "relu", "max_pool2d", "flatten", "linear", "relu",
                          "dropout", "linear", "cross_entropy"])
        self.assertEqual(ops_of(g, "dropout")[0]["attrs"], {"p": 0.5, "inplace": False, "training": True})
        self.assertEqual(ops_of(g, "flatten")[0]["attrs"], {"start_dim": 1, "end_dim": -1})

    def test_bert_small(self):
        m, g = export(models.bert_small)
        check_well_formed(self, g)
        self.check_params(m, g)
        self.assertEqual(g["inputs"][0], {"name": "ids", "shape": ["batch", 128], "dtype": "int64"})
        self.assertEqual(g["ops"][0]["op"], "arange")
        self.assertEqual(g["ops"][0]["attrs"], {"end": 128, "dtype": "int64"})
        # 4 layers × (in-proj, out-proj, linear1, linear2) + head
        self.assertEqual(len(ops_of(g, "linear")), 4 * 4 + 1)
        self.assertEqual(len(ops_of(g, "bmm")), 8)
        self.assertEqual(len(ops_of(g, "softmax")), 4)
        self.assertEqual(len(ops_of(g, "layer_norm")), 1 + 4 * 2)
        # embedding dropout + per layer: attention, dropout1, dropout, dropout2
        self.assertEqual(len(ops_of(g, "dropout")), 1 + 4 * 4)
        self.assertTrue(all(o["attrs"]["p"] == 0.1 and o["attrs"]["training"] for o in ops_of(g, "dropout")))
        views = [o["attrs"]["shape"] for o in ops_of(g, "view")]
        self.assertIn([128, "batch*4", 64], views)
        self.assertIn(["batch*128", 256], views)
        self.assertIn([128, "batch", 256], views)
        sel = ops_of(g, "select")
        self.assertEqual(sel[-1]["attrs"], {"dim": 1, "index": 0})
        self.assertTrue(ops_of(g, "linear")[0]["module"].endswith("layers.0.self_attn"))
        self.assertEqual(ops_of(g, "linear")[1]["module"], "text.enc.layers.0.self_attn.out_proj")

    def test_multimodal_bert(self):
        m, g = export(models.multimodal_bert, symbols={"seq": 128})
        check_well_formed(self, g)
        self.check_params(m, g)
        self.assertEqual([i["name"] for i in g["inputs"]], ["ids", "x_tab", "target"])
        self.assertEqual(g["inputs"][1]["shape"], ["batch", 100])
        self.assertIn("tab.bn.num_batches_tracked", [b["name"] for b in g["buffers"]])
        bn = ops_of(g, "batch_norm")[0]
        self.assertEqual(bn["module"], "tab.bn")
        self.assertEqual(bn["attrs"], {"momentum": 0.1, "eps": 1e-05, "training": True})
        self.assertEqual(ops_of(g, "cat")[0]["attrs"], {"dim": 1})
        # TabAE's torch.relu is attributed to the enclosing module
        self.assertEqual(ops_of(g, "relu")[0]["module"], "tab")

    def test_gpt2_tiny(self):
        m, g = export(models.gpt2_tiny)
        check_well_formed(self, g)
        self.check_params(m, g)
        # tied LM head: one parameter, used by the embedding and the last linear
        self.assertNotIn("lm_head.weight", [p["name"] for p in g["parameters"]])
        head = [o for o in ops_of(g, "linear") if o.get("module") == "lm_head"][0]
        self.assertEqual(head["inputs"][1], "wte.weight")
        self.assertEqual(len(ops_of(g, "masked_fill")), 2)
        self.assertEqual(ops_of(g, "masked_fill")[0]["attrs"], {"value": "-inf", "inplace": False})
        self.assertEqual(ops_of(g, "gelu")[0]["attrs"]["approximate"], "tanh")
        # token-level loss: logits viewed to [-1, V], target [batch, seq] viewed to [-1]
        self.assertEqual(g["inputs"][-1], {"name": "target", "shape": ["batch", 64], "dtype": "int64"})
        self.assertEqual(g["ops"][-1]["op"], "cross_entropy")
        self.assertEqual(g["ops"][-3]["attrs"], {"shape": [-1, 1000]})

    def test_gpt2_small_param_count(self):
        m, _ = models.gpt2_small()
        self.assertEqual(sum(p.numel() for p in m.parameters()), 124439808)


class SameAsTraceStep(unittest.TestCase):
    """graphs/models.py builds exactly the networks trace_step.py records (names, shapes, order)."""

    def test_same_parameters(self):
        ts = trace_step_models()
        for name in ("mlp", "mnist_cnn", "bert_small", "bert_base", "multimodal_bert"):
            with self.subTest(model=name):
                ref = ts[name]()[0]
                mine = getattr(models, name)()[0]
                self.assertEqual([(n, tuple(p.shape)) for n, p in ref.named_parameters()],
                                 [(n, tuple(p.shape)) for n, p in mine.named_parameters()])
                self.assertEqual([(n, tuple(b.shape)) for n, b in ref.named_buffers()],
                                 [(n, tuple(b.shape)) for n, b in mine.named_buffers()])
                self.assertEqual(repr(ref), repr(mine))


if __name__ == "__main__":
    unittest.main()
