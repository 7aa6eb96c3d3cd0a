"""Exporter mappings of the op-coverage ops (Notes [More activations], [Broadcast grads], [Padding
and resampling], [Elementwise losses], [3-D convolution and pooling], [Channel and alpha dropout],
[Vector norms], [Upsample index buffers], [Binary cross entropy], [Transposed convolution], and issue 26's
EmbeddingBag sum/max, threshold, flip, maximum, var, pixel/channel shuffle, bilinear, CrossMapLRN2d): the models of graphs/op_models.py and the elementwise
--loss options give the memsim ops PyTorch runs, with their attributes."""
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from export_util import check_well_formed, ops_of

import op_models
from memsim_export import export_model
from memsim_export.errors import UnsupportedError


def export(name, **kw):
    model, specs = getattr(op_models, name + "_export")()
    return export_model(model, specs, name=name, **kw)


class Lambda(nn.Module):
    def __init__(s, fn):
        super().__init__(); s.fn = fn

    def forward(s, x):
        return s.fn(x)


class Holder(nn.Module):  # fn with a registered parameter or submodule
    def __init__(s, p, fn):
        super().__init__(); s.p = p; s.fn = fn

    def forward(s, x):
        return s.fn(x)


def op_names(g):
    return [o["op"] for o in g["ops"]]


