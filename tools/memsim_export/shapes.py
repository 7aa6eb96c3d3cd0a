"""Shape propagation that records every node's value in a compact form.

Tensors become :class:`TInfo` (shape, dtype); Python scalars, torch.Size, tuples and lists are
kept as plain values; everything else becomes an :class:`Opaque` marker.  Runs on ``meta``
tensors when possible (instant, no memory), else on CPU with the given inputs.
"""
import torch
import torch.fx as fx

try:
    from torch.fx.passes.shape_prop import ShapeProp as _Base
except ImportError:  # pragma: no cover - very old torch
    _Base = fx.Interpreter


class TInfo:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype

    def __repr__(self):
        return "TInfo(%s, %s)" % (list(self.shape), self.dtype)


class Opaque:
    __slots__ = ("type",)

    def __init__(self, obj):
        self.type = type(obj).__name__

    def __repr__(self):
        return "Opaque(%s)" % self.type


def summarize(v):
    if isinstance(v, torch.Tensor):
        return TInfo(v.shape, v.dtype)
    if isinstance(v, torch.Size):
        return tuple(int(s) for s in v)
    if isinstance(v, (bool, int, float, str, type(None), torch.dtype, torch.device, slice, type(Ellipsis))):
        return v
    if isinstance(v, tuple) and hasattr(v, "_fields"):  # namedtuple
        return type(v)(*[summarize(x) for x in v]) if _rebuildable(v) else tuple(summarize(x) for x in v)
    if isinstance(v, tuple):
        return tuple(summarize(x) for x in v)
    if isinstance(v, list):
        return [summarize(x) for x in v]
    if isinstance(v, dict):
        return {k: summarize(x) for k, x in v.items()}
    return Opaque(v)


def _rebuildable(v):
    try:
        type(v)(*list(v))
        return True
    except Exception:
        return False


class RecordingShapeProp(_Base):
    """ShapeProp that also keeps ``values[node.name]`` = summarize(result) for every node."""

    def __init__(self, module):
        super().__init__(module)
        self.values = {}

    def run_node(self, n):
        result = super().run_node(n)
        self.values[n.name] = summarize(result)
        return result


def propagate(gm, inputs):
    """Run ``gm`` on ``inputs`` (no grad) and return {node name: summarized value}."""
    sp = RecordingShapeProp(gm)
    with torch.no_grad():
        if hasattr(sp, "propagate"):
            sp.propagate(*inputs)
        else:  # pragma: no cover
            sp.run(*inputs)
    return sp.values
