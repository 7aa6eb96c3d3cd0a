"""export_eager(): export by execution (see :mod:`.record`), with symbols found by probing.

The model is built and run on meta tensors (weights are never allocated, so a 7B model exports
on a laptop).  A builder may take symbol names as keyword arguments (``def build(seq): ...``):
it is then rebuilt for every probe, so buffers sized by a symbol (a RoPE cache, a causal mask)
become symbolic too.  Probe 0 binds every symbol to its base value; probe i changes symbol i
only; :func:`.symbols.merge` turns the sizes that change into products of symbols.
"""
import contextlib
import inspect
import sys

import torch

from . import bnb_base, peft_lora
from .errors import ExportError, UnsupportedError
from .exporter import _META_FACTORIES, InputSpec, _make_input, _meta_factories, finish_graph, parse_input_spec, probe_graph
from .record import record
from .registry import dtype_name
from .ops_moe import balanced
from .symbols import plan_probes, symbolize_int
from .tracer import _user_frame

# also torch.tensor/eye/normal: constructors build constants with them (a RoPE base)
_FACTORIES = _META_FACTORIES + ("tensor", "eye", "normal")


def meta_device():
    """Tensor factories default to the meta device (model construction allocates nothing)."""
    return _meta_factories(_FACTORIES)


def symbol_params(builder):
    """{name: integer default or None} of the builder's parameters (the symbols it is built from)."""
    try:
        params = inspect.signature(builder).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: (p.default if isinstance(p.default, int) and not isinstance(p.default, bool) else None)
            for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def build_on_cpu(builder, binding):
    """The model built for real (weights initialised with seed 0), in training mode."""
    torch.manual_seed(0)
    obj = builder(binding)
    model = obj[0] if isinstance(obj, (tuple, list)) else obj
    if not isinstance(model, torch.nn.Module):
        raise ExportError("the builder returned %s, not an nn.Module" % type(model).__name__)
    return model


def _bound_specs(specs, symbols, builder_symbols):
    """The input specs with every symbol replaced by its value (--set, the builder's default; batch 32)."""
    values = dict(symbols or {})
    values.setdefault("batch", 32)
    out = []
    for sp in specs:
        missing = [d for d in sp.dims if isinstance(d, str) and d not in values]
        if missing:
            raise ExportError("exporting on CPU tensors needs a value for %s: give it with --set %s=N"
                              % (missing[0], missing[0]))
        out.append(InputSpec([values[d] if isinstance(d, str) else d for d in sp.dims], sp.dtype, sp.name, sp.low, sp.high))
    return out


def build_on_meta(builder, binding):
    with meta_device():
        obj = builder(binding)
    model = obj[0] if isinstance(obj, (tuple, list)) else obj
    if not isinstance(model, torch.nn.Module):
        raise ExportError("the builder returned %s, not an nn.Module" % type(model).__name__)
    # anything a constructor made on the CPU anyway (a torch.tensor(...) constant) moves too
    return model.to("meta")


class DataDependentError(ExportError):
    """The model cannot run on meta tensors: its code needs values (nonzero, nms, a tensor read as a
    Python number) or makes CPU tensors of its own; export_torch.py --device auto runs it again on
    CPU tensors when its weights are small enough (param_bytes)."""

    def __init__(self, message, param_bytes=0):
        super().__init__(message)
        self.param_bytes = param_bytes


# What a failure on meta tensors says when the model needs values (Note [Data-dependent sizes]).
_NEEDS_VALUES = ("_local_scalar_dense", "'Meta' backend", "meta and cpu", "cpu and meta",
                 "cannot be called on meta tensors", "Cannot copy out of meta tensor",
                 "data-independent implementation does not exist",
                 "meta tensor without output_size")  # 1.13 repeat_interleave: its repeats' values


