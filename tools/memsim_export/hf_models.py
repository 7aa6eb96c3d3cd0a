"""``export_torch.py hf:ARCH[:KEY=V,...]``: Hugging Face models built from their config classes
(random weights, nothing downloaded), or from a config.json / a model id cached offline.

ARCH is a name of ARCHS below (small default sizes; llama, qwen2, mistral and gemma are the
recording kit's ``hf_*_tiny`` models: tests/oracle/kit/trace_step.py HF_MODELS), a transformers
config class name (``hf:LlamaConfig:hidden_size=4096,...``: the class's own defaults, i.e. the
published model's sizes), a path to a config.json or a directory holding one, or a model id whose
config is in the local Hugging Face cache (``AutoConfig.from_pretrained(..., local_files_only=True)``).
KEY=V pairs override config fields (integers, floats, true/false, else strings); a few keys are the
builder's own: ``attn=eager|sdpa`` (attn_implementation, default sdpa), ``dtype=fp32|bf16|fp16``,
``labels=true|false`` (feed ``labels=`` so that the model computes its own loss; default true but
for llama/qwen2/mistral/gemma, whose kit traces take F.cross_entropy on the logits). The model is
built with the Auto class of its task (causal LM, masked LM, seq2seq LM, image classification,
CLIP's contrastive loss, speech seq2seq) and ``use_cache=False`` as fine-tuning scripts set (Note
[Hugging Face decoders] in docs/exporter.md). Its inputs are those of TASKS (batch and seq symbolic).
"""
import functools
import os

from .errors import ExportError

TINY = dict(vocab_size=1000, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)
_ENC = dict(vocab_size=1000, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=256)
_S2S = dict(vocab_size=1000, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=172, decoder_ffn_dim=172)
_VIS = dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4, image_size=32,
            patch_size=8)
# name -> (config class, small sizes, task, labels by default)
ARCHS = {
    "llama": ("LlamaConfig", TINY, "causal", False),
    "qwen2": ("Qwen2Config", TINY, "causal", False),
    "mistral": ("MistralConfig", TINY, "causal", False),
    "gemma": ("GemmaConfig", dict(TINY, head_dim=16), "causal", False),
    "mixtral": ("MixtralConfig", dict(TINY, num_local_experts=4, num_experts_per_tok=2), "causal", True),
    "qwen3": ("Qwen3Config", dict(TINY, head_dim=16), "causal", True),
    "gemma2": ("Gemma2Config", dict(TINY, head_dim=16), "causal", True),
    "gemma3": ("Gemma3TextConfig", dict(TINY, head_dim=16), "causal", True),
    "phi3": ("Phi3Config", dict(TINY, pad_token_id=0, bos_token_id=1, eos_token_id=2), "causal", True),
    "gpt2": ("GPT2Config", dict(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=256, bos_token_id=1,
                                 eos_token_id=2), "causal", True),
    "gpt_neox": ("GPTNeoXConfig", _ENC, "causal", True),
    "falcon": ("FalconConfig", dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4),
               "causal", True),
    "bert": ("BertConfig", _ENC, "masked", True),
    "roberta": ("RobertaConfig", dict(_ENC, max_position_embeddings=258), "masked", True),
    "deberta_v2": ("DebertaV2Config", _ENC, "masked", True),
    "t5": ("T5Config", dict(vocab_size=1000, d_model=64, d_kv=16, d_ff=172, num_layers=2, num_heads=4,
                            decoder_start_token_id=0, pad_token_id=0), "seq2seq", True),
    "bart": ("BartConfig", dict(_S2S, max_position_embeddings=256), "seq2seq", True),
    "vit": ("ViTConfig", dict(_VIS, num_labels=10), "image", True),
    "clip": ("CLIPConfig", dict(text_config=dict(_ENC, pad_token_id=0, bos_token_id=1, eos_token_id=2),
                                 vision_config=_VIS, projection_dim=32),
             "clip", True),
    "whisper": ("WhisperConfig", dict(_S2S, num_mel_bins=16, max_source_positions=32, max_target_positions=256,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1),
                "speech", True),
}
# model_type (config.model_type) -> task, for configs given by class name, file or model id
_TASK_OF_TYPE = {"bert": "masked", "roberta": "masked", "deberta-v2": "masked", "deberta": "masked",
                 "distilbert": "masked", "albert": "masked", "electra": "masked", "xlm-roberta": "masked",
                 "t5": "seq2seq", "mt5": "seq2seq", "bart": "seq2seq", "mbart": "seq2seq", "pegasus": "seq2seq",
                 "marian": "seq2seq", "vit": "image", "deit": "image", "beit": "image", "swin": "image",
                 "convnext": "image", "clip": "clip", "whisper": "speech"}
# the builder's own keys (not config fields)
_OWN = ("attn", "dtype", "labels")


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


def _transformers():
    try:
        import transformers
    except ImportError as e:
        raise ExportError("hf: needs the transformers package (%s)" % e)
    return transformers


