"""export_model(): nn.Module → memsim graph dict (docs/graph-format.md); JSON writing."""
import contextlib
import copy
import inspect
import io
import json
import re

import torch

from . import convert, expand, expand_rnn, peft_lora, recorded  # noqa: F401  (expand, expand_rnn register module handlers)
from .convert import Context, TRef, dtype_name
from .errors import ExportError, UnsupportedError

# --loss NAME for elementwise losses on a target shaped like the output: the op each appends
# (l1 is the composite F.l1_loss runs: sub, abs, mean).
ELEMENTWISE_LOSSES = {"mse": "mse_loss", "bce_logits": "binary_cross_entropy_with_logits", "bce": "binary_cross_entropy",
                      "smooth_l1": "smooth_l1_loss", "huber": "huber_loss", "l1": None}
from .shapes import propagate
from .symbols import merge, plan_probes
from .tracer import trace

_DTYPES = {"float32": torch.float32, "float": torch.float32, "float16": torch.float16, "half": torch.float16,
           "bfloat16": torch.bfloat16, "float64": torch.float64, "double": torch.float64, "int64": torch.int64,
           "long": torch.int64, "int32": torch.int32, "int": torch.int32, "uint8": torch.uint8, "bool": torch.bool}
_SYM = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


class InputSpec:
    """One model input: name (None = the forward argument's name), dims (ints / symbol names),
    dtype name, and the value range [low, high) used for integer inputs during shape propagation."""

    def __init__(self, dims, dtype="float32", name=None, low=None, high=None):
        self.dims = list(dims)
        self.dtype = dtype
        self.name = name
        self.low = low
        self.high = high

    def __repr__(self):
        return "InputSpec(%r, %r, name=%r, low=%r, high=%r)" % (self.dims, self.dtype, self.name, self.low, self.high)

    def to_string(self):
        s = ""
        if self.name:
            s += self.name + "="
        if self.dtype != "float32":
            s += self.dtype + ":"
        s += ",".join(str(d) for d in self.dims)
        if self.low is not None or self.high is not None:
            s += "@%s:%s" % (self.low if self.low is not None else 0, self.high if self.high is not None else 2)
        return s


def materialize_lazy(model, make_args):
    """nn.LazyLinear & co. take their shapes from a first forward (LazyModuleMixin): for a model
    with uninitialized parameters or buffers, one forward under no_grad on make_args()'s
    (args, kwargs), as its first training step would run; a model without lazy modules is left
    as it is and make_args is not called."""
    from torch.nn.parameter import UninitializedBuffer, UninitializedParameter
    if model is None or not any(isinstance(t, (UninitializedParameter, UninitializedBuffer))
                                for t in list(model.parameters()) + list(model.buffers())):
        return model
    args, kwargs = make_args()
    with torch.no_grad():
        model(*args, **kwargs)
    return model


def parse_input_spec(text):
    """``[name=][dtype:]d0,d1,...[@low:high]`` e.g. ``batch,3,224,224``, ``ids=int64:batch,128@0:30522``."""
    if isinstance(text, InputSpec):
        return text
    s = text.strip()
    name = None
    low = high = None
    m = re.match(r"^([A-Za-z_][A-Za-z_0-9]*)=(.*)$", s)
    if m:
        name, s = m.group(1), m.group(2)
    if "@" in s:
        s, rng = s.split("@", 1)
        try:
            lo, hi = rng.split(":")
            low, high = int(lo), int(hi)
        except ValueError:
            raise ExportError("bad value range %r in input spec %r (expected @low:high)" % (rng, text))
    dtype = "float32"
    if ":" in s:
        dt, s = s.split(":", 1)
        if dt not in _DTYPES:
            raise ExportError("unknown dtype %r in input spec %r (one of %s)" % (dt, text, ", ".join(sorted(_DTYPES))))
        dtype = dtype_name(_DTYPES[dt])
    dims = []
    for tok in s.split(","):
        tok = tok.strip()
        if not tok:
            raise ExportError("empty dimension in input spec %r" % text)
        if re.match(r"^\d+$", tok):
            dims.append(int(tok))
        elif _SYM.match(tok):
            dims.append(tok)
        else:
            raise ExportError("bad dimension %r in input spec %r (an integer or a symbol name)" % (tok, text))
    return InputSpec(dims, dtype, name, low, high)


