"""Handlers for elementwise arithmetic, matrix products, reductions, tensor creation, dtype
casts, losses and torchvision's functional helpers."""
import operator

import torch
import torch.nn.functional as F

from .registry import T, TRef, Unsupported, dtype_name, function, method


# =================================================================================================
# arithmetic
# =================================================================================================

def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _broadcast(a, b):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def _arith(op, inplace=False, reverse=False):
    def h(cx, a, b, *, alpha=1, out=None):
        if reverse:
            a, b = b, a
        if out is not None:
            raise Unsupported("%s(out=...)" % op)
        attrs = {}
        if isinstance(a, TRef) and isinstance(b, TRef):
            if alpha != 1:
                attrs["alpha"] = alpha
            attrs["inplace"] = inplace
            return cx.emit(op, [a, b], attrs, shape=cx.out_shape() or _broadcast(a.shape, b.shape))
        if isinstance(a, TRef) and _is_num(b):
            if alpha != 1:
                b = b * alpha
            return cx.emit(op, [a], {"scalar": b, "inplace": inplace}, shape=a.shape)
        if _is_num(a) and isinstance(b, TRef):
            if inplace:
                raise Unsupported("in-place %s on a Python number" % op)
            if op in ("add", "mul"):
                return cx.emit(op, [b], {"scalar": a, "inplace": False}, shape=b.shape)
            if op == "sub" and alpha == 1:
                # number - X: rsub.Scalar, which wraps the number inside the call (Note [Scalar
                # overloads]); it saves nothing, its grad is -grad
                return cx.emit("sub", [b], {"scalar": a, "inplace": False, "reverse": True, "scalar_overload": True},
                               shape=b.shape)
            raise Unsupported("number %s tensor (%s)" % ({"sub": "-", "div": "/"}.get(op, op),
                                                         "rsub" if op == "sub" else "reciprocal"))
        raise Unsupported("%s of %s and %s" % (op, type(a).__name__, type(b).__name__))
    return h


for _op, _fns, _meths, _ifns, _imeths in (
        ("add", [operator.add, torch.add], ["add"], [operator.iadd], ["add_"]),
        ("sub", [operator.sub, torch.sub], ["sub"], [operator.isub], ["sub_"]),
        ("mul", [operator.mul, torch.mul], ["mul"], [operator.imul], ["mul_"]),
        ("div", [operator.truediv, torch.div], ["div"], [operator.itruediv], ["div_"])):
    function(*_fns)(_arith(_op))
    method(*_meths)(_arith(_op))
    function(*_ifns)(_arith(_op, inplace=True))
    method(*_imeths)(_arith(_op, inplace=True))
function(torch.rsub)(_arith("sub", reverse=True))


@function(torch.masked_fill)
@method("masked_fill")
def f_masked_fill(cx, x, mask, value):
    return _masked_fill(cx, x, mask, value, False)


@method("masked_fill_")
def f_masked_fill_(cx, x, mask, value):
    return _masked_fill(cx, x, mask, value, True)


def _masked_fill(cx, x, mask, value, inplace):
    x, mask = T(x), T(mask, "mask")
    if isinstance(value, TRef):
        raise Unsupported("masked_fill with a tensor value")
    if inplace and x.base is not None:  # masked_fill_ on a slice/select view: CopySlices
        from .ops_shape import view_root, write_view
        root = view_root(x)
        write_view(cx, root, [root, x, mask], {"write": "masked_fill", "value": float(value)})
        return x
    return cx.emit("masked_fill", [x, mask], {"value": float(value), "inplace": inplace}, shape=x.shape)


# =================================================================================================
# matrix products
# =================================================================================================

@function(F.linear)
def f_linear(cx, x, weight, bias=None):
    x, weight = T(x), T(weight)
    return cx.emit("linear", [x, weight, bias], shape=x.shape[:-1] + weight.shape[:1])


@function(torch.matmul, operator.matmul)
@method("matmul")
def f_matmul(cx, a, b):
    return cx.emit("matmul", [T(a), T(b)], shape=cx.out_shape())


@function(torch.mm)
@method("mm")
def f_mm(cx, a, b):
    return cx.emit("mm", [T(a), T(b)], shape=cx.out_shape())


