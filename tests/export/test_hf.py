"""Hugging Face decoders (`export_torch.py hf:FAMILY`, Note [Hugging Face decoders] in
docs/exporter.md): run under the torch 2.x venv with transformers (`make deps`); skipped where
transformers is missing. The graphs in tests/data/traces_hf_2_13/graphs are checked against real
traces by tools/validate.py; here the exporter itself."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

try:
    import transformers  # noqa: F401
except ImportError:  # Debian's torch 1.13 has no transformers
    transformers = None

GRAPHS = os.path.join(ROOT, "tests", "data", "traces_hf_2_13", "graphs")


def export(spec):
    from memsim_export import hf_models
    from memsim_export.eager import export_eager
    build, name = hf_models.builder(spec)
    model, inputs = build()
    return export_eager(lambda b: build()[0], inputs, symbols={"batch": 2, "seq": 64}, name=name)


def ops(g, kind):
    return [o for o in g["ops"] if o["op"] == kind]


@unittest.skipIf(transformers is None, "needs transformers (the torch 2.x venv)")
class HfDecoders(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llama = export("llama")

    def test_llama_rope_attention_and_loss(self):
        g = self.llama
        self.assertEqual([o["op"] for o in g["ops"][:3]], ["embedding", "arange", "add"])
        self.assertEqual(ops(g, "arange")[0]["attrs"], {"end": "seq", "dtype": "int64"})
        self.assertEqual([o["attrs"]["dtype"] for o in ops(g, "to_dtype")], ["float32"])  # position ids
        self.assertEqual(len(ops(g, "cos")), 1)
        self.assertEqual(len(ops(g, "sin")), 1)
        sdpa = ops(g, "scaled_dot_product_attention")
        self.assertEqual(len(sdpa), 2)
        for o in sdpa:  # no mask: is_causal and grouped-query attention in the kernel (no repeat_kv)
            self.assertTrue(o["attrs"]["is_causal"])
            self.assertTrue(o["attrs"]["enable_gqa"])
            self.assertEqual(len(o["inputs"]), 3)
        self.assertEqual(ops(g, "linear")[-1]["module"], "lm_head")
        # hidden_states[:, slice(0, None), :] is an alias under 2.x: lm_head reads the norm's output
        self.assertEqual(ops(g, "linear")[-1]["inputs"][0], ops(g, "mul")[-1]["outputs"][0])
        self.assertEqual(g["ops"][-1]["op"], "cross_entropy")

    def test_llama_matches_the_committed_graph(self):
        with open(os.path.join(GRAPHS, "hf_llama_tiny.json")) as f:
            committed = json.load(f)
        self.assertEqual(self.llama["ops"], committed["ops"])
        self.assertEqual(self.llama["parameters"], committed["parameters"])

    def test_gemma_gelu_tanh_and_tied_head(self):
        g = export("gemma")
        self.assertEqual({o["attrs"]["approximate"] for o in ops(g, "gelu")}, {"tanh"})
        names = [p["name"] for p in g["parameters"]]
        self.assertNotIn("lm_head.weight", names)  # tied to model.embed_tokens.weight
        self.assertEqual(ops(g, "linear")[-1]["inputs"][1], "model.embed_tokens.weight")

    def test_overrides_and_eager_attention(self):
        g = export("qwen2:num_hidden_layers=3,attn=eager")
        self.assertEqual(len(ops(g, "scaled_dot_product_attention")), 0)
        self.assertEqual(len(ops(g, "softmax")), 3)
        self.assertEqual(len({o["module"] for o in ops(g, "linear") if o["module"].endswith("q_proj")}), 3)

    def test_cli_front_door_and_errors(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "m.json")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"), "hf:mistral",
                                "--trace", "run", "--set", "batch=2", "--set", "seq=32", "-o", out],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                g = json.load(f)
            self.assertEqual(g["name"], "hf_mistral")
            self.assertEqual(g["inputs"][0], {"name": "input_ids", "shape": ["batch", "seq"], "dtype": "int64"})
            bad = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"), "hf:nosuchfamily",
                                  "-o", out], capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("hf:nosuchfamily", bad.stderr)
            bad = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"), "hf:llama:layers",
                                  "-o", out], capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("KEY=VALUE", bad.stderr)


@unittest.skipIf(transformers is None, "needs transformers (the torch 2.x venv)")
class HfArchitectures(unittest.TestCase):
    """hf:ARCH beyond the decoders (Note [Hugging Face architectures]): the model's own loss
    (labels=), inputs by name, the ops only these models call."""

    def test_gpt2_conv1d_addmm_and_own_loss(self):
        g = export("gpt2")
        self.assertEqual([i["name"] for i in g["inputs"]], ["input_ids", "labels"])
        self.assertEqual(g["loss"], g["ops"][-1]["outputs"][0])  # the model's own cross_entropy
        self.assertEqual(g["ops"][-1]["op"], "cross_entropy")
        c_attn = [o for o in g["ops"] if o.get("module") == "transformer.h.0.attn.c_attn"]
        # torch.addmm(b, x, W) as the linear(x, Wᵀ, b) it is
        self.assertEqual([o["op"] for o in c_attn], ["view", "transpose", "linear", "view"])
        self.assertEqual(c_attn[1]["inputs"], ["transformer.h.0.attn.c_attn.weight"])

    def test_gpt2_matches_the_committed_graph(self):
        with open(os.path.join(GRAPHS, "hf_gpt2_tiny.json")) as f:
            committed = json.load(f)
        self.assertEqual(export("gpt2")["ops"], committed["ops"])

    def test_vit_pixel_values_and_class_labels(self):
        g = export("vit")
        self.assertEqual(g["inputs"][0], {"name": "pixel_values", "shape": ["batch", 3, 32, 32], "dtype": "float32"})
        self.assertEqual(g["inputs"][1], {"name": "labels", "shape": ["batch"], "dtype": "int64"})
        self.assertEqual(ops(g, "conv2d")[0]["module"], "vit.embeddings.patch_embeddings.projection")

    def test_encoder_decoder_takes_decoder_input_ids(self):
        build, _ = __import__("memsim_export.hf_models", fromlist=["x"]).builder("whisper")
        self.assertEqual([s.split("=")[0] for s in build()[1]], ["input_features", "decoder_input_ids", "labels"])

    def test_no_sdpa_falls_back_to_eager_unless_asked(self):
        from memsim_export import hf_models
        from memsim_export.errors import ExportError
        build, _ = hf_models.builder("gemma2")
        self.assertEqual(build()[0].config._attn_implementation, "eager")
        build, _ = hf_models.builder("gemma2:attn=sdpa")
        with self.assertRaisesRegex(ExportError, "use attn=eager"):
            build()

    def test_config_class_with_overrides(self):
        from memsim_export import hf_models
        build, name = hf_models.builder("LlamaConfig:hidden_size=32,intermediate_size=64,num_hidden_layers=1,"
                                        "num_attention_heads=2,num_key_value_heads=1,vocab_size=100")
        model, inputs = build()
        self.assertEqual(name, "hf_LlamaConfig")
        self.assertEqual(model.config.hidden_size, 32)
        self.assertEqual(inputs, ["input_ids=int64:batch,seq@0:100", "labels=int64:batch,seq@0:100"])


if __name__ == "__main__":
    unittest.main()