def _make_input(spec, binding, device):
    shape = [binding[d] if isinstance(d, str) else d for d in spec.dims]
    dt = _DTYPES[spec.dtype]
    if device == "meta":
        return torch.empty(shape, dtype=dt, device="meta")
    if dt.is_floating_point:  # @low:high: uniform in [low, high) (a variance that must be positive)
        if spec.low is not None:
            return torch.empty(shape, dtype=dt).uniform_(spec.low, spec.high)
        return torch.randn(shape, dtype=dt)
    if dt == torch.bool:
        return torch.randint(0, 2, shape).bool()
    low = 0 if spec.low is None else spec.low
    high = 2 if spec.high is None else spec.high
    return torch.randint(low, high, shape, dtype=dt)


def _forward_names(model):
    try:
        sig = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None, {}
    names = []
    defaults = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        names.append(p.name)
        if p.default is not p.empty:
            defaults[p.name] = p.default
    return names, defaults


def export_model(model, inputs, loss="cross_entropy", symbols=None, name="model", provenance=None,
                 probe_batch=(2, 3), device="auto", outputs_held=True, rebuild=None):
    """Trace ``model`` (put in training mode) and return the memsim graph as an ordered dict.

    rebuild: {symbol: value} → model, for builders that take symbols (``def build(seq)``): the
    model is rebuilt and traced per probe, so parameters and buffers sized by a symbol (a table
    of positions) become symbolic.

    inputs: list of InputSpec or spec strings.  symbols: {name: default value}; ``batch`` defaults
    to 32.  loss: "cross_entropy", "none", "output" or an ELEMENTWISE_LOSSES key.  device: "meta", "cpu" or "auto" (meta, falling
    back to CPU when an op has no meta kernel or the model mixes devices).
    """
    if loss not in ("cross_entropy", "output", "none", None) and loss not in ELEMENTWISE_LOSSES:
        raise ExportError("unknown loss %r (cross_entropy, %s, output, none)" % (loss, ", ".join(ELEMENTWISE_LOSSES)))
    # A peft LoRA model: its base model is traced and the adapters become the "lora" key.
    model, lora, restore = peft_lora.strip(model)
    try:
        g = _export_model(model, inputs, loss, symbols, name, provenance, probe_batch, device, outputs_held, rebuild)
    finally:
        restore()
    return peft_lora.annotate(g, lora)


def _export_model(model, inputs, loss, symbols, name, provenance, probe_batch, device, outputs_held, rebuild):
    specs = [parse_input_spec(s) for s in inputs]
    if not specs:
        raise ExportError("no --input given")
    model.train()
    fwd_names, fwd_defaults = _forward_names(model)
    concrete = None
    if fwd_names is not None:
        if len(specs) > len(fwd_names):
            raise ExportError("%d inputs given but %s.forward takes %d" % (len(specs), type(model).__name__,
                                                                           len(fwd_names)))
        rest = fwd_names[len(specs):]
        missing = [n for n in rest if n not in fwd_defaults]
        if missing:
            raise ExportError("no --input for forward argument(s) %s" % ", ".join(missing))
        if rest:
            concrete = {n: fwd_defaults[n] for n in rest}
    gm = trace(model, concrete_args=concrete)

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    n_ph = len(placeholders)
    input_names = []
    for i, spec in enumerate(specs):
        nm = spec.name or (placeholders[i].target if i < n_ph else "input%d" % i)
        nm = nm.lstrip("*")
        input_names.append(nm)
    if len(set(input_names)) != len(input_names):
        raise ExportError("duplicate input names %s" % input_names)
    # placeholders for concrete args are still in the graph in some torch versions: feed their defaults
    extra_ph = placeholders[len(specs):]

    syms, defaults, probes = plan_probes(specs, symbols, probe_batch)

    pnames = {}
    for n, p in model.named_parameters():
        pnames.setdefault(id(p), n)
    bnames = {}
    for n, b in model.named_buffers():
        bnames.setdefault(id(b), n)

    graphs = []
    runner = _Runner(gm, device)
    for k, binding in enumerate(probes):
        if rebuild is not None and k > 0:
            model = peft_lora.strip(rebuild(binding))[0]
            model.train()
            gm = trace(model, concrete_args=concrete)
            runner = _Runner(gm, device)
            pnames = {id(p): n for n, p in reversed(list(model.named_parameters()))}
            bnames = {id(b): n for n, b in reversed(list(model.named_buffers()))}
        values = runner.values(lambda dev: [_make_input(s, binding, dev) for s in specs], extra_ph)
        cx = Context(gm, values, pnames, bnames)
        cx.used.update(input_names)
        cx.used.update(pnames.values())
        cx.used.update(bnames.values())
        out_value = cx.run(input_names + [ph.target for ph in extra_ph])
        if cx.unsupported:
            raise UnsupportedError(cx.unsupported)
        graphs.append(probe_graph(cx, out_value, specs, input_names, loss, model))

    return finish_graph(graphs, probes, syms, defaults, specs, input_names, name, provenance, outputs_held)


