"""Mixture-of-experts export (graphs/moe_models.py, torchtitan's MoE layer): the data-dependent
token counts become the symbols routed<L>_e<i> of a routed split, with the graph's "routing" key
(Note [Routed token counts])."""
import unittest

import torch
import torch.nn as nn

import export_util  # noqa: F401  (sets sys.path)
from export_util import check_well_formed
import moe_models
from memsim_export.eager import export_eager
from memsim_export.errors import ExportError, UnsupportedError


def ops(g, kind):
    return [o for o in g["ops"] if o["op"] == kind]


class MoeExport(unittest.TestCase):
    def test_one_layer(self):
        g = export_eager(lambda b: moe_models.MoEMLP(), ["x=batch,256"], symbols={"batch": 32})
        check_well_formed(self, g)
        self.assertEqual(g["routing"], [{"tokens": "batch*2", "experts": 4}])  # tokens × top-2
        self.assertEqual({k: v for k, v in g["symbols"].items() if k.startswith("routed")},
                         {"routed0_e%d" % i: 16 for i in range(4)})              # balanced at batch 32
        split = ops(g, "split")
        self.assertEqual(len(split), 1)
        self.assertEqual(split[0]["attrs"]["sections"], ["routed0_e%d" % i for i in range(4)])
        self.assertEqual(split[0]["attrs"]["routing"], 0)
        self.assertEqual(ops(g, "bincount")[0]["attrs"], {"minlength": 4})
        self.assertEqual(ops(g, "sort")[0]["attrs"], {"dim": -1, "descending": False, "stable": True})
        self.assertEqual(ops(g, "floor_divide")[0]["attrs"], {"scalar": 2})
        self.assertEqual(ops(g, "scatter")[0]["attrs"]["reduce"], "add")
        self.assertEqual(len(ops(g, "select")), 3 * 4)                            # w1/w2/w3 per expert

    def test_two_layers_and_uneven_balance(self):
        g = export_eager(lambda b: moe_models.MoEMLP(experts=3, layers=2), ["x=batch,256"], symbols={"batch": 5})
        self.assertEqual(g["routing"], [{"tokens": "batch*2", "experts": 3}] * 2)
        # 10 routed rows over 3 experts: 4, 3, 3
        self.assertEqual([g["symbols"]["routed1_e%d" % i] for i in range(3)], [4, 3, 3])
        self.assertEqual([o["attrs"]["routing"] for o in ops(g, "split")], [0, 1])

    def test_bincount_without_minlength_is_refused(self):
        class Bad(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(8, 4)

            def forward(self, x):
                counts = torch.bincount(self.lin(x).argmax(-1))
                return self.lin(x) * counts.sum()
        with self.assertRaises((ExportError, UnsupportedError)):
            export_eager(lambda b: Bad(), ["x=batch,8"], symbols={"batch": 4})


class GroupedExperts(nn.Module):
    """transformers' grouped experts in miniature (integrations/moe.py grouped_mm_experts_forward):
    sort by expert, histc counts, int32 offsets, one grouped GEMM for every expert."""

    def __init__(self):
        super().__init__()
        self.router = nn.Linear(16, 4)
        self.w = nn.Parameter(torch.randn(4, 32, 16))

    def forward(self, x):
        ids = self.router(x).topk(2, dim=-1).indices.reshape(-1)
        ids_g, perm = torch.sort(ids)
        rows = x[perm // 2]
        offs = torch.cumsum(torch.histc(ids_g.float(), bins=4, min=0, max=3), dim=0, dtype=torch.int32)
        y = torch.nn.functional.grouped_mm(rows, self.w.transpose(-2, -1), offs=offs)
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.size(0))  # the inverse permutation: x[idx] = v on no view
        return y[inv]


@unittest.skipUnless(hasattr(torch.nn.functional, "grouped_mm"), "torch without grouped_mm (2.10+)")
class GroupedMmExport(unittest.TestCase):
    def test_grouped_experts(self):
        # the meta kernel refuses float32 (the CPU kernel does not): the exporter makes the output
        g = export_eager(lambda b: GroupedExperts(), ["x=batch,16"], symbols={"batch": 8})
        check_well_formed(self, g)
        gm = ops(g, "grouped_mm")
        self.assertEqual(len(gm), 1)
        self.assertEqual(len(gm[0]["inputs"]), 3)
        self.assertEqual(ops(g, "histc")[0]["attrs"], {"bins": 4})
        self.assertEqual([o["attrs"]["write"] for o in ops(g, "view_write")], ["index_put"])
        self.assertEqual(ops(g, "recorded"), [])


if __name__ == "__main__":
    unittest.main()
