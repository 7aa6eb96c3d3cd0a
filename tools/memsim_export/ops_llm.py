"""Handlers for the ops language-model code uses (comparisons, where, exp/log/pow/rsqrt/sqrt/neg/cos/sin,
max/min/amax/logsumexp/topk, gather/scatter, advanced indexing, unbind, tril/triu, cumsum,
repeat_interleave) and for the ATen ops that composite functions such as ``torch.einsum``
decompose into (recorded by :mod:`.record`)."""
import operator

import torch

from . import ops_shape
from .registry import T, TRef, Unsupported, aten, dtype_name, function, method, norm_dim, view_out_shape
from .ops_math import _is_num

# =================================================================================================
# comparisons and where
# =================================================================================================


def _compare(op):
    def h(cx, a, b):
        if isinstance(a, TRef) and isinstance(b, TRef):
            return cx.emit(op, [a, b], shape=cx.out_shape(), dtype=torch.bool)
        if isinstance(a, TRef) and _is_num(b):
            return cx.emit(op, [a], {"scalar": b}, shape=a.shape, dtype=torch.bool)
        raise Unsupported("%s of %s and %s" % (op, type(a).__name__, type(b).__name__))
    return h


for _op, _pyop in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt), ("le", operator.le),
                   ("gt", operator.gt), ("ge", operator.ge)):
    function(getattr(torch, _op), _pyop)(_compare(_op))
    method(_op)(_compare(_op))


@function(torch.where)
@method("where")
def f_where(cx, cond, x=None, y=None):
    if x is None:
        raise Unsupported("torch.where(cond) (data-dependent nonzero)")
    cond = T(cond, "condition")
    attrs, ins = {}, [cond]
    for key, v in (("self", x), ("other", y)):
        if isinstance(v, TRef):
            ins.append(v)
        elif _is_num(v):
            attrs[key] = float(v)
        else:
            raise Unsupported("torch.where with a %s %s" % (type(v).__name__, key))
    dt = next((t.dtype for t in ins[1:]), torch.float32)
    return cx.emit("where", ins, attrs, shape=cx.out_shape(), dtype=cx.out_dtype() or dt)


# =================================================================================================
# unary math
# =================================================================================================

def _unary(op, inplace=False):
    def h(cx, x, *, out=None):
        if out is not None:
            raise Unsupported("%s(out=...)" % op)
        x = T(x)
        return cx.emit(op, [x], {"inplace": inplace} if inplace else None, shape=x.shape)
    return h


for _op in ("exp", "log", "log2", "rsqrt", "sqrt", "neg", "cos", "sin", "floor", "ceil", "trunc"):
    function(getattr(torch, _op))(_unary(_op))
    method(_op)(_unary(_op))
    method(_op + "_")(_unary(_op, inplace=True))
function(operator.neg)(_unary("neg"))


@function(torch.round)
@method("round")
def f_round(cx, x, *, decimals=0):
    """round(x, decimals=d): one output of x's shape, a zeros grad (derivatives.yaml round.decimals)."""
    x = T(x)
    return cx.emit("round", [x], shape=x.shape)


method("negative")(_unary("neg"))


@function(torch.pow, operator.pow)
@method("pow")
def f_pow(cx, x, exponent):
    x = T(x)
    if not _is_num(exponent):
        raise Unsupported("pow with a tensor exponent")
    return cx.emit("pow", [x], {"exponent": float(exponent)}, shape=x.shape)


@function(torch.square)
@method("square")
def f_square(cx, x):
    return f_pow(cx, x, 2)


# =================================================================================================
# value-selecting reductions
# =================================================================================================

def _maxmin(op):
    def h(cx, x, dim=None, keepdim=False, *, out=None):
        x = T(x)
        if isinstance(dim, TRef):  # torch.max(a, b): elementwise, as torch.maximum (Note [Elementwise maximum])
            from . import ops_math
            return ops_math.MAXIMUM[op](cx, x, dim, out=out)
        if dim is None:
            return cx.emit(op, [x], shape=())
        r = cx.out_info()
        shapes = [tuple(r[0].shape), tuple(r[1].shape)]
        outs = cx.emit(op, [x], {"dim": int(dim), "keepdim": bool(keepdim)}, shapes=shapes)
        outs[1].dtype = torch.int64
        return tuple(outs)
    return h


for _op in ("max", "min"):
    function(getattr(torch, _op))(_maxmin(_op))
    method(_op)(_maxmin(_op))


def _dim_reduce(op):
    def h(cx, x, dim=(), keepdim=False):
        x = T(x)
        dims = [int(d) for d in dim] if isinstance(dim, (list, tuple)) else [int(dim)]
        return cx.emit(op, [x], {"dim": dims, "keepdim": bool(keepdim)}, shape=cx.out_shape())
    return h


for _op in ("amax", "logsumexp"):
    function(getattr(torch, _op))(_dim_reduce(_op))
    method(_op)(_dim_reduce(_op))


@function(torch.topk)
@method("topk")
def f_topk(cx, x, k, dim=-1, largest=True, sorted=True):
    x = T(x)
    r = cx.out_info()
    outs = cx.emit("topk", [x], {"k": int(k), "dim": int(dim)}, shapes=[tuple(r[0].shape), tuple(r[1].shape)])
    outs[1].dtype = torch.int64
    return tuple(outs)


