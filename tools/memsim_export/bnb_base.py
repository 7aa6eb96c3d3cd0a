"""bitsandbytes-quantized base weights: the model to trace with plain nn.Linear layers and the
quantization as the graph's "quantize_base" key.

memsim writes the quantized linears itself (ApplyQuantizedBase in lib/ir/quantized_base.h, Note
[Quantized base weights] in docs/op-rules.md), so the exporter puts an nn.Linear of the original
shape and dtype (on the meta device) in place of each bitsandbytes Linear4bit / Linear8bitLt and
records the --quantize-base spec they share: one source of truth with `memsim run --quantize-base`.
"""
import torch

from .errors import ExportError

_COMPUTE = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def is_bnb_linear(m):
    return type(m).__module__.startswith("bitsandbytes.") and type(m).__name__ in ("Linear4bit", "Linear8bitLt")


def _spec(m):
    """The --quantize-base spec of one bitsandbytes layer (without targets)."""
    if type(m).__name__ == "Linear8bitLt":
        if getattr(m.weight, "has_fp16_weights", False):
            raise ExportError("Linear8bitLt(has_fp16_weights=True) keeps fp16 weights; memsim models "
                              "has_fp16_weights=False (Note [Quantized base weights])")
        return "int8"
    w = m.weight
    qs = getattr(w, "quant_state", None)
    spec = [w.quant_type]
    if w.compress_statistics:
        spec.append("double_quant=on")
    if m.compute_dtype is not None:
        if m.compute_dtype not in _COMPUTE:
            raise ExportError("Linear4bit compute_dtype %s is not fp32, bf16 or fp16" % m.compute_dtype)
        spec.append("compute=" + _COMPUTE[m.compute_dtype])
    blocksize = qs.blocksize if qs is not None else w.blocksize
    if blocksize != 64:
        spec.append("blocksize=%d" % blocksize)
    return ",".join(spec)


def _plain_linear(m):
    """An nn.Linear on the meta device of |m|'s unquantized shape and dtype: a 4-bit weight keeps
    them in its quant_state once quantized (Params4bit on the meta device is not quantized yet);
    an int8 weight that is quantized has lost its dtype, the bias's (else the default) stands in."""
    w = m.weight
    qs = getattr(w, "quant_state", None)
    if qs is not None:
        dtype = qs.dtype
    elif w.dtype.is_floating_point:
        dtype = w.dtype
    else:
        dtype = m.bias.dtype if m.bias is not None else torch.get_default_dtype()
    lin = torch.nn.Linear(m.in_features, m.out_features, bias=m.bias is not None, device="meta", dtype=dtype)
    lin.weight.requires_grad_(False)
    if m.bias is not None:
        lin.bias.requires_grad_(m.bias.requires_grad)
    return lin


def strip(model):
    """(model, spec or None): every bitsandbytes Linear4bit / Linear8bitLt of |model| replaced by a
    plain nn.Linear (in place), and the --quantize-base spec with targets= the quantized modules
    unless they are every Linear but lm_head (the default skip)."""
    layers = [(n, m) for n, m in model.named_modules() if is_bnb_linear(m)]
    if not layers:
        return model, None
    specs = {_spec(m) for _, m in layers}
    if len(specs) != 1:
        raise ExportError("the bitsandbytes layers differ (%s); memsim models one --quantize-base configuration"
                          % ", ".join(sorted(specs)))
    for n, m in layers:
        parent_name, _, leaf = n.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, leaf, _plain_linear(m))
    quantized = {n for n, _ in layers}
    linears = {n for n, m in model.named_modules() if type(m) is torch.nn.Linear}
    spec = specs.pop()
    default = {n for n in linears if n != "lm_head" and not n.endswith(".lm_head")}
    if quantized != default:
        spec += ",targets=" + ",".join(sorted(quantized))
    return model, spec


def annotate(graph, spec):
    """|graph| with the "quantize_base" key, when the model had bitsandbytes layers."""
    if spec:
        graph["quantize_base"] = spec
    return graph