@function(torch.bmm)
@method("bmm")
def f_bmm(cx, a, b):
    return cx.emit("bmm", [T(a), T(b)], shape=cx.out_shape())


@function(torch.baddbmm)
@method("baddbmm")
def f_baddbmm(cx, s, b1, b2, *, beta=1, alpha=1):
    return cx.emit("baddbmm", [T(s), T(b1), T(b2)], {"beta": beta, "alpha": alpha}, shape=cx.out_shape())


_sdpa = getattr(F, "scaled_dot_product_attention", None)


@function(_sdpa)
def f_sdpa(cx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    q = T(q)
    attrs = {"dropout_p": float(dropout_p), "is_causal": bool(is_causal)}
    if enable_gqa:  # k and v may have fewer heads than q (grouped-query attention, Note [SDPA GQA])
        attrs["enable_gqa"] = True
    if scale is not None:
        attrs["scale"] = scale
    return cx.emit("scaled_dot_product_attention", [q, T(k), T(v), attn_mask], attrs,
                   shape=q.shape[:-1] + T(v).shape[-1:])


# =================================================================================================
# reductions, creation, casts, losses
# =================================================================================================

def _reduce(op):
    def h(cx, x, dim=None, keepdim=False, *, dtype=None):
        x = T(x)
        if dtype is not None and dtype != x.dtype:
            raise Unsupported("%s(dtype=%s) (a dtype cast)" % (op, dtype))
        if isinstance(dim, (list, tuple)):
            dim = [int(d) for d in dim]
        elif dim is not None:
            dim = int(dim)
        return cx.emit(op, [x], {"dim": dim, "keepdim": bool(keepdim)}, shape=cx.out_shape())
    return h


def _var(cx, x, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """torch.var / Tensor.var (var.correction; `unbiased` is correction 1 or 0): keeps self (Note [Variance])."""
    x = T(x)
    if out is not None:
        raise Unsupported("var(out=...)")
    if isinstance(dim, bool):  # var(input, unbiased)
        dim, unbiased = None, dim
    if isinstance(dim, (list, tuple)):
        dim = [int(d) for d in dim]
    elif dim is not None:
        dim = int(dim)
    if correction is None:
        correction = 0 if unbiased is False else 1
    return cx.emit("var", [x], {"dim": dim, "keepdim": bool(keepdim), "correction": float(correction)},
                   shape=cx.out_shape())


function(torch.var)(_var)
method("var")(_var)


def _maximum(op):
    def h(cx, a, b, *, out=None):
        if out is not None or not isinstance(a, TRef) or not isinstance(b, TRef):
            raise Unsupported("%s of %s and %s" % (op, type(a).__name__, type(b).__name__))
        return cx.emit(op, [a, b], {}, shape=cx.out_shape() or _broadcast(a.shape, b.shape))
    return h


MAXIMUM = {"max": _maximum("maximum"), "min": _maximum("minimum")}  # torch.max(a, b) / torch.min(a, b) (ops_llm)
for _op in ("maximum", "minimum"):  # Note [Elementwise maximum]
    function(getattr(torch, _op))(_maximum(_op))
    method(_op)(_maximum(_op))


function(torch.mean)(_reduce("mean"))
method("mean")(_reduce("mean"))
function(torch.sum)(_reduce("sum"))
method("sum")(_reduce("sum"))


@function(torch.arange)
def f_arange(cx, *args, dtype=None, device=None, layout=None, requires_grad=False, pin_memory=False, out=None):
    if len(args) == 1:
        start, end, step = 0, args[0], 1
    elif len(args) == 2:
        start, end, step = args[0], args[1], 1
    else:
        start, end, step = args
    odt = cx.out_dtype() or torch.int64
    shape = cx.out_shape()
    n = int(shape[0]) if shape is not None else int(end) - int(start)
    # only the length matters to memory: arange(start, end, step) is written as arange(0, length)
    return cx.emit("arange", [], {"end": n, "dtype": dtype_name(odt)}, shape=(n,), dtype=odt)


def f_factory(cx, *args, **kwargs):
    """torch.zeros/ones/full/empty/tensor/linspace(...) called in forward: a new tensor (the `full` op;
    linspace and logspace fill their one output, RAFT's correlation lookup grid)."""
    shape, odt = cx.out_shape(), cx.out_dtype()
    if shape is None:
        raise Unsupported("a tensor factory without a tensor result")
    return cx.emit("full", [], {"shape": [int(d) for d in shape], "dtype": dtype_name(odt)}, shape=shape, dtype=odt)


for _f in ("zeros", "ones", "full", "empty", "tensor", "as_tensor", "scalar_tensor", "linspace", "logspace"):
    function(getattr(torch, _f, None))(f_factory)


def _cast_alias(cx, x, *args, **kwargs):
    """.to / .float() / .half() & co.: the tensor itself when the dtype stays, else a to_dtype op
    (_to_copy; Note [Padding and resampling])."""
    x = T(x)
    odt = cx.out_dtype()
    if odt is None or odt == x.dtype:
        return x
    dtype_name(x.dtype), dtype_name(odt)  # Unsupported for a dtype memsim lacks
    return cx.emit("to_dtype", [x], {"dtype": dtype_name(odt)}, shape=x.shape, dtype=odt)


for _m in ("to", "float", "type_as", "double", "half", "bfloat16", "long", "int", "bool", "type", "cpu", "cuda"):
    method(_m)(_cast_alias)


@function(F.cross_entropy)
def f_cross_entropy(cx, x, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                    reduction="mean", label_smoothing=0.0):
    if weight is not None:
        raise Unsupported("cross_entropy(weight=...)")
    return cx.emit("cross_entropy", [T(x), T(target)], {"reduction": reduction, "label_smoothing": label_smoothing},
                   shape=cx.out_shape())


@function(F.nll_loss)
def f_nll_loss(cx, x, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    if weight is not None:
        raise Unsupported("nll_loss(weight=...)")
    return cx.emit("nll_loss", [T(x), T(target)], {"reduction": reduction}, shape=cx.out_shape())


@function(F.binary_cross_entropy_with_logits)
def f_bce_with_logits(cx, x, target, weight=None, size_average=None, reduce=None, reduction="mean",
                      pos_weight=None):
    if weight is not None or pos_weight is not None:
        raise Unsupported("binary_cross_entropy_with_logits(weight=..., pos_weight=...)")
    return cx.emit("binary_cross_entropy_with_logits", [T(x), T(target)], {"reduction": reduction},
                   shape=cx.out_shape())


@function(F.binary_cross_entropy)
def f_bce(cx, x, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if weight is not None:
        raise Unsupported("binary_cross_entropy(weight=...)")
    return cx.emit("binary_cross_entropy", [T(x), T(target)], {"reduction": reduction}, shape=cx.out_shape())


@function(F.smooth_l1_loss)
def f_smooth_l1(cx, x, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    if beta == 0:  # smooth_l1_loss(beta=0) is l1_loss
        return f_l1_loss(cx, x, target, reduction=reduction)
    return cx.emit("smooth_l1_loss", [T(x), T(target)], {"reduction": reduction, "beta": float(beta)},
                   shape=cx.out_shape())


@function(F.huber_loss)
def f_huber(cx, x, target, reduction="mean", delta=1.0, weight=None):
    if weight is not None:
        raise Unsupported("huber_loss(weight=...)")
    return cx.emit("huber_loss", [T(x), T(target)], {"reduction": reduction, "delta": float(delta)},
                   shape=cx.out_shape())


@function(F.l1_loss)
def f_l1_loss(cx, x, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """l1_loss is the composite (input - target).abs() and its reduction (aten/src/ATen/native/Loss.cpp)."""
    x, target = T(x), T(target)
    if weight is not None:
        raise Unsupported("l1_loss(weight=...)")
    d = cx.emit("sub", [x, target], {"inplace": False}, shape=_broadcast(x.shape, target.shape))
    a = cx.emit("abs", [d], shape=d.shape)
    if reduction == "none":
        return a
    return cx.emit(reduction, [a], {"keepdim": False}, shape=())


@function(F.mse_loss)
def f_mse_loss(cx, x, target, size_average=None, reduce=None, reduction="mean", weight=None):
    if weight is not None:  # 2.14's weighted form: recorded as it runs
        raise Unsupported("F.mse_loss with a weight")
    return cx.emit("mse_loss", [T(x), T(target)], {"reduction": reduction}, shape=cx.out_shape())


@function(F.soft_margin_loss)
def f_soft_margin(cx, x, target, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = torch.nn._reduction.legacy_get_string(size_average, reduce)
    return cx.emit("soft_margin_loss", [T(x), T(target)], {"reduction": reduction}, shape=cx.out_shape())


# torch._assert and friends return None: they never reach a handler (no tensor in the value).


# =================================================================================================
# torchvision functional helpers (torch.fx.wrap'ed in torchvision, so they arrive as call_function)
# =================================================================================================

try:
    from torchvision.ops import stochastic_depth as _tv_stochastic_depth
except Exception:  # noqa: BLE001 - torchvision is optional
    _tv_stochastic_depth = None


@function(_tv_stochastic_depth)
def f_stochastic_depth(cx, x, p, mode, training=True):
    x = T(x)
    if not training or p == 0.0:
        return x  # torchvision returns the input itself
    return cx.emit("stochastic_depth", [x], {"p": float(p), "mode": mode, "training": True}, shape=x.shape)


# =================================================================================================
# vector norms and F.normalize (Note [Vector norms] in docs/op-rules.md)
# =================================================================================================

def _vector_norm(cx, x, ord, dim, keepdim, dtype=None):
    x = T(x)
    if dtype is not None and dtype != x.dtype:
        raise Unsupported("vector_norm(dtype=%s) (a dtype cast)" % dtype)
    if isinstance(ord, str) or ord is None:
        ord = 2.0 if ord in (None, "fro") else ord
    if isinstance(ord, str) or ord != ord or ord in (float("inf"), float("-inf")):
        raise Unsupported("vector norm of order %r" % (ord,))
    if isinstance(dim, (list, tuple)):
        dim = [int(d) for d in dim]
    elif dim is not None:
        dim = int(dim)
    return cx.emit("vector_norm", [x], {"ord": float(ord), "dim": dim, "keepdim": bool(keepdim)},
                   shape=cx.out_shape())


@function(torch.linalg.vector_norm)
def f_vector_norm(cx, x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    return _vector_norm(cx, x, ord, dim, keepdim, dtype)


@function(torch.norm)
@method("norm")
def f_norm(cx, x, p="fro", dim=None, keepdim=False, dtype=None, out=None):
    """torch.norm / Tensor.norm with a number p (or 'fro' over the given dims) is a vector norm
    (torch/functional.py: linalg.vector_norm under 2.x, aten::norm under 1.13; same memory)."""
    if isinstance(dim, (list, tuple)) and len(dim) == 2 and p == "fro" and T(x).ndim > 2:
        raise Unsupported("torch.norm(p='fro') over a matrix of a batch")
    return _vector_norm(cx, x, p, dim, keepdim, dtype)


@function(torch.linalg.norm)
def f_linalg_norm(cx, x, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    x = T(x)
    if isinstance(dim, (list, tuple)) and len(dim) == 2 or (dim is None and ord is not None and x.ndim == 2):
        raise Unsupported("torch.linalg.norm of a matrix (matrix_norm)")
    return _vector_norm(cx, x, ord, dim, keepdim, dtype)


@function(F.normalize)
def f_normalize(cx, x, p=2.0, dim=1, eps=1e-12, out=None):
    """torch/nn/functional.py: input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input),
    then input / denom."""
    x = T(x)
    if out is not None:
        raise Unsupported("F.normalize(out=...)")
    d = dim + x.ndim if dim < 0 else dim
    nshape = tuple(1 if i == d else s for i, s in enumerate(x.shape))
    n = cx.emit("vector_norm", [x], {"ord": float(p), "dim": int(dim), "keepdim": True}, shape=nshape)
    n = cx.emit("clamp", [n], {"inplace": False, "min": float(eps)}, shape=nshape)
    n = cx.emit("expand", [n], {"sizes": list(x.shape)}, shape=x.shape)
    return cx.emit("div", [x, n], {"inplace": False}, shape=x.shape)