def probe_graph(cx, out_value, specs, input_names, loss, model):
    """One probe's ops, outputs and loss, with the model's parameters and buffers (for merging)."""
    g = _assemble(cx, out_value, specs, input_names, loss)
    g["parameters"] = [_tensor_json(n, p, p.requires_grad) for n, p in model.named_parameters()]
    g["buffers"] = [_tensor_json(n, b, None) for n, b in model.named_buffers()] + \
        [_tensor_json(n, t, None) for n, t in getattr(cx, "constants", ())]
    return g


def finish_graph(graphs, probes, syms, defaults, specs, input_names, name, provenance, outputs_held):
    """Merges the probes' graphs (symbolic sizes) into the graph document."""
    recorded.reconcile(graphs)  # recorded ops' size relations that hold at every probe
    merged = merge(graphs, probes, syms, "")
    # The release whose rules the graph's ops follow (memsim warns when run under another one).
    g = {"format": "memsim-graph", "version": 1, "name": name, "torch_version": torch.__version__.split("+")[0]}
    if provenance:
        g["provenance"] = provenance
    if syms:
        g["symbols"] = {s: int(defaults[s]) for s in syms}
    g["inputs"] = [{"name": nm, "shape": list(spec.dims), "dtype": spec.dtype}
                   for spec, nm in zip(specs, input_names)] + merged["extra_inputs"]
    g["parameters"] = merged["parameters"]
    g["buffers"] = merged["buffers"]
    g["ops"] = merged["ops"]
    g["outputs"] = merged["outputs"] if outputs_held else []
    if merged.get("loss"):
        g["loss"] = merged["loss"]
    return g


def _tensor_json(name, t, requires_grad):
    d = {"name": name, "shape": [int(s) for s in t.shape], "dtype": dtype_name(t.dtype)}
    if requires_grad is False and t.dtype.is_floating_point:
        d["requires_grad"] = False
    return d


class _Runner:
    """Runs shape propagation on a private copy of the GraphModule (meta first, then CPU)."""

    def __init__(self, gm, device):
        self.gm = gm
        self.device = device
        self._copies = {}
        self.used_device = None

    def _copy(self, dev):
        if dev not in self._copies:
            c = copy.deepcopy(self.gm)
            if dev == "meta":
                c = c.to("meta")
            c.train()
            self._copies[dev] = c
        return self._copies[dev]

    def values(self, make_inputs, extra_ph):
        order = {"auto": ["meta", "cpu"], "meta": ["meta"], "cpu": ["cpu"]}[self.device]
        if self.used_device:
            order = [self.used_device]
        err = None
        for dev in order:
            try:
                args = make_inputs(dev) + [ph.args[0] if ph.args else None for ph in extra_ph]
                if dev == "meta":
                    # factories called in forward (torch.arange(...)) must make meta tensors too;
                    # ShapeProp prints a traceback before re-raising: keep it quiet here
                    with _meta_factories(), contextlib.redirect_stderr(io.StringIO()), \
                            contextlib.redirect_stdout(io.StringIO()):
                        vals = propagate(self._copy(dev), args)
                else:
                    vals = propagate(self._copy(dev), args)
                self.used_device = dev
                return vals
            except Exception as e:  # noqa: BLE001 - report the last one
                err = e
                continue
        raise ExportError("shape propagation failed: %s: %s" % (type(err).__name__, err)) from err


_META_FACTORIES = ("arange", "zeros", "ones", "full", "empty", "rand", "randn", "randint", "linspace")


@contextlib.contextmanager
def _meta_factories(names=_META_FACTORIES):
    """Tensor factories in |names| default to the meta device while the context is active."""
    saved = {n: getattr(torch, n) for n in names if hasattr(torch, n)}

    def wrap(f):
        def g(*a, **k):
            if k.get("device") is None:
                k["device"] = "meta"
            return f(*a, **k)
        return g
    try:
        for n, f in saved.items():
            setattr(torch, n, wrap(f))
        yield
    finally:
        for n, f in saved.items():
            setattr(torch, n, f)


def _flatten_outputs(v, acc):
    if isinstance(v, TRef):
        if v not in acc:
            acc.append(v)
    elif isinstance(v, dict):
        for x in v.values():
            _flatten_outputs(x, acc)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _flatten_outputs(x, acc)
    return acc


def _primary_output(v):
    if isinstance(v, dict):
        for k in ("logits", "out", "output"):
            if isinstance(v.get(k), TRef):
                return v[k]
    if hasattr(v, "_fields"):
        for k in ("logits", "out", "output"):
            if isinstance(getattr(v, k, None), TRef):
                return getattr(v, k)
    outs = _flatten_outputs(v, [])
    return outs[0] if outs else None


