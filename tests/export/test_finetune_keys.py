"""The fine-tuning keys the exporter writes from a real model (Notes [LoRA] and [Quantized base
weights] in docs/op-rules.md): peft's adapter dtype (`autocast_adapter_dtype`) and bitsandbytes'
Linear4bit / Linear8bitLt layers read into "quantize_base". Run under the torch 2.x venv with peft
and bitsandbytes (`make deps`); skipped where they are missing."""
import os
import sys
import unittest

import torch
import torch.nn as nn

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

try:
    import bitsandbytes as bnb
    import peft
except ImportError:  # Debian's torch 1.13 has neither
    bnb = peft = None


class Mlp(nn.Module):
    """fc1 (bitsandbytes |kind|, or an nn.Linear in |dtype|) -> relu -> lm_head."""

    def __init__(self, kind=None, dtype=torch.float32):
        super().__init__()
        if kind == "int8":
            self.fc1 = bnb.nn.Linear8bitLt(32, 64, bias=True, has_fp16_weights=False)
        elif kind:
            self.fc1 = bnb.nn.Linear4bit(32, 64, bias=True, compute_dtype=torch.bfloat16, compress_statistics=True,
                                         quant_type=kind)
        else:
            self.fc1 = nn.Linear(32, 64, dtype=dtype)
        self.act = nn.ReLU()
        self.lm_head = nn.Linear(64, 10, dtype=dtype)

    def forward(self, x):
        return self.lm_head(self.act(self.fc1(x)))


def export(builder, dtype="float32"):
    from memsim_export.eager import export_eager
    return export_eager(lambda b: builder(), [dtype + ":batch,32"], symbols={"batch": 4}, name="mlp")


def lora(model, **kw):
    return peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["fc1"]), **kw)


@unittest.skipIf(bnb is None, "needs bitsandbytes and peft (the torch 2.x venv)")
class FineTuneKeys(unittest.TestCase):
    def test_bitsandbytes_layers_become_linears_and_the_spec(self):
        for kind, spec in (("nf4", "nf4,double_quant=on,compute=bf16"), ("fp4", "fp4,double_quant=on,compute=bf16"),
                           ("int8", "int8")):
            g = export(lambda: Mlp(kind))
            self.assertEqual(g["quantize_base"], spec)
            self.assertEqual([o["op"] for o in g["ops"]], ["linear", "relu", "linear", "cross_entropy"])
            w = next(p for p in g["parameters"] if p["name"] == "fc1.weight")
            self.assertEqual(w["shape"], [64, 32])  # the unquantized shape

    def test_qlora_writes_both_keys(self):
        def build():
            m = Mlp("nf4")
            m.is_loaded_in_4bit = True  # what transformers' bnb quantizer sets; peft wraps the bnb layer
            return lora(m)
        g = export(build)
        self.assertEqual(g["quantize_base"], "nf4,double_quant=on,compute=bf16")
        self.assertEqual(g["lora"]["targets"], ["fc1"])

    def test_quantizing_only_some_linears_names_them(self):
        def build():
            m = Mlp("nf4")
            m.lm_head = bnb.nn.Linear4bit(64, 10, compute_dtype=torch.bfloat16, compress_statistics=True, quant_type="nf4")
            return m
        self.assertEqual(export(build)["quantize_base"], "nf4,double_quant=on,compute=bf16,targets=fc1,lm_head")

    def test_adapter_dtype_on_a_bf16_base(self):
        from memsim_export import peft_lora
        on = export(lambda: lora(Mlp(dtype=torch.bfloat16)), "bfloat16")["lora"]
        fp32 = export(lambda: lora(Mlp()))["lora"]
        self.assertIs(on["autocast_adapter_dtype"], True)
        self.assertNotIn("autocast_adapter_dtype", fp32)  # irrelevant on a float32 base
        # built on the CPU (peft leaves adapters made on the meta device in float32 either way)
        for autocast in (True, False):
            _, key, _ = peft_lora.strip(lora(Mlp(dtype=torch.bfloat16), autocast_adapter_dtype=autocast))
            self.assertIs(key["autocast_adapter_dtype"], autocast)


if __name__ == "__main__":
    unittest.main()
