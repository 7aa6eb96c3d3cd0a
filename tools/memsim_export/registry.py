"""Handler tables and the helpers every handler uses.

The converter (:mod:`memsim_export.convert`) maps fx nodes through three tables: modules by class,
functions by object, Tensor methods by name.  Handler modules (:mod:`.ops_nn`, :mod:`.ops_pool`, :mod:`.ops_math`,
:mod:`.ops_shape`, :mod:`.expand`) fill them with the ``@module`` / ``@function`` / ``@method``
decorators defined here, and emit ops as :class:`TRef` tensors; :class:`Unsupported` reports an
op memsim cannot represent.
"""
import torch

MODULE_HANDLERS = {}   # nn.Module class -> handler(cx, mod, path, *args, **kwargs)
FUNC_HANDLERS = {}     # function object -> handler(cx, *args, **kwargs)
METHOD_HANDLERS = {}   # Tensor method name -> handler(cx, self, *args, **kwargs)
PROPERTY_HANDLERS = {} # Tensor property ("T", "mT") -> handler(cx, self), recorded execution only
ATEN_HANDLERS = {}     # ATen op ("aten.view.default" or packet name "view") -> handler(cx, *args, **kwargs)


class TRef:
    """A tensor in the memsim graph (by name) with its concrete shape in this probe."""
    __slots__ = ("name", "shape", "dtype", "base")

    def __init__(self, name, shape, dtype=torch.float32, base=None):
        self.base = base  # the tensor a slice/select view was taken of (writes into views)
        self.name = name
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = dtype

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return "TRef(%s, %s)" % (self.name, self.shape)


class Unsupported(Exception):
    def __init__(self, what, detail=""):
        super().__init__(what)
        self.what = what
        self.detail = detail


def module(*classes):
    def deco(fn):
        for c in classes:
            MODULE_HANDLERS[c] = fn
        return fn
    return deco


def function(*fns):
    def deco(fn):
        for f in fns:
            if f is not None:
                FUNC_HANDLERS[f] = fn
        return fn
    return deco


def method(*names):
    def deco(fn):
        for n in names:
            METHOD_HANDLERS[n] = fn
        return fn
    return deco


def aten(*names):
    def deco(fn):
        for n in names:
            ATEN_HANDLERS[n] = fn
        return fn
    return deco


def dtype_name(dt):
    return {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
            torch.float64: "float64", torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8",
            torch.bool: "bool"}.get(dt) or _bad_dtype(dt)


def _bad_dtype(dt):
    raise Unsupported("dtype %s" % dt)


def _ilist(v):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return int(v)


def _pair_list(v, n=2):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return [int(v)] * n


def T(x, what="input"):
    if not isinstance(x, TRef):
        raise Unsupported("non-tensor %s %r" % (what, x))
    return x


def norm_dim(d, ndim):
    return d + ndim if d < 0 else d


def _unary(op, extra=None):
    def h(cx, x, *rest, inplace=False, **kw):
        x = T(x)
        attrs = {"inplace": bool(inplace)}
        if extra:
            attrs.update(extra(*rest, **kw))
        return cx.emit(op, [x], attrs, shape=x.shape)
    return h


def _tuple_arg(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return list(args[0])
    return list(args)


def view_out_shape(shape_in, shape):
    numel = 1
    for s in shape_in:
        numel *= s
    out = list(shape)
    if -1 in out:
        known = 1
        for s in out:
            if s != -1:
                known *= s
        out[out.index(-1)] = numel // known if known else 0
    return tuple(out)
