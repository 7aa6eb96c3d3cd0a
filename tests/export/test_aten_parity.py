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
            (["split"], ["split"]), (["embedding"], ["embedding"]), (["slice"], ["slice"]),
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
