"""``export_torch.py hf:FAMILY[:KEY=V,...]``: Hugging Face decoder models built from their config
classes (random weights, nothing downloaded), or from a config.json / a model id cached offline.

FAMILY is llama, qwen2, mistral or gemma (small default sizes, the recording kit's ``hf_*_tiny``
models: tests/oracle/kit/trace_step.py HF_MODELS), or a path to a config.json or a directory
holding one, or a model id whose config is in the local Hugging Face cache
(``AutoConfig.from_pretrained(..., local_files_only=True)``). KEY=V pairs override config fields
(integers, floats, true/false, else strings). The model is built with
``AutoModelForCausalLM.from_config``, with ``attn_implementation="sdpa"`` (``attn=eager`` selects the
eager attention) and ``use_cache=False`` as fine-tuning scripts set (Note [Hugging Face decoders]
in docs/exporter.md). Its input is ``input_ids`` [batch, seq] and ``--loss cross_entropy`` applies to
the output's logits.
"""
import os

from .errors import ExportError

TINY = dict(vocab_size=1000, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)
FAMILIES = {"llama": ("LlamaConfig", TINY), "qwen2": ("Qwen2Config", TINY), "mistral": ("MistralConfig", TINY),
            "gemma": ("GemmaConfig", dict(TINY, head_dim=16))}


def _value(text):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_overrides(text):
    """'hidden_size=128,num_hidden_layers=4' → {key: value}."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        if "=" not in item:
            raise ExportError("hf: override %r: expected KEY=VALUE (e.g. hf:llama:hidden_size=128)" % item)
        k, v = item.split("=", 1)
        out[k.strip()] = _value(v.strip())
    return out


# dtype=KEY: the model's parameters (model.to(dtype)), as users load it (torch_dtype=torch.bfloat16).
# Export in the dtype you train in: the casts transformers writes (RMSNorm's float32 upcast and its
# .to(input_dtype), RoPE's cos.to(x.dtype)) are no-ops in an fp32 model and leave no op to record.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def make_config(family, overrides):
    """The transformers config of FAMILY (a known family, a config.json path or a cached model id)."""
    try:
        import transformers
    except ImportError as e:
        raise ExportError("hf: needs the transformers package (%s)" % e)
    attn = overrides.pop("attn", "sdpa")
    overrides.pop("dtype", None)  # the builder's (DTYPES)
    if family in FAMILIES:
        cls, kw = FAMILIES[family]
        cfg = getattr(transformers, cls)(**dict(kw, **overrides))
    else:
        path = family if not os.path.isdir(family) else os.path.join(family, "config.json")
        try:
            if os.path.isfile(path):
                cfg = transformers.AutoConfig.from_pretrained(path)
            else:
                cfg = transformers.AutoConfig.from_pretrained(family, local_files_only=True)
        except (OSError, ValueError) as e:
            raise ExportError("hf:%s: not one of %s, a config.json or a model id in the local cache (%s)"
                              % (family, ", ".join(FAMILIES), str(e).splitlines()[0]))
        for k, v in overrides.items():
            setattr(cfg, k, v)
    cfg._attn_implementation = attn
    cfg.use_cache = False
    return cfg


def builder(spec):
    """'FAMILY[:KEY=V,...]' → (builder returning (model, input specs), default graph name)."""
    family, _, rest = spec.partition(":")
    overrides = parse_overrides(rest)
    dtype = str(overrides.get("dtype", "fp32"))
    if dtype not in DTYPES:
        raise ExportError("hf: dtype=%s: expected one of %s" % (dtype, ", ".join(DTYPES)))
    cfg = make_config(family, dict(overrides))

    def build():
        import torch
        import transformers
        model = transformers.AutoModelForCausalLM.from_config(cfg).to(getattr(torch, DTYPES[dtype]))
        return model, ["input_ids=int64:batch,seq@0:%d" % cfg.vocab_size]
    name = "hf_" + (family if family in FAMILIES else os.path.basename(family.rstrip("/")).replace(".json", ""))
    return build, name