def make_config(family, overrides):
    """(transformers config, task, labels default) of FAMILY: a name of ARCHS, a config class name,
    a config.json path or a cached model id."""
    transformers = _transformers()
    own = {k: overrides.pop(k) for k in _OWN if k in overrides}
    if family in ARCHS:
        cls, kw, task, labels = ARCHS[family]
        cfg = getattr(transformers, cls)(**dict(kw, **overrides))
    else:
        if family.endswith("Config") and isinstance(getattr(transformers, family, None), type):
            cfg = getattr(transformers, family)(**overrides)
        else:
            path = family if not os.path.isdir(family) else os.path.join(family, "config.json")
            try:
                if os.path.isfile(path):
                    cfg = transformers.AutoConfig.from_pretrained(path)
                else:
                    cfg = transformers.AutoConfig.from_pretrained(family, local_files_only=True)
            except (OSError, ValueError) as e:
                raise ExportError("hf:%s: not one of %s, a transformers config class (e.g. LlamaConfig), a config.json "
                                  "or a model id in the local cache (%s)"
                                  % (family, ", ".join(ARCHS), str(e).splitlines()[0]))
            for k, v in overrides.items():
                setattr(cfg, k, v)
        task, labels = _TASK_OF_TYPE.get(cfg.model_type, "causal"), True
    attn = own.get("attn", "sdpa")
    if attn not in ("sdpa", "eager"):
        raise ExportError("hf: attn=%s: expected sdpa or eager" % attn)
    set_attn(cfg, attn)
    cfg.use_cache = False
    return cfg, task, bool(own.get("labels", labels)), "attn" in own


def set_attn(cfg, attn):
    cfg._attn_implementation = attn
    for sub in ("text_config", "vision_config"):  # CLIP's towers have configs of their own
        if getattr(cfg, sub, None) is not None:
            getattr(cfg, sub)._attn_implementation = attn


def _vocab(cfg):
    return getattr(cfg, "vocab_size", None) or cfg.text_config.vocab_size


def task_inputs(cfg, task, labels):
    """The model's input specs for TASK (forward argument names; batch and seq are symbols)."""
    v = _vocab(cfg) if task != "image" else None
    ids = "input_ids=int64:batch,seq@0:%d" % v if v else None
    if task in ("causal", "masked"):
        return [ids] + (["labels=int64:batch,seq@0:%d" % v] if labels else [])
    # encoder-decoders: the decoder's input given, as DataCollatorForSeq2Seq prepares it (the model's
    # own shift of labels= is a slice assignment)
    dec = "decoder_input_ids=int64:batch,seq@0:%d" % (v or 0)
    if task == "seq2seq":
        return [ids, dec] + (["labels=int64:batch,seq@0:%d" % v] if labels else [])
    if task == "image":
        size = cfg.image_size
        return ["pixel_values=batch,%d,%d,%d" % (cfg.num_channels, size, size)] + (
            ["labels=int64:batch@0:%d" % cfg.num_labels] if labels else [])
    if task == "clip":
        vc = cfg.vision_config
        return [ids, "pixel_values=batch,%d,%d,%d" % (vc.num_channels, vc.image_size, vc.image_size)]
    if task == "speech":
        feats = "input_features=batch,%d,%d" % (cfg.num_mel_bins, 2 * cfg.max_source_positions)
        return [feats, dec] + (["labels=int64:batch,seq@0:%d" % v] if labels else [])
    raise ExportError("hf: unknown task %r" % task)


def make_model(cfg, task, labels, attn_given=True):
    """The model of TASK; without attn= an architecture that has no SDPA attention gets its eager one."""
    transformers = _transformers()
    auto = {"causal": "AutoModelForCausalLM", "masked": "AutoModelForMaskedLM", "seq2seq": "AutoModelForSeq2SeqLM",
            "image": "AutoModelForImageClassification", "speech": "AutoModelForSpeechSeq2Seq", "clip": "AutoModel"}[task]
    try:
        model = getattr(transformers, auto).from_config(cfg)
    except ValueError as e:
        if "does not support an attention implementation" not in str(e):
            raise
        if attn_given:
            raise ExportError("hf: %s has no attn=%s in transformers %s: use attn=eager"
                              % (type(cfg).__name__.replace("Config", ""), cfg._attn_implementation,
                                 transformers.__version__))
        set_attn(cfg, "eager")
        model = getattr(transformers, auto).from_config(cfg)
    if task == "clip" and labels:  # CLIP's own loss: the contrastive loss of its image-text logits
        model.forward = functools.partial(model.forward, return_loss=True)
    return model


def builder(spec):
    """'ARCH[:KEY=V,...]' → (builder returning (model, input specs), default graph name)."""
    family, _, rest = spec.partition(":")
    overrides = parse_overrides(rest)
    dtype = str(overrides.get("dtype", "fp32"))
    if dtype not in DTYPES:
        raise ExportError("hf: dtype=%s: expected one of %s" % (dtype, ", ".join(DTYPES)))
    cfg, task, labels, attn_given = make_config(family, dict(overrides))

    def build():
        import torch
        model = make_model(cfg, task, labels, attn_given).to(getattr(torch, DTYPES[dtype]))
        return model, task_inputs(cfg, task, labels)
    name = "hf_" + (family if family in ARCHS else os.path.basename(family.rstrip("/")).replace(".json", ""))
    return build, name
