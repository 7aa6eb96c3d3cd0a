"""ATen ops of composite functions (record.AtenRecorder) on explicit memsim rules.

A composite C++ or Python function with no handler of its own (F.cosine_embedding_loss, F.kl_div,
F.softmin, ...) is recorded op by op below autograd (Note [ATen ops on explicit rules] in
docs/exporter.md). Each ATen op seen there is one autograd records as a whole (a
CompositeImplicitAutograd function has been decomposed before the dispatch mode sees it), so it maps
to the memsim rule of that op:

* ``ATEN_AS_FUNCTION`` / ``ATEN_AS_METHOD``: ATen overloads whose schema is the torch function's or
  the Tensor method's (``aten.add.Tensor`` is ``torch.add``, ``aten.sqrt_`` is ``Tensor.sqrt_``): the
  fx-level handler runs on the same arguments. A ``.Scalar`` overload called from C++ marks its op
  ``scalar_overload`` (its wrapped number lives only inside the call, Note [Scalar overloads]).
* ``@aten`` handlers below: overloads whose schema differs (``_softmax``'s half_to_float,
  ``log_sigmoid_forward``'s buffer, ``norm.ScalarOpt_dim``, ``constant_pad_nd``, ``avg_pool3d``, ...).

An overload in neither stays a recorded op (Note [Recorded rules]).
"""
import operator

import torch

from . import ops_act, ops_llm, ops_math, ops_pool  # noqa: F401  (ops_llm: the comparison and unary handlers the tables name)
from .registry import FUNC_HANDLERS, METHOD_HANDLERS, T, TRef, Unsupported, aten, function, method

# ATen overload -> the torch function whose handler takes the same arguments
ATEN_AS_FUNCTION = {
    "aten.add.Tensor": torch.add, "aten.add.Scalar": torch.add,
    "aten.sub.Tensor": torch.sub, "aten.sub.Scalar": torch.sub,
    "aten.rsub.Tensor": torch.rsub, "aten.rsub.Scalar": torch.rsub,
    "aten.div.Tensor": torch.div, "aten.div.Scalar": torch.div, "aten.mul.Scalar": torch.mul,
    "aten.neg.default": torch.neg, "aten.exp.default": torch.exp, "aten.log.default": torch.log,
    "aten.sqrt.default": torch.sqrt, "aten.rsqrt.default": torch.rsqrt, "aten.abs.default": torch.abs,
    "aten.log2.default": torch.log2, "aten.round.default": torch.round, "aten.floor.default": torch.floor,
    "aten.ceil.default": torch.ceil, "aten.trunc.default": torch.trunc,
    "aten.pow.Tensor_Scalar": torch.pow, "aten.where.self": torch.where,
    "aten.mean.default": torch.mean, "aten.mean.dim": torch.mean,
    "aten.clamp.default": torch.clamp, "aten.clamp_min.default": torch.clamp_min,
    "aten.clamp_max.default": torch.clamp_max,
    "aten.zeros_like.default": torch.zeros_like, "aten.ones_like.default": torch.ones_like,
    "aten.empty_like.default": torch.empty_like, "aten.full_like.default": torch.full_like,
    "aten.scalar_tensor.default": torch.scalar_tensor,
    **{"aten.%s.%s" % (op, k): getattr(torch, op) for op in ("eq", "ne", "lt", "le", "gt", "ge")
       for k in ("Scalar", "Tensor")},
}

# ATen overload -> the Tensor method whose handler takes the same arguments
ATEN_AS_METHOD = {
    "aten.add_.Tensor": "add_", "aten.add_.Scalar": "add_", "aten.sub_.Tensor": "sub_",
    "aten.sub_.Scalar": "sub_", "aten.mul_.Tensor": "mul_", "aten.mul_.Scalar": "mul_",
    "aten.div_.Tensor": "div_", "aten.div_.Scalar": "div_",
    "aten.sqrt_.default": "sqrt_", "aten.exp_.default": "exp_", "aten.log_.default": "log_",
    "aten.neg_.default": "neg_", "aten.fill_.Scalar": "fill_", "aten.zero_.default": "zero_",
    "aten.log2_.default": "log2_", "aten.floor_.default": "floor_", "aten.ceil_.default": "ceil_",
    "aten.clamp_.default": "clamp_", "aten.clamp_min_.default": "clamp_min_",
    "aten.clamp_max_.default": "clamp_max_",
}


def _scalar_overload(h):
    """A `.Scalar` overload (C++ `t + 1e-6`): its op's number is marked scalar_overload."""
    def w(cx, *args, **kwargs):
        r = h(cx, *args, **kwargs)
        for rec, _ in cx._node_ops:
            if "scalar" in rec.get("attrs", {}):
                rec["attrs"]["scalar_overload"] = True
        return r
    return w


def aten_handler(overload):
    """The handler of an ATen overload ("aten.add.Scalar") through the tables above, or None."""
    f = ATEN_AS_FUNCTION.get(overload)
    h = FUNC_HANDLERS.get(f) if f is not None else METHOD_HANDLERS.get(ATEN_AS_METHOD.get(overload))
    if h is None:
        return None
    return _scalar_overload(h) if overload.endswith(".Scalar") else h


