"""The exported op sequence matches what PyTorch really executes (TorchDispatchMode, CPU, training).

memsim ops are coarser than ATen ops (linear → t/addmm or t/clone/mm/add, dropout → bernoulli_/div_/mul),
so the check compares the op kinds that map one to one."""
import collections
import unittest

import torch
import torch.nn as nn
import torchvision
from torch.utils._python_dispatch import TorchDispatchMode

import export_util  # noqa: F401  (sets sys.path)
import models
from memsim_export import export_model


class Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def aten_counts(model, inputs):
    model.train()
    rec = Recorder()
    with rec:
        model(*inputs)
    return collections.Counter(rec.ops)


def graph_counts(g):
    return collections.Counter(o["op"] for o in g["ops"] if o.get("module") != "loss")


class AtenParity(unittest.TestCase):
    def compare(self, model, inputs, specs, pairs):
        g = export_model(model, specs, name="m")
        a = aten_counts(model, inputs)
        m = graph_counts(g)
        for aten_names, memsim_names in pairs:
            with self.subTest(aten=aten_names):
                self.assertEqual(sum(a[n] for n in aten_names), sum(m[n] for n in memsim_names),
                                 "aten %s vs memsim %s" % (aten_names, memsim_names))
        return g, a, m

    def test_transformer_encoder(self):
        torch.manual_seed(0)
        m = models.BertCls(layers=2, d=32, heads=4, ff=64, seq=16)
        ids = torch.randint(0, 100, (3, 16))
        g, a, mm = self.compare(m, [ids], ["ids=int64:batch,16@0:100"], [
            (["bmm"], ["bmm"]), (["_softmax"], ["softmax"]), (["transpose"], ["transpose"]),
            (["native_layer_norm"], ["layer_norm"]), (["bernoulli_"], ["dropout"]), (["gelu"], ["gelu"]),
            (["split"], ["chunk"]), (["embedding"], ["embedding"]), (["arange"], ["arange"]),
            (["select"], ["select"]), (["div"], ["div"]),
        ])
        # contiguous copies: per layer q, k, v and the attention output, plus the copy linear makes of
        # its transposed 3-D input (the in-projection) — aten.clone counts both
        self.assertEqual(a["clone"], mm["contiguous"] + 2)

    def test_gpt2(self):
        torch.manual_seed(0)
        m, specs = models.gpt2_tiny()
        ids = torch.randint(0, 1000, (2, 64))
        self.compare(m, [ids], specs, [
            (["_softmax"], ["softmax"]), (["masked_fill"], ["masked_fill"]), (["transpose"], ["transpose"]),
            (["native_layer_norm"], ["layer_norm"]), (["bernoulli_"], ["dropout"]), (["gelu"], ["gelu"]),
            (["split"], ["split"]), (["embedding"], ["embedding"]),
        ])

    def test_resnet18_inplace(self):
        m = torchvision.models.resnet18(weights=None)
        x = torch.randn(2, 3, 64, 64)
        g, a, mm = self.compare(m, [x], ["batch,3,64,64"], [
            (["convolution"], ["conv2d"]), (["relu_"], ["relu"]),
            # add_: out += identity, plus BatchNorm's num_batches_tracked.add_(1) (an int64 scalar)
            (["add_"], ["add", "batch_norm"]),
            (["max_pool2d_with_indices"], ["max_pool2d"]),
        ])
        self.assertEqual(a["relu"], 0)
        self.assertEqual(a["add"], 0)

    def test_meta_equals_cpu(self):
        for builder in (models.bert_small, models.gpt2_tiny):
            with self.subTest(model=builder.__name__):
                m, specs = builder()
                self.assertEqual(export_model(m, specs, device="meta"), export_model(m, specs, device="cpu"))


if __name__ == "__main__":
    unittest.main()