class OpCoverage(unittest.TestCase):
    def test_act_mlp_a(self):
        g = export("act_mlp_a")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["linear", "elu"] * 3 + ["linear", "softplus", "linear", "mish", "linear", "prelu",
                                                                "linear", "cross_entropy"])
        elus = [o["attrs"] for o in ops_of(g, "elu")]
        self.assertEqual(elus[0], {"alpha": 1.0, "scale": 1.0, "input_scale": 1.0, "inplace": False})
        self.assertAlmostEqual(elus[1]["scale"], 1.0507009873554805)  # SELU
        self.assertAlmostEqual(elus[2]["input_scale"], 2.0)            # CELU(0.5)
        self.assertEqual(ops_of(g, "prelu")[0]["inputs"][1], "11.weight")

    def test_act_mlp_b(self):
        g = export("act_mlp_b")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["linear", "hardtanh", "linear", "abs", "add", "div", "linear", "log_sigmoid",
                                       "linear", "glu", "linear", "hardshrink", "linear", "softshrink", "linear", "tanh",
                                       "sub", "linear", "cross_entropy"])
        self.assertEqual(ops_of(g, "hardtanh")[0]["attrs"], {"min_val": -2.0, "max_val": 2.0, "inplace": False})
        self.assertEqual(ops_of(g, "glu")[0]["attrs"], {"dim": -1})

    def test_clamp_abs(self):
        g = export("clamp_abs_mlp")
        self.assertEqual([o["attrs"] for o in ops_of(g, "clamp")],
                         [{"inplace": False, "min": -1.0, "max": 1.0}, {"inplace": False, "min": -0.5}])
        self.assertEqual(len(ops_of(g, "abs")), 1)

    def test_scale_mlp_broadcasts(self):
        g = export("scale_mlp")
        self.assertEqual(op_names(g), ["linear", "mul", "abs", "sum", "add", "div", "linear", "cross_entropy"])
        self.assertEqual(ops_of(g, "mul")[0]["inputs"][1], "scale")

    def test_resample_cnn(self):
        g = export("resample_cnn")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["pad", "pad", "conv2d", "upsample", "upsample", "pad", "conv2d", "roll", "repeat",
                                       "to_dtype", "to_dtype", "flatten", "linear", "cross_entropy"])
        pads = [o["attrs"] for o in ops_of(g, "pad")]
        self.assertEqual([p["mode"] for p in pads], ["constant", "reflect", "replicate"])
        self.assertEqual([o["attrs"] for o in ops_of(g, "upsample")],
                         [{"size": [36, 36], "mode": "nearest"}, {"size": [18, 18], "mode": "bilinear"}])
        self.assertEqual(ops_of(g, "repeat")[0]["attrs"], {"repeats": [1, 2, 1, 1]})
        self.assertEqual([o["attrs"]["dtype"] for o in ops_of(g, "to_dtype")], ["float64", "float32"])

    def test_elementwise_losses(self):
        import models
        m, specs = models.mlp()
        for loss, ops in (("bce_logits", ["binary_cross_entropy_with_logits"]), ("smooth_l1", ["smooth_l1_loss"]),
                          ("huber", ["huber_loss"]), ("l1", ["sub", "abs", "mean"])):
            g = export_model(m, specs, name="mlp", loss=loss)
            check_well_formed(self, g)
            self.assertEqual(op_names(g)[9:], ops, loss)
            self.assertEqual(g["inputs"][1], {"name": "target", "shape": ["batch", 10], "dtype": "float32"})

    def test_functional_forms_detach_and_casts(self):
        class M(nn.Module):
            def __init__(s):
                super().__init__(); s.fc = nn.Linear(8, 8)

            def forward(s, x):
                h = s.fc(x)
                h = F.smooth_l1_loss(h, h.detach(), beta=0.5) + F.binary_cross_entropy_with_logits(h, torch.sigmoid(h).detach())
                return h

        g = export_model(M(), ["batch,8"], name="m", loss="output")
        self.assertEqual(len(ops_of(g, "detach")), 2)
        self.assertEqual(ops_of(g, "smooth_l1_loss")[0]["attrs"], {"reduction": "mean", "beta": 0.5})
        same = export_model(nn.Sequential(nn.Linear(8, 8)), ["batch,8"], name="s")
        self.assertEqual(ops_of(same, "to_dtype"), [])

    def test_conv3d_net(self):
        g = export("conv3d_net")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["conv3d", "relu", "max_pool3d", "conv3d", "relu", "avg_pool3d",
                                       "adaptive_avg_pool3d", "flatten", "linear", "cross_entropy"])
        self.assertEqual(ops_of(g, "conv3d")[0]["attrs"],
                         {"stride": [1, 1, 1], "padding": [1, 1, 1], "dilation": [1, 1, 1], "groups": 1})
        self.assertEqual(ops_of(g, "max_pool3d")[0]["attrs"]["kernel_size"], [2, 2, 2])
        self.assertEqual(ops_of(g, "adaptive_avg_pool3d")[0]["attrs"], {"output_size": [1, 2, 2]})

    def test_conv_transpose(self):  # Note [Transposed convolution]
        g = export("deconv1d_net")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["conv_transpose1d", "relu", "conv_transpose1d", "flatten", "linear",
                                       "cross_entropy"])
        up1, up2 = ops_of(g, "conv_transpose1d")
        self.assertEqual(up1["attrs"], {"stride": [3], "padding": [2], "output_padding": [1], "dilation": [1],
                                        "groups": 2})
        self.assertEqual(len(up1["inputs"]), 3)
        self.assertEqual(up2["inputs"][2:], [])  # bias=False
        self.assertEqual(op_names(export("dcgan_gen")).count("conv_transpose2d"), 3)
        self.assertIn("conv_transpose3d", op_names(export("unet3d")))
        # F.conv_transpose2d, and forward(x, output_size) resolved to output_padding.
        w = nn.Parameter(torch.ones(4, 2, 3, 3))
        fn = export_model(Holder(w, lambda x: F.conv_transpose2d(x, w, stride=2, groups=2)), ["batch,4,5,5"], name="f")
        self.assertEqual(ops_of(fn, "conv_transpose2d")[0]["attrs"]["groups"], 2)
        up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1)
        sized = export_model(Holder(up, lambda x: up(x, output_size=[10, 10])), ["batch,4,5,5"], name="s")
        self.assertEqual(ops_of(sized, "conv_transpose2d")[0]["attrs"]["output_padding"], [1, 1])

    def test_drop_cnn(self):
        g = export("drop_cnn")
        check_well_formed(self, g)
        drops = [{k: v for k, v in o["attrs"].items() if k in ("feature", "alpha")} for o in ops_of(g, "dropout")]
        self.assertEqual(drops, [{"feature": True}] * 3 + [{"feature": True, "alpha": True}, {"alpha": True}])

    def test_norm_mlp(self):
        g = export("norm_mlp")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["linear", "vector_norm", "clamp", "expand", "div", "linear", "vector_norm", "mul",
                                       "vector_norm", "sub", "linear", "cross_entropy"])
        self.assertEqual([o["attrs"]["ord"] for o in ops_of(g, "vector_norm")], [2.0, 2.0, 1.0])
        with self.assertRaises(UnsupportedError):
            export_model(nn.Sequential(nn.Linear(4, 4), Lambda(lambda h: h * h.norm(p=float("inf"), dim=1, keepdim=True))),
                         ["batch,4"], name="inf")

    def test_resample_modes(self):
        g = export("resample_modes")
        check_well_formed(self, g)
        self.assertEqual([(o["attrs"]["mode"], o["attrs"]["size"]) for o in ops_of(g, "upsample")],
                         [("bicubic", [16, 16]), ("linear", [162]), ("nearest", [324]), ("trilinear", [8, 18, 18]),
                          ("nearest", [4, 9, 9])])

    def test_bce_loss(self):
        g = export("sigmoid_mlp", loss="bce")
        check_well_formed(self, g)
        self.assertEqual(op_names(g)[-2:], ["sigmoid", "binary_cross_entropy"])

    def test_slice_assign(self):  # Note [Writes into views]
        g = export("slice_assign")
        check_well_formed(self, g)
        writes = [(o["attrs"]["write"], o["inputs"][0] == o["inputs"][1]) for o in ops_of(g, "view_write")]
        whole_is_self = not torch.__version__.startswith("1.")  # 2.x: `h[:, idx]`'s `:` is no view
        self.assertEqual(writes, [("copy", False), ("fill", False), ("masked_fill", False),
                                  ("index_put", whole_is_self), ("copy", False), ("copy", False)])
        # later uses read the written base: tanh reads the index_put's output, flatten the last write's
        out = {o["outputs"][0]: o for o in g["ops"]}
        self.assertEqual(out[ops_of(g, "tanh")[0]["inputs"][0]]["op"], "view_write")
        self.assertEqual(out[ops_of(g, "flatten")[0]["inputs"][0]]["op"], "view_write")

    def test_mask_write(self):  # Note [Writes into views]: bool masks, masked_scatter_
        g = export("mask_write")
        check_well_formed(self, g)
        writes = [(o["attrs"]["write"], len(o["inputs"])) for o in ops_of(g, "view_write")]
        self.assertEqual(writes, [("mask_fill", 3), ("mask_put", 4), ("masked_scatter", 4)])
        self.assertEqual(ops_of(g, "recorded"), [])

    def test_adaptive_max_net(self):  # Note [Adaptive max pooling]
        g = export("adaptive_max_net")
        check_well_formed(self, g)
        self.assertEqual([o["attrs"]["output_size"] for o in ops_of(g, "adaptive_max_pool2d")], [[5, 7], [1, 6]])
        self.assertEqual([o["attrs"]["output_size"] for o in ops_of(g, "adaptive_max_pool3d")], [[2, 3, 3]])
        self.assertEqual(len(ops_of(g, "squeeze")), 1)  # AdaptiveMaxPool1d: the 2-D op between two views

    def test_unfold_net(self):  # Note [Unfold and fold]
        g = export("unfold_net")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["conv2d", "im2col", "tanh", "col2im", "flatten", "unfold", "flatten", "linear",
                                       "cross_entropy"])
        self.assertEqual(ops_of(g, "col2im")[0]["attrs"], {"kernel_size": [2, 2], "dilation": [1, 1], "padding": [0, 0],
                                                          "stride": [2, 2], "output_size": [16, 16]})
        self.assertEqual(ops_of(g, "unfold")[0]["attrs"], {"dim": 2, "size": 16, "step": 8})

    def test_grid_net(self):  # Note [Grid sampling]
        g = export("grid_net")
        check_well_formed(self, g)
        self.assertEqual(ops_of(g, "affine_grid")[0]["attrs"], {"size": ["batch", 3, 16, 16], "align_corners": False})
        self.assertEqual([o["attrs"]["mode"] for o in ops_of(g, "grid_sample")], ["bilinear", "nearest"])
        self.assertEqual(len(ops_of(g, "view_write")), 5)  # the circular pad: interior, then 2 pads per dim

    def test_circular_pad_is_the_aten_composite(self):  # Note [Writes into views]
        class P(nn.Module):
            def forward(s, x):
                return F.pad(x, (1, 2), mode="circular")
        g = export_model(nn.Sequential(nn.Linear(4, 4), P(), nn.Flatten(), nn.Linear(3 * 7, 2)), ["batch,3,4"], name="p")
        check_well_formed(self, g)
        self.assertEqual(op_names(g)[1:9], ["full", "slice", "slice", "view_write", "slice", "slice", "view_write",
                                            "slice"])
        self.assertEqual(ops_of(g, "full")[0]["attrs"]["shape"][-1], 7)
        self.assertTrue(all(o["attrs"]["aten"] for o in ops_of(g, "slice")))