# =================================================================================================
# gather / scatter / indexing / unbind / triangular / cumsum / repeat_interleave
# =================================================================================================

@function(torch.gather)
@method("gather")
def f_gather(cx, x, dim, index, *, sparse_grad=False):
    return cx.emit("gather", [T(x), T(index, "index")], {"dim": int(dim)}, shape=cx.out_shape())


def _scatter(inplace):
    def h(cx, x, dim, index, src=None, *, value=None, reduce=None):
        if reduce is not None:
            raise Unsupported("scatter(reduce=...)")
        attrs = {"dim": int(dim), "inplace": inplace}
        ins = [T(x), T(index, "index")]
        if isinstance(src, TRef):
            ins.append(src)
        else:
            attrs["value"] = float(src if value is None else value)
        return cx.emit("scatter", ins, attrs, shape=T(x).shape)
    return h


function(torch.scatter)(_scatter(False))
method("scatter")(_scatter(False))
method("scatter_")(_scatter(True))


@function(torch.unbind)
@method("unbind")
def f_unbind(cx, x, dim=0):
    x = T(x)
    d = norm_dim(int(dim), x.ndim)
    s = x.shape[:d] + x.shape[d + 1:]
    return tuple(cx.emit("unbind", [x], {"dim": int(dim)}, shapes=[s] * x.shape[d]))


for _op in ("tril", "triu"):
    def _tri(cx, x, diagonal=0, _op=_op):
        return cx.emit(_op, [T(x)], {"diagonal": int(diagonal)}, shape=T(x).shape)
    function(getattr(torch, _op))(_tri)
    method(_op)(_tri)


@function(torch.cumsum)
@method("cumsum")
def f_cumsum(cx, x, dim, *, dtype=None):
    x = T(x)
    if dtype is not None and dtype != x.dtype:
        # impl_func_cum_ops (aten/src/ATen/native/ReduceOps.cpp): the kernel reads self.to(dtype)
        # (transformers' expert offsets: cumsum(histc(...), dtype=torch.int32))
        x = cx.emit("to_dtype", [x], {"dtype": dtype_name(dtype)}, shape=x.shape, dtype=dtype)
    return cx.emit("cumsum", [x], {"dim": int(dim)}, shape=x.shape, dtype=x.dtype)


@function(torch.repeat_interleave)
@method("repeat_interleave")
def f_repeat_interleave(cx, x, repeats, dim=None, *, output_size=None):
    x = T(x)
    if not isinstance(repeats, int) or dim is None:
        raise Unsupported("repeat_interleave with tensor repeats or without dim")
    return cx.emit("repeat_interleave", [x], {"repeats": repeats, "dim": int(dim)}, shape=cx.out_shape())


def index_with_tensor(cx, x, d, idx):
    """x[..., idx, ...] with one integer index tensor at dim d: aten::index."""
    if idx.dtype == torch.bool:
        raise Unsupported("indexing with a bool mask (data-dependent shape)")
    s = x.shape[:d] + idx.shape + x.shape[d + 1:]
    return cx.emit("index", [x, idx], {"dim": d}, shape=s)


ops_shape.INDEX_WITH_TENSOR.append(index_with_tensor)


# =================================================================================================
# ATen ops of composite functions (torch.einsum, ...), recorded below autograd
# =================================================================================================

@aten("unsqueeze")
def a_unsqueeze(cx, x, dim):
    return ops_shape.t_unsqueeze(cx, x, dim)


@aten("squeeze")
def a_squeeze(cx, x, dim=None):
    return ops_shape.t_squeeze(cx, x, dim)


@aten("permute")
def a_permute(cx, x, dims):
    return ops_shape.t_permute(cx, x, *dims)


@aten("transpose")
def a_transpose(cx, x, d0, d1):
    return ops_shape.t_transpose(cx, x, d0, d1)


@aten("view", "_reshape_alias", "_unsafe_view")
def a_view(cx, x, size, *strides):
    size = [int(s) for s in size]
    return cx.emit("view", [T(x)], {"shape": size}, shape=view_out_shape(T(x).shape, size))


@aten("expand")
def a_expand(cx, x, size, implicit=False):
    return ops_shape.t_expand(cx, x, *size)


@aten("clone")
def a_clone(cx, x, memory_format=None):
    """aten.clone copies whatever the layout (a composite's `.contiguous()` reaches ATen as clone
    only when it copies; `var.clone()` of F.gaussian_nll_loss copies a contiguous tensor)."""
    return cx.emit("contiguous", [T(x)], {"clone": True}, shape=T(x).shape)


@aten("bmm", "mm")
def a_mm(cx, a, b):
    return cx.emit("bmm" if a.ndim == 3 else "mm", [T(a), T(b)], shape=cx.out_shape())


@aten("mul")
def a_mul(cx, a, b):
    from .ops_math import _arith
    return _arith("mul")(cx, a, b)


@aten("sum")
def a_sum(cx, x, dim=None, keepdim=False, dtype=None):
    dim = [int(d) for d in dim] if dim is not None else None
    return cx.emit("sum", [T(x)], {"dim": dim, "keepdim": bool(keepdim)}, shape=cx.out_shape())