# memsim op → the ATen op(s) that mark it in a dispatch trace (ops without a one-to-one marker,
# such as add or view, are left out of the order check)
ANCHORS = {
    "conv2d": {"convolution"}, "relu": {"relu", "relu_"}, "relu6": {"hardtanh", "hardtanh_"},
    "max_pool2d": {"max_pool2d_with_indices"}, "adaptive_avg_pool2d": {"_adaptive_avg_pool2d", "mean"},
    "linear": {"addmm", "mm"}, "matmul": {"bmm"}, "bmm": {"bmm"}, "baddbmm": {"baddbmm"},
    "dropout": {"bernoulli_"}, "batch_norm": {"native_batch_norm"}, "layer_norm": {"native_layer_norm"},
    "softmax": {"_softmax"}, "embedding": {"embedding"}, "cat": {"cat"}, "gelu": {"gelu"},
    "masked_fill": {"masked_fill"}, "select": {"select"}, "split": {"split"},
    "chunk": {"split"}, "arange": {"arange"}, "transpose": {"transpose"}, "permute": {"permute"},
}
# Not checked: expand (aten.matmul expands its operands itself) and slice: ATen returns the tensor
# itself for an explicit 0:len slice (mask[:, :, :T, :T] with T == len), which the exporter
# writes as a slice view anyway (whether T == len can depend on the symbol values).


class AtenOrder(unittest.TestCase):
    """The marker ATen ops appear in the same order as the exported ops."""

    def check(self, model, inputs, specs):
        g = export_model(model, specs, name="m")
        model.train()
        rec = Recorder()
        with rec:
            model(*inputs)
        marks = set().union(*ANCHORS.values())
        aten = [o for o in rec.ops if o in marks]
        exp = [ANCHORS[o["op"]] for o in g["ops"] if o["op"] in ANCHORS and o.get("module") != "loss"]
        self.assertEqual(len(aten), len(exp), "ATen %s\nmemsim %s" % (aten, [sorted(e) for e in exp]))
        for i, (a, e) in enumerate(zip(aten, exp)):
            self.assertIn(a, e, "position %d: ATen %s, exported %s" % (i, a, sorted(e)))

    def test_mnist_cnn(self):
        m, specs = models.mnist_cnn()
        self.check(m, [torch.randn(2, 1, 28, 28)], specs)

    def test_alexnet(self):
        self.check(torchvision.models.alexnet(weights=None), [torch.randn(2, 3, 224, 224)], ["batch,3,224,224"])

    def test_resnet18(self):
        self.check(torchvision.models.resnet18(weights=None), [torch.randn(2, 3, 64, 64)], ["batch,3,64,64"])

    def test_mobilenet_v2(self):
        self.check(torchvision.models.mobilenet_v2(weights=None), [torch.randn(2, 3, 64, 64)], ["batch,3,64,64"])

    def test_bert(self):
        m = models.BertCls(layers=2, d=32, heads=4, ff=64, seq=16)
        self.check(m, [torch.randint(0, 100, (2, 16))], ["ids=int64:batch,16@0:100"])

    def test_gpt2(self):
        m, specs = models.gpt2_tiny()
        self.check(m, [torch.randint(0, 1000, (2, 64))], specs)

    def test_python_indexing(self):
        class M(torch.nn.Module):
            def forward(self, x):  # x[:, 0] is slice(dim 0) + select(dim 1) in ATen
                return x[:, 0][1:] + x[1:, 2, None][:, 0, :]

        rec = Recorder()
        x = torch.randn(3, 4, 5)
        with rec:
            M()(x)
        g = export_model(M(), ["3,4,5"], name="m", loss="none")
        aten = [o for o in rec.ops if o in ("slice", "select", "unsqueeze", "squeeze")]
        self.assertEqual(aten, [o["op"] for o in g["ops"] if o["op"] in ("slice", "select", "unsqueeze", "squeeze")])

    def test_encoder_variants(self):
        # pre-LN, ReLU, sequence-first, a final norm, MHA called directly with need_weights=True
        class Enc(torch.nn.Module):
            def __init__(self):
                super().__init__()
                layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, activation="relu",
                                                         norm_first=True)
                self.enc = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(16),
                                                       enable_nested_tensor=False)
                self.mha = torch.nn.MultiheadAttention(16, 4, dropout=0.1, batch_first=True)

            def forward(self, x):  # x [seq, batch, 16]
                y = self.enc(x).transpose(0, 1)
                out, w = self.mha(y, y, y)
                return out[:, 0] + w[:, 0, :1]

        self.check(Enc(), [torch.randn(6, 2, 16)], ["6,batch,16"])

    def test_vit(self):
        m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                 hidden_dim=16, mlp_dim=32, dropout=0.1, attention_dropout=0.1)
        self.check(m, [torch.randn(2, 3, 32, 32)], ["batch,3,32,32"])
