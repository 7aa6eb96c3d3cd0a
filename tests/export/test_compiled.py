"""torch.compile export (`export_torch.py --compile`, Note [Compiled regions] in docs/op-rules.md):
the reading of Inductor's wrapper code into buffer programs, and (under torch >= 2.4, the venv of
`make deps`) a fresh export of the MLP against the graph of tests/data/traces_compile_2_13, which
tools/validate.py checks against real compiled traces."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from memsim_export import compiled  # noqa: E402
from memsim_export.errors import ExportError  # noqa: E402

try:
    import torch
    HAS_COMPILE = int(torch.__version__.split(".")[0]) >= 2
except ImportError:
    HAS_COMPILE = False

# The shape of Inductor's wrappers (PyTorch 2.13): one Linear + ReLU, forward and backward.
FWD = '''
class Runner:
    def call(self, args):
        primals_1, primals_2, primals_3 = args
        args.clear()
        buf0 = empty_strided_cpu((8, 4), (4, 1), torch.float32)
        extern_kernels.addmm(primals_2, primals_3, reinterpret_tensor(primals_1, (16, 4), (1, 16), 0), alpha=1, beta=1, out=buf0)
        del primals_1
        del primals_2
        buf1 = buf0; del buf0  # reuse
        cpp_fused_relu_0(buf1)
        buf2 = empty_strided_cpu((8, 4), (4, 1), torch.float32)
        cpp_fused_mul_1(buf1, buf2)
        return (buf2, primals_3, buf1, )
'''
BWD = '''
class Runner:
    def call(self, args):
        primals_3, relu, tangents_1 = args
        args.clear()
        buf0 = relu; del relu  # reuse
        cpp_fused_threshold_backward_0(buf0, tangents_1)
        del tangents_1
        buf1 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
        extern_kernels.mm(reinterpret_tensor(buf0, (4, 8), (1, 4), 0), primals_3, out=buf1)
        del primals_3
        buf2 = empty_strided_cpu((1, 4), (4, 1), torch.float32)
        cpp_fused_sum_1(buf0, buf2)
        del buf0
        return (buf1, reinterpret_tensor(buf2, (4, ), (1, ), 0), None, )
'''


class WrapperPrograms(unittest.TestCase):
    def region(self):
        return compiled._region_op(compiled._Program(FWD, "forward"), compiled._Program(BWD, "backward"),
                                   ["w", "b", "x"], ["y"], [256, 16, 512], [([8, 4], "float32")],
                                   [True, True, False], 1.0)

    def test_forward_program_and_saved_set(self):
        a = self.region()["attrs"]
        self.assertEqual(a["fwd_bytes"], [128, 128])
        self.assertEqual(a["fwd_program"], "A0 A1")    # buf1 is buf0 reused; nothing freed
        self.assertEqual(a["fwd_outputs"], [1])         # buf2 is y
        self.assertEqual(a["saved"], "i2 b0")           # x (primals_3) and the relu output

    def test_backward_releases_saved_tensors_where_the_wrapper_drops_them(self):
        a = self.region()["attrs"]
        self.assertEqual(a["bwd_bytes"], [256, 16])
        # the tangent, then x's last name, then the relu (renamed buf0) after the bias grad's kernel
        self.assertEqual(a["bwd_program"], "G A0 R0 A1 R1")
        self.assertEqual(a["bwd_grads"], [0, 1, -1])

    def test_a_transposed_grad_records_its_strides(self):
        src = BWD.replace("return (buf1,", "return (reinterpret_tensor(buf1, (4, 16), (1, 4), 0),")
        a = compiled._region_op(compiled._Program(FWD, "forward"), compiled._Program(src, "backward"),
                                ["w", "b", "x"], ["y"], [256, 16, 512], [([8, 4], "float32")],
                                [True, True, False], 1.0)["attrs"]
        self.assertEqual(a["grad0_strides"], [1, 4])
        self.assertNotIn("grad1_strides", self.region()["attrs"])  # (4,) (1,): row-major

    def test_a_reinterpreted_reuse_drops_the_old_name(self):
        src = BWD.replace("buf0 = relu; del relu  # reuse",
                          "buf0 = reinterpret_tensor(relu, (8, 4), (4, 1), 0); del relu  # reuse")
        self.assertEqual(compiled._Program(src, "backward").events,
                         compiled._Program(BWD, "backward").events)

    def test_an_unknown_statement_is_refused_with_its_text(self):
        src = FWD.replace("cpp_fused_mul_1(buf1, buf2)", "buf3 = buf1.some_method()")
        with self.assertRaisesRegex(ExportError, "not modelled yet: buf3 = buf1.some_method"):
            compiled._Program(src, "forward")

    def test_a_fallback_kernels_results_are_sized_by_its_asserts(self):
        # SDPA's CPU flash kernel: a tuple (out, logsumexp); the tuple and each item name them
        src = FWD.replace("cpp_fused_mul_1(buf1, buf2)", "\n        ".join([
            "buf7 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(buf1, buf1, buf1)",
            "buf8 = buf7[0]",
            "assert_size_stride(buf8, (2, 2, 16, 16), (512, 16, 32, 1), 'torch.ops.aten._scaled_dot_product')",
            "buf9 = buf7[1]",
            "assert_size_stride(buf9, (2, 2, 16), (32, 1, 2), 'torch.ops.aten._scaled_dot_product')",
            "del buf7",
            "del buf9",
            "cpp_fused_mul_1(buf8, buf2)",
            "del buf8"]))
        p = compiled._Program(src, "forward")
        self.assertEqual(p.bytes, [128, 128, 4096, 256])
        # the logsumexp dies with its last name, the output with its own after the kernel reads it
        self.assertEqual(p.events, [("A", 0), ("R", 0), ("R", 1), ("A", 1), ("A", 2), ("A", 3), ("F", 3), ("F", 2)])
        # under autocast bf16 the region's floating dtype is bf16, but the logsumexp is float32:
        # Inductor's buffer of that name says so
        p = compiled._Program(src, "forward", 2, None, {"buf9": "float32"})
        self.assertEqual(p.bytes, [128, 128, 2048, 256])

    def test_recomputed_buffers_are_named_by_their_label(self):
        # budget 0: the backward recomputes the relu into buf0's reuse (buf3) and an addmm into buf1
        src = BWD.replace("buf0 = relu; del relu  # reuse", "buf0 = relu; del relu  # reuse\n        buf3 = buf0; del buf0  # reuse"
                          ).replace("cpp_fused_threshold_backward_0(buf0,", "cpp_fused_threshold_backward_0(buf3,"
                          ).replace("cpp_fused_sum_1(buf0, buf2)\n        del buf0", "cpp_fused_sum_1(buf3, buf2)\n        del buf3"
                          ).replace("reinterpret_tensor(buf0, (4, 8)", "reinterpret_tensor(buf3, (4, 8)")
        bwd = compiled._Program(src, "backward", 4, {"buf1": ["permute", "addmm"], "buf3": ["relu"]})
        a = compiled._region_op(compiled._Program(FWD, "forward"), bwd, ["w", "b", "x"], ["y"], [256, 16, 512],
                                [([8, 4], "float32")], [True, True, False], 1.0)["attrs"]
        self.assertEqual(a["bwd_recomputed"], "bwd.buf1=permute,addmm")  # buf3 reuses a saved input, not a buffer

    def test_a_buffer_is_recomputed_by_its_origin_node_or_by_origins_all_recomputed(self):
        got = compiled._recomputed_buffers(["addmm", "pow_1", "mean", "relu"], {
            "buf1": (["addmm"], ["addmm"], None),                # realized from a recomputed node
            "buf2": ([], ["pow_1", "mean"], None),                # a reduction inside mean's lowering
            "buf8": ([], ["pow_1", "mean", "mul_5"], None),        # a fused backward kernel inlining them
            "buf9": (["mm_2"], ["mm_2", "addmm"], None)})          # a backward node's result
        self.assertEqual(got, {"buf1": ["addmm"], "buf2": ["pow_1", "mean"]})


@unittest.skipUnless(HAS_COMPILE, "needs torch 2.x")
class Regions(unittest.TestCase):
    """compile_graph on captures written by hand (no compile): graph breaks chain the regions by
    tensor identity; several budgets are recorded in one op."""

    def capture(self, fwd2=FWD, budget=1.0, foreign=False):
        m = torch.nn.Module()
        for k in (0, 1):
            m.register_parameter("w%d" % k, torch.nn.Parameter(torch.zeros(4, 16)))
            m.register_parameter("b%d" % k, torch.nn.Parameter(torch.zeros(4)))
        x, h, y = torch.zeros(8, 16), torch.zeros(8, 16, requires_grad=True), torch.zeros(8, 4, requires_grad=True)
        second = torch.zeros(8, 16) if foreign else h  # an eager tensor made between the regions
        regions = [([m.w0, m.b0, x], FWD, BWD, [h], {}), ([m.w1, m.b1, second], fwd2, BWD, [y], {})]
        return (m, [x], budget, "none", regions, y)

    GRAPH = {"inputs": [{"name": "x"}, {"name": "target"}], "outputs": ["logits"],
             "ops": [{"op": "linear", "module": "fc", "inputs": [], "outputs": []},
                     {"op": "cross_entropy", "module": "loss", "inputs": ["logits", "target"], "outputs": ["loss"]}]}

    def test_a_graph_break_chains_two_regions(self):
        g = compiled.compile_graph(self.GRAPH, [self.capture()])
        self.assertEqual([o["op"] for o in g["ops"]], ["compiled", "compiled", "cross_entropy"])
        r0, r1 = g["ops"][:2]
        self.assertEqual((r0["inputs"], r0["outputs"]), (["w0", "b0", "x"], ["region0.out0"]))
        self.assertEqual((r1["inputs"], r1["outputs"]), (["w1", "b1", "region0.out0"], ["logits"]))
        self.assertEqual(g["compiled"]["regions"], 2)
        self.assertEqual(g["compiled"]["eager_ops"], self.GRAPH["ops"])  # the eager export, loss included

    def test_eager_code_is_placed_by_the_regions_modules(self):
        with self.assertRaisesRegex(ExportError, "regions' modules do not follow the eager ops' order"):
            compiled.compile_graph(self.GRAPH, [self.capture(foreign=True)])

    def test_eager_code_between_regions_runs_between_them(self):
        cap = self.capture(foreign=True)
        cap[4][0][4]["modules"], cap[4][1][4]["modules"] = {"a", "a.0"}, {"b"}
        g = {"inputs": [{"name": "x"}, {"name": "target"}], "outputs": ["logits"],
             "ops": [{"op": "linear", "module": "a.0", "inputs": ["x", "w0", "b0"], "outputs": ["_0"]},
                     {"op": "relu", "module": "mid", "inputs": ["_0"], "outputs": ["_1"],
                      "attrs": {"keep_alive": ["_0", "x"]}},
                     {"op": "linear", "module": "b", "inputs": ["_1", "w1", "b1"], "outputs": ["logits"]},
                     {"op": "cross_entropy", "module": "loss", "inputs": ["logits", "target"], "outputs": ["loss"]}]}
        g = compiled.compile_graph(g, [cap])
        self.assertEqual([o["op"] for o in g["ops"]], ["compiled", "relu", "compiled", "cross_entropy"])
        r0, relu, r1 = g["ops"][:3]
        self.assertEqual(r0["outputs"], ["region0.out0"])
        self.assertEqual((relu["inputs"], relu["outputs"], relu["attrs"]["keep_alive"]),
                         (["region0.out0"], ["_1"], ["region0.out0", "x"]))
        self.assertEqual((r1["inputs"], r1["outputs"]), (["w1", "b1", "_1"], ["logits"]))

    def test_several_budgets_are_recorded_in_one_op(self):
        fwd0 = FWD.replace("cpp_fused_mul_1(buf1, buf2)", "cpp_fused_mul_1(buf1, buf2)\n        del buf2\n        "
                           "buf2 = empty_strided_cpu((8, 4), (4, 1), torch.float32)")
        g = compiled.compile_graph(self.GRAPH, [self.capture(), self.capture(fwd0, budget=0.0)])
        a = g["ops"][1]["attrs"]
        self.assertEqual(a["memory_budgets"], "1 0")
        self.assertEqual(a["fwd_program"], "A0 A1")
        self.assertEqual(a["mb0:fwd_program"], "A0 A1 F1 A2")
        self.assertEqual(g["compiled"]["memory_budgets"], [1.0, 0.0])


@unittest.skipUnless(HAS_COMPILE, "needs torch.compile (the torch 2.x venv)")
class ExportCompiled(unittest.TestCase):
    def test_mlp_export_matches_the_validated_graph(self):
        want = os.path.join(ROOT, "tests", "data", "traces_compile_2_13", "graphs", "mlp_b256.json")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "g.json")
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"), "graphs/models.py:mlp",
                            "--input", "x=batch,1000", "--set", "batch=256", "--compile", "--loss", "cross_entropy",
                            "--name", "mlp_b256", "-o", out], check=True, cwd=ROOT, capture_output=True)
            got, ref = json.load(open(out)), json.load(open(want))
        self.assertEqual(got["ops"], ref["ops"])
        self.assertEqual(got["compiled"]["activation_memory_budget"], 1.0)
        self.assertEqual(got["compiled"]["eager_ops"], ref["compiled"]["eager_ops"])
        self.assertEqual([o["op"] for o in got["compiled"]["eager_ops"]], ["linear", "relu"] * 4 + ["linear", "cross_entropy"])

    def test_the_eager_ops_nest_one_per_line(self):
        from memsim_export.exporter import graph_to_json
        text = graph_to_json({"ops": [{"op": "compiled"}], "compiled": {"regions": 1, "eager_ops": [{"op": "relu"}, {"op": "mean"}]}})
        self.assertIn('\n    "eager_ops": [\n      {"op": "relu"},\n      {"op": "mean"}\n    ]\n  }\n}\n', text)
        self.assertEqual(json.loads(text)["compiled"]["eager_ops"][1], {"op": "mean"})


if __name__ == "__main__":
    unittest.main()
