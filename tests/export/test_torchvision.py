"""torchvision models: in-place flags, structure, symbolic batch, parameter order."""
import unittest

import torchvision
from export_util import check_well_formed, ops_of

from memsim_export import export_model


def tv(name, size=224):
    m = getattr(torchvision.models, name)(weights=None)
    return m, export_model(m, ["x=batch,3,%d,%d" % (size, size)], name=name)


class Torchvision(unittest.TestCase):
    def check_params(self, m, g):
        self.assertEqual([p["name"] for p in g["parameters"]], [n for n, _ in m.named_parameters()])
        self.assertEqual([b["name"] for b in g["buffers"]], [n for n, _ in m.named_buffers()])

    def test_resnet18_inplace(self):
        m, g = tv("resnet18")
        check_well_formed(self, g)
        self.check_params(m, g)
        self.assertEqual(sum(p.numel() for p in m.parameters()), 11689512)
        adds = ops_of(g, "add")
        self.assertEqual(len(adds), 8)  # out += identity in every BasicBlock
        self.assertTrue(all(a["attrs"]["inplace"] for a in adds))
        self.assertEqual(adds[0]["module"], "layer1.0")
        relus = ops_of(g, "relu")
        self.assertEqual(len(relus), 17)
        self.assertTrue(all(r["attrs"]["inplace"] for r in relus))
        bns = ops_of(g, "batch_norm")
        self.assertEqual(len(bns), 20)
        self.assertEqual(bns[0]["inputs"][1:], ["bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"])
        tail = [o["op"] for o in g["ops"][-4:]]
        self.assertEqual(tail, ["adaptive_avg_pool2d", "flatten", "linear", "cross_entropy"])
        self.assertEqual(g["buffers"][2], {"name": "bn1.num_batches_tracked", "shape": [], "dtype": "int64"})

    def test_alexnet_structure(self):
        m, g = tv("alexnet")
        check_well_formed(self, g)
        self.check_params(m, g)
        self.assertEqual(sum(p.numel() for p in m.parameters()), 61100840)
        ops = [o["op"] for o in g["ops"]]
        self.assertEqual(ops[-10:], ["adaptive_avg_pool2d", "flatten", "dropout", "linear", "relu", "dropout",
                                     "linear", "relu", "linear", "cross_entropy"])
        self.assertEqual(ops_of(g, "adaptive_avg_pool2d")[0]["attrs"], {"output_size": [6, 6]})

    def test_mobilenet_v2(self):
        m, g = tv("mobilenet_v2")
        check_well_formed(self, g)
        self.check_params(m, g)
        r6 = ops_of(g, "relu6")
        self.assertEqual(len(r6), 35)
        self.assertTrue(all(r["attrs"]["inplace"] for r in r6))
        self.assertTrue(any(c["attrs"]["groups"] > 1 for c in ops_of(g, "conv2d")))
        self.assertTrue(all(not a["attrs"]["inplace"] for a in ops_of(g, "add")))  # x + self.conv(x)

    def test_vit_b_16(self):
        m, g = tv("vit_b_16")
        check_well_formed(self, g)
        self.check_params(m, g)
        self.assertEqual(len(ops_of(g, "bmm")), 24)
        self.assertEqual(len(ops_of(g, "chunk")), 12)
        self.assertIn(["batch", -1, -1], [o["attrs"]["sizes"] for o in ops_of(g, "expand")])
        self.assertIn([197, "batch*12", 64], [o["attrs"]["shape"] for o in ops_of(g, "view")])
        self.assertEqual(ops_of(g, "select")[-1]["attrs"], {"dim": 1, "index": 0})

    def test_googlenet_aux_outputs(self):
        m = torchvision.models.googlenet(weights=None, init_weights=False)
        g = export_model(m, ["batch,3,224,224"], name="googlenet")
        check_well_formed(self, g)
        self.assertEqual(len(g["outputs"]), 3)  # logits, aux2, aux1 are all returned in training
        self.assertEqual(g["ops"][-1]["inputs"][0], g["outputs"][0])


if __name__ == "__main__":
    unittest.main()