class MoreOps(unittest.TestCase):  # issue 26: ops that ran on recorded rules (Notes in docs/op-rules.md)
    def test_embbag_sum_max_net(self):  # Note [EmbeddingBag]
        g = export("embbag_sum_max_net")
        check_well_formed(self, g)
        self.assertEqual([o["attrs"]["mode"] for o in ops_of(g, "embedding_bag")], ["sum", "max"])
        self.assertFalse(ops_of(g, "recorded"))

    def test_embedding_bag_options_and_half_sum_are_recorded(self):
        for kw, dtype in (({"mode": "sum"}, torch.float16), ({"mode": "max", "padding_idx": 0}, torch.float32)):
            m = nn.Sequential(nn.EmbeddingBag(50, 8, **kw).to(dtype), nn.Linear(8, 2).to(dtype))
            with self.assertRaises(UnsupportedError):
                export_model(m, ["int64:batch,4@0:50"], name="e")

    def test_misc_math_net(self):  # Notes [Elementwise maximum], [Variance], [Flip and pixel shuffle]
        g = export("misc_math_net")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["linear", "threshold", "flip", "maximum", "var", "cat", "linear", "var", "mul",
                                       "cross_entropy"])
        self.assertEqual(ops_of(g, "threshold")[0]["attrs"], {"threshold": 0.1, "value": 0.0, "inplace": False})
        self.assertEqual(ops_of(g, "flip")[0]["attrs"], {"dims": [1]})
        self.assertEqual([o["attrs"]["dim"] for o in ops_of(g, "var")], [1, None])

    def test_max_min_of_two_tensors_are_maximum_minimum(self):  # Note [Elementwise maximum]
        g = export_model(Lambda(lambda x: torch.max(x, x.flip(-1)) + torch.min(x, x * 2)), ["batch,8"], name="m")
        check_well_formed(self, g)
        self.assertEqual(op_names(g), ["flip", "maximum", "mul", "minimum", "add", "cross_entropy"])

    def test_pixel_and_channel_shuffle(self):
        g = export("pixel_shuffle_net")
        check_well_formed(self, g)
        self.assertEqual(ops_of(g, "pixel_shuffle")[0]["attrs"], {"upscale_factor": 2})
        self.assertEqual(ops_of(g, "pixel_unshuffle")[0]["attrs"], {"downscale_factor": 2})
        if torch.__version__.startswith("1."):  # no derivative in 1.13: refused with the reason
            with self.assertRaisesRegex(Exception, "no derivative"):
                export("channel_shuffle_net")
        else:
            self.assertEqual(ops_of(export("channel_shuffle_net"), "channel_shuffle")[0]["attrs"], {"groups": 4})

    def test_bilinear_and_cross_map_lrn(self):  # Notes [Bilinear], [CrossMapLRN2d]
        g = export("bilinear_net")
        check_well_formed(self, g)
        self.assertEqual(op_names(g)[-3:], ["bilinear", "add", "cross_entropy"])
        g = export("cross_map_lrn_net")
        check_well_formed(self, g)
        self.assertEqual(ops_of(g, "cross_map_lrn2d")[0]["attrs"], {"size": 5, "alpha": 1e-4, "beta": 0.75, "k": 1.0})

    def test_dropout3d_of_a_4d_input_is_unsqueezed(self):  # Note [Channel and alpha dropout]
        g = export_model(nn.Sequential(nn.Conv2d(3, 4, 1), nn.Dropout3d(0.2), nn.Flatten(), nn.Linear(4 * 4 * 4, 2)),
                         ["batch,3,4,4"], name="d")
        check_well_formed(self, g)
        self.assertEqual(op_names(g)[1:4], ["unsqueeze", "dropout", "squeeze"])
        self.assertTrue(ops_of(g, "dropout")[0]["attrs"]["feature"])


if __name__ == "__main__":
    unittest.main()