def _assemble(cx, out_value, specs, input_names, loss):
    outs = _flatten_outputs(out_value, [])
    if not outs:
        raise ExportError("the model returns no tensor")
    g = {"ops": cx.ops, "outputs": [o.name for o in outs], "extra_inputs": []}
    if loss in (None, "none"):
        return g
    logits = _primary_output(out_value)
    scalar = next((o for o in outs if o.ndim == 0), None)
    if loss == "output" or scalar is not None:
        # the model computes its own loss (a scalar output): its backward starts there; the
        # other outputs (logits returned with the loss) stay held like `out`
        if scalar is None:
            raise ExportError("--loss output needs a scalar output; the outputs have shapes %s"
                              % [list(o.shape) for o in outs])
        g["outputs"] = [o.name for o in outs if o is not scalar]
        g["loss"] = scalar.name
        return g
    ops = cx.ops
    if loss == "cross_entropy":
        if logits.ndim < 2:
            raise ExportError("cross_entropy needs [batch, classes] logits; the output has shape %s"
                              % list(logits.shape))
        tgt_shape = list(logits.shape[:1]) + list(logits.shape[2:])
        lname, tname = logits.name, "target"
        if logits.ndim > 2:
            # token-level loss: logits [..., V] viewed as [-1, V], target [...] viewed as [-1]
            tgt_shape = list(logits.shape[:-1])
            ops.append({"op": "view", "module": "loss", "inputs": [lname], "outputs": ["loss:logits"],
                        "attrs": {"shape": [-1, logits.shape[-1]]}})
            ops.append({"op": "view", "module": "loss", "inputs": ["target"], "outputs": ["loss:target"],
                        "attrs": {"shape": [-1]}})
            lname, tname = "loss:logits", "loss:target"
        g["extra_inputs"].append({"name": "target", "shape": tgt_shape, "dtype": "int64"})
        ops.append({"op": "cross_entropy", "module": "loss", "inputs": [lname, tname], "outputs": ["loss"],
                    "attrs": {"reduction": "mean", "label_smoothing": 0.0}})
    else:
        g["extra_inputs"].append({"name": "target", "shape": list(logits.shape), "dtype": dtype_name(logits.dtype)})
        if loss == "l1":  # the composite F.l1_loss runs: (input - target).abs().mean()
            ops.append({"op": "sub", "module": "loss", "inputs": [logits.name, "target"], "outputs": ["loss:diff"],
                        "attrs": {"inplace": False}})
            ops.append({"op": "abs", "module": "loss", "inputs": ["loss:diff"], "outputs": ["loss:abs"]})
            ops.append({"op": "mean", "module": "loss", "inputs": ["loss:abs"], "outputs": ["loss"],
                        "attrs": {"keepdim": False}})
        else:
            ops.append({"op": ELEMENTWISE_LOSSES[loss], "module": "loss", "inputs": [logits.name, "target"],
                        "outputs": ["loss"], "attrs": {"reduction": "mean"}})
    if "target" in input_names:
        raise ExportError("an input is already named 'target'; rename it (--input name=...)")
    g["loss"] = "loss"
    return g


# ---- JSON ---------------------------------------------------------------------------------------

def _dumps(v):
    return json.dumps(v, separators=(", ", ": "), ensure_ascii=False, allow_nan=False)


def _object_lines(g, indent):
    """One key per line, one list element (input, parameter, op) per line; a nested object holding
    such a list (the `compiled` section's `eager_ops`) the same way."""
    lines, pad = [], " " * indent
    keys = list(g.keys())
    for i, k in enumerate(keys):
        v = g[k]
        comma = "," if i + 1 < len(keys) else ""
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            lines.append("%s%s: [" % (pad, _dumps(k)))
            for j, x in enumerate(v):
                lines.append("%s  %s%s" % (pad, _dumps(x), "," if j + 1 < len(v) else ""))
            lines.append("%s]%s" % (pad, comma))
        elif isinstance(v, dict) and any(isinstance(x, list) and x and isinstance(x[0], dict) for x in v.values()):
            lines.append("%s%s: {" % (pad, _dumps(k)))
            lines += _object_lines(v, indent + 2)
            lines.append("%s}%s" % (pad, comma))
        else:
            lines.append("%s%s: %s%s" % (pad, _dumps(k), _dumps(v), comma))
    return lines


def graph_to_json(g):
    """Deterministic text: one top-level key per line, one list element (input, parameter, op) per line."""
    return "\n".join(["{"] + _object_lines(g, 2) + ["}"]) + "\n"


def write_graph(g, path):
    text = graph_to_json(g)
    if path in (None, "-"):
        import sys
        sys.stdout.write(text)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return text