def export_eager(builder, inputs, loss="cross_entropy", symbols=None, name="model", provenance=None,
                 probe_batch=(2, 3), outputs_held=True, builder_symbols=None, device="meta"):
    """builder(binding) → nn.Module, binding = {symbol: value} of the symbols in builder_symbols
    (the builder is called once when there are none); returns the memsim graph (an ordered dict).
    device "cpu": the model is built and run for real on CPU tensors, once, at the symbols' values
    (Note [Data-dependent sizes]): the graph has fixed sizes, those of the exported input."""
    specs = [parse_input_spec(s) for s in inputs]
    if not specs:
        raise ExportError("no --input given")
    on_cpu = device == "cpu"
    if on_cpu:
        specs = _bound_specs(specs, symbols, builder_symbols)
    loss_fn = loss if callable(loss) else None
    if loss_fn is not None:  # the user's loss on the output (--loss FILE.py:FUNC): the last spec is its target
        if specs[-1].name != "target":
            raise ExportError("--loss FILE.py:FUNC needs --target SPEC (the target's shape)")
        loss = "output"
    model_specs = specs[:-1] if loss_fn is not None else specs
    syms, defaults, probes = plan_probes(specs, symbols, probe_batch)
    takes = list(builder_symbols or [])
    graphs, tensors, routings = [], [], []
    model = lora = quantize = None
    for binding in probes:
        if model is None or any(s in takes for s in syms):
            # a peft LoRA model: its base model is recorded, the adapters become the "lora" key
            model = build_on_cpu(builder, symbols) if on_cpu else \
                build_on_meta(builder, {s: binding[s] for s in takes if s in binding})
            model, lora, _ = peft_lora.strip(model)
            # bitsandbytes base layers (QLoRA): plain Linears, the quantization the "quantize_base" key
            model, quantize = bnb_base.strip(model)
            model.train()
        torch.manual_seed(0)
        args = [_make_input(sp, binding, "cpu" if on_cpu else "meta") for sp in specs]
        names = [sp.name or "input%d" % i for i, sp in enumerate(specs)]
        names = _forward_arg_names(model, names[:len(model_specs)], model_specs) + names[len(model_specs):]
        pnames = {id(p): n for n, p in reversed(list(model.named_parameters()))}
        bnames = {id(b): n for n, b in reversed(list(model.named_buffers()))}
        try:
            with _hf_unpacked():
                cx, out = record(model, args, names, pnames, bnames, _by_name(model, model_specs), loss_fn, on_cpu)
        except Exception as e:  # noqa: BLE001 - the model's own error, with where it happened
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            needs_values = not on_cpu and any(m in first for m in _NEEDS_VALUES)
            if "_local_scalar_dense" in first:
                first = "the Python code reads a tensor's value (data-dependent control flow)"
            msg = "running %s on %s tensors failed: %s: %s%s" % (
                type(model).__name__, device, type(e).__name__, first, _user_frame(e))
            if needs_values:
                raise DataDependentError(msg, sum(p.numel() * p.element_size() for p in model.parameters())) from e
            raise ExportError(msg) from e
        if cx.unsupported:
            raise UnsupportedError(cx.unsupported)
        graphs.append(probe_graph(cx, out, specs, names, loss, model))
        tensors.append(names)
        routings.append((cx.routed_symbols_order, list(cx.routing_counts)))
    g = finish_graph(graphs, probes, syms, defaults, specs, tensors[0], name, provenance, outputs_held)
    return bnb_base.annotate(peft_lora.annotate(_routed(g, routings, probes, syms, defaults), lora), quantize)


def _routed(g, routings, probes, syms, defaults):
    """The graph's routings (Note [Routed token counts]): each bincount's counted elements as a
    product of symbols and its experts (key "routing"), and a symbol per expert, routed<L>_e<i>,
    whose default is the balanced count at the default sizes."""
    experts = routings[0][0]
    if not experts:
        return g
    if any(r[0] != experts for r in routings):
        raise ExportError("the number of routed layers depends on the symbol values")
    layers = []
    for layer, e in enumerate(experts):
        counted = [r[1][layer][1] for r in routings]
        tokens = symbolize_int(counted, probes, syms)
        if tokens is None:
            raise ExportError("routing %d counts %s elements at %s: not a product of symbols" % (layer, counted, probes))
        n = tokens if isinstance(tokens, int) else _eval_product(tokens, defaults)
        layers.append({"tokens": tokens, "experts": e})
        g.setdefault("symbols", {}).update(
            ("routed%d_e%d" % (layer, i), v) for i, v in enumerate(balanced(n, e)))
    out = {}
    for k, v in g.items():  # "routing" after "symbols" (or "provenance")
        out[k] = v
        if k == ("symbols" if "symbols" in g else "provenance"):
            out["routing"] = layers
    return out


def _eval_product(text, binding):
    n = 1
    for f in str(text).split("*"):
        n *= int(f) if f.isdigit() else int(binding[f])
    return n


def _by_name(model, specs):
    """Every input names a forward argument that is not at its position (transformers' labels=,
    pixel_values=): the model is called with keywords."""
    try:
        params = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return False
    names = [sp.name for sp in specs]
    return all(names) and all(n in params for n in names) and names != params[:len(names)]


def _forward_arg_names(model, names, specs):
    try:
        params = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    out = []
    for i, (n, sp) in enumerate(zip(names, specs)):
        out.append(sp.name or (params[i] if i < len(params) else n))
    if len(set(out)) != len(out):
        raise ExportError("duplicate input names %s" % out)
    return out


@contextlib.contextmanager
def _hf_unpacked():
    """transformers' causal-mask code asks whether the position ids pack several sequences per row
    (masking_utils.find_packed_sequence_indices reads a tensor's value, which meta tensors lack);
    ids made by the model itself (no position_ids argument) never do, and the answer is None. Its
    few int64 temporaries (batch x seq each, freed at once) are not recorded (Note [Hugging Face
    decoders] in docs/exporter.md)."""
    mu = sys.modules.get("transformers.masking_utils")
    orig = getattr(mu, "find_packed_sequence_indices", None)
    if orig is None:
        yield
        return
    # (and warn_if_padding_and_no_attention_mask, a warning that reads input_ids' values: BERT, DeBERTa)
    pm = sys.modules["transformers.modeling_utils"].PreTrainedModel
    warn = pm.__dict__.get("warn_if_padding_and_no_attention_mask")
    # (and fast_all(padding_mask), whether a mask the model made itself pads nothing: it does not)
    fast_all = getattr(mu, "fast_all", None)
    mu.find_packed_sequence_indices = lambda position_ids: None
    pm.warn_if_padding_and_no_attention_mask = lambda self, input_ids, attention_mask: None
    if fast_all is not None:
        mu.fast_all = lambda tensor: True
    try:
        yield
    finally:
        mu.find_packed_sequence_indices = orig
        if fast_all is not None:
            mu.fast_all = fast_all
        pm.warn_if_padding_and_no_attention_mask = warn
