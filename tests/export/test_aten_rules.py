"""ATen ops of composite functions on explicit rules (Note [ATen ops on explicit rules] in
docs/exporter.md): the losses and distances PyTorch writes as C++ or Python composites export with no
recorded op, under whichever torch runs the test (1.13 by ctest's export.aten_rules, 2.x by
export.aten_rules_2x)."""
import unittest

import export_util  # noqa: F401  (sets sys.path)

import torch
import torch.nn as nn
import torch.nn.functional as F

from memsim_export.eager import export_eager


class Composite(nn.Module):
    """A linear layer, then fn(p, q, r) of three projections; the result summed into the logits."""

    def __init__(self, fn):
        super().__init__()
        self.a, self.p, self.q, self.r, self.c = (nn.Linear(16, 16) for _ in range(5))
        self.fn = fn

    def forward(self, x):
        h = torch.relu(self.a(x))
        return self.c(h) + self.fn(self.p(h), self.q(h), self.r(h))


CASES = {
    "cosine_embedding_loss": lambda p, q, r: F.cosine_embedding_loss(p, q, p.new_ones(p.shape[0])),
    "hinge_embedding_loss": lambda p, q, r: F.hinge_embedding_loss(p, torch.ones_like(p)),
    "margin_ranking_loss": lambda p, q, r: F.margin_ranking_loss(p.sum(1), q.sum(1), p.new_ones(p.shape[0])),
    "triplet_margin_loss": lambda p, q, r: F.triplet_margin_loss(p, q, r),
    "triplet_margin_with_distance_loss": lambda p, q, r: F.triplet_margin_with_distance_loss(p, q, r),
    "kl_div": lambda p, q, r: F.kl_div(F.log_softmax(p, -1), F.softmax(q, -1), reduction="batchmean"),
    "poisson_nll_loss": lambda p, q, r: F.poisson_nll_loss(p, torch.sigmoid(q)),
    "multilabel_soft_margin_loss": lambda p, q, r: F.multilabel_soft_margin_loss(p, torch.sigmoid(q)),
    "cosine_similarity": lambda p, q, r: F.cosine_similarity(p, q).sum(),
    "pairwise_distance": lambda p, q, r: F.pairwise_distance(p, q).sum(),
    "local_response_norm": lambda p, q, r: F.local_response_norm(p.view(p.shape[0], 4, 4), 2).sum(),
    "softmin": lambda p, q, r: F.softmin(p, -1).sum(),
    # detection's box coders and level mappers: log2, rounding, masks or-ed together
    "rounding": lambda p, q, r: (torch.log2(p.abs() + 1) + torch.round(q) + torch.floor(r) + torch.ceil(p)
                                 + torch.trunc(q) + ((p > 0) | (q < 0)).float()).sum(),
}


def export(fn, device="meta"):
    return export_eager(lambda binding: Composite(fn), ["batch,16"], name="m", device=device,
                        symbols={"batch": 4} if device == "cpu" else None)


def ops_of(g, kind):
    return [o for o in g["ops"] if o["op"] == kind]


class ComposedLossesTest(unittest.TestCase):
    def test_every_composite_exports_with_no_recorded_op(self):
        for name, fn in CASES.items():
            with self.subTest(name=name):
                g = export(fn)
                self.assertEqual([o["attrs"]["target"] for o in ops_of(g, "recorded")], [])

    def test_gaussian_nll_loss_on_cpu_tensors(self):
        # torch.any(var < 0) is read by Python: exported on CPU tensors (Note [Data-dependent sizes])
        g = export(lambda p, q, r: F.gaussian_nll_loss(p, q, r.exp()), device="cpu")
        self.assertEqual(ops_of(g, "recorded"), [])
        self.assertEqual(len(ops_of(g, "any")), 1)
        # var.clamp_(min=eps) under the function's torch.no_grad(): no node, the clone before it stays
        self.assertEqual([o for o in ops_of(g, "clamp") if o.get("module") != "loss"], [])
        self.assertEqual(len(ops_of(g, "contiguous")), 1)

    def test_cosine_similarity_clamps_its_norms_under_no_grad(self):
        g = export(CASES["cosine_similarity"])
        self.assertEqual(ops_of(g, "clamp"), [])  # ATen's NoGradGuard: an in-place write with no node
        if torch.__version__.startswith("2."):  # 1.13: pow, sum, sqrt_ (Distance.cpp of that release)
            self.assertEqual(len(ops_of(g, "vector_norm")), 2)

    def test_scalar_overloads_are_marked(self):
        g = export(CASES["pairwise_distance"])  # x1 - x2 + eps: add.Scalar from C++
        adds = [o for o in ops_of(g, "add") if "scalar" in o.get("attrs", {})]
        self.assertEqual(len(adds), 1)
        self.assertTrue(adds[0]["attrs"]["scalar_overload"])
        self.assertEqual(len(ops_of(g, "vector_norm")), 1)  # norm.ScalarOpt_dim: its own node

    def test_python_number_minus_tensor_is_rsub_scalar(self):
        g = export(lambda p, q, r: (1 - p).sum())  # Tensor.__rsub__: aten.rsub.Scalar, which wraps the 1
        (s,) = [o for o in ops_of(g, "sub") if o["attrs"].get("reverse")]
        self.assertTrue(s["attrs"]["scalar_overload"])

    def test_kl_div_is_xlogy_of_the_target(self):
        g = export(CASES["kl_div"])
        (x,) = ops_of(g, "xlogy")
        self.assertEqual(x["inputs"][0], x["inputs"][1])

    def test_softmin_is_neg_then_softmax(self):
        g = export(CASES["softmin"])
        self.assertEqual(len(ops_of(g, "neg")), 1)
        self.assertEqual(len(ops_of(g, "softmax")), 1)

    def test_hinge_embedding_writes_into_a_new_tensor(self):
        g = export(CASES["hinge_embedding_loss"])
        # zeros_like, empty_like(...).fill_(margin).sub_(self), clamp_min_ (with autograd's clone)
        self.assertEqual(len(ops_of(g, "full")), 3)  # zeros_like, empty_like, ones_like (the target)
        self.assertTrue(any(o["attrs"].get("inplace") for o in ops_of(g, "clamp")))
        self.assertEqual(len(ops_of(g, "ne")), 2)

    def test_bool_mask_ops(self):
        g = export(lambda p, q, r: torch.where((p > 0) & ~(q > 0), p, r).sum())
        self.assertEqual(len(ops_of(g, "bitwise_and")), 1)
        self.assertEqual(len(ops_of(g, "bitwise_not")), 1)
        self.assertEqual(ops_of(g, "recorded"), [])


if __name__ == "__main__":
    unittest.main()