# Tensor methods the table names that had no handler
method("clamp_min_")(lambda cx, x, min: ops_act._clamp(True)(cx, x, min=min))
method("clamp_max_")(lambda cx, x, max: ops_act._clamp(True)(cx, x, max=max))


# ---- overloads whose schema differs from the torch function's -----------------------------------

def _a_softmax(op):
    def h(cx, x, dim, half_to_float):
        """_softmax / _log_softmax(self, dim, half_to_float): the op's own node (derivatives.yaml:
        result kept)."""
        x = T(x)
        if half_to_float:
            raise Unsupported("_%s(half_to_float=True)" % op)
        return cx.emit(op, [x], {"dim": int(dim) % max(x.ndim, 1)}, shape=x.shape)
    return h


aten("aten._softmax.default")(_a_softmax("softmax"))
aten("aten._log_softmax.default")(_a_softmax("log_softmax"))


@aten("aten.log_sigmoid_forward.default")
def a_log_sigmoid_forward(cx, x):
    """log_sigmoid_forward(self) -> (output, buffer): the log_sigmoid rule allocates and keeps the
    buffer (Profile::log_sigmoid_buffer); a composite reads only the output."""
    return (ops_act.f_logsigmoid(cx, x), None)


@aten("aten.linalg_vector_norm.default")
def a_linalg_vector_norm(cx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    return ops_math._vector_norm(cx, x, ord, dim, keepdim, dtype)


@aten("aten.norm.ScalarOpt_dim", "aten.norm.Scalar")
def a_norm(cx, x, p=2, dim=None, keepdim=False):
    """norm.ScalarOpt_dim (F.pairwise_distance): its own node saving self and result
    (derivatives.yaml norm: norm_backward), the vector_norm rule (Note [Vector norms])."""
    return ops_math._vector_norm(cx, x, 2.0 if p is None else p, dim, keepdim)


@aten("aten.constant_pad_nd.default")
def a_constant_pad_nd(cx, x, pad, value=0):
    x = T(x)
    attrs = {"pad": [int(p) for p in pad], "mode": "constant"}
    if value:
        attrs["value"] = float(value)
    return cx.emit("pad", [x], attrs, shape=cx.out_shape())


for _nd in (2, 3):  # avg_pool2d/3d(self, kernel_size, stride=[], padding=0, ceil_mode, count_include_pad, divisor)
    aten("aten.avg_pool%dd.default" % _nd)(lambda cx, x, *a, _nd=_nd, **kw: ops_pool._avg_pool(cx, _nd, x, *a, **kw))


# ---- bool ops: not differentiable -----------------------------------------------------------------

@function(torch.any)
@method("any")
@aten("aten.any.default", "aten.any.dim")
def f_any(cx, x, dim=None, keepdim=False):
    x = T(x)
    attrs = {"keepdim": bool(keepdim)}
    if dim is not None:
        attrs["dim"] = int(dim) if not isinstance(dim, (list, tuple)) else [int(d) for d in dim]
    return cx.emit("any", [x], attrs, shape=cx.out_shape(), dtype=torch.bool)


@function(torch.bitwise_and, torch.logical_and, operator.and_)
@method("bitwise_and", "logical_and")
@aten("aten.bitwise_and.Tensor", "aten.logical_and.default")
def f_bitwise_and(cx, a, b):
    if not (isinstance(a, TRef) and isinstance(b, TRef)):
        raise Unsupported("bitwise_and with a number")
    return cx.emit("bitwise_and", [a, b], shape=cx.out_shape(), dtype=cx.out_dtype() or a.dtype)


@function(torch.bitwise_or, torch.logical_or, operator.or_)
@method("bitwise_or", "logical_or")
@aten("aten.bitwise_or.Tensor", "aten.logical_or.default")
def f_bitwise_or(cx, a, b):
    if not (isinstance(a, TRef) and isinstance(b, TRef)):
        raise Unsupported("bitwise_or with a number")
    return cx.emit("bitwise_or", [a, b], shape=cx.out_shape(), dtype=cx.out_dtype() or a.dtype)


@function(torch.bitwise_not, torch.logical_not, operator.invert)
@method("bitwise_not", "logical_not")
@aten("aten.bitwise_not.default", "aten.logical_not.default")
def f_bitwise_not(cx, x):
    x = T(x)
    return cx.emit("bitwise_not", [x], shape=x.shape, dtype=cx.out_dtype() or x.dtype)


# ---- xlogy ------------------------------------------------------------------------------------------

@function(torch.xlogy)
@method("xlogy")
@aten("aten.xlogy.Tensor")
def f_xlogy(cx, a, b):
    """xlogy(self, other) of two tensors: its own node (derivatives.yaml xlogy.Tensor)."""
    if not (isinstance(a, TRef) and isinstance(b, TRef)):
        raise Unsupported("xlogy with a number")
    return cx.emit("xlogy", [a, b], shape=cx.out_shape())
