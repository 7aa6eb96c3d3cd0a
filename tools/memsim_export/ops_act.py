"""Handlers for the activations beyond relu/gelu/silu & co. (Note [More activations] in
docs/op-rules.md): the ELU family, softplus, mish, prelu, hardtanh with any bounds, clamp, abs,
logsigmoid, glu, the shrinks, and softsign / tanhshrink as the composites PyTorch runs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import T, TRef, Unsupported, function, method, module

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
    x = T(x)
    return cx.emit("elu", [x], {"alpha": float(alpha), "scale": float(scale), "input_scale": float(input_scale),
                                "inplace": bool(inplace)}, shape=x.shape)


def _rrelu(cx, x, lower, upper, training, inplace):
    x = T(x)
    return cx.emit("rrelu", [x], {"lower": float(lower), "upper": float(upper), "training": bool(training),
                                  "inplace": bool(inplace)}, shape=x.shape)


@module(nn.RReLU)
def m_rrelu(cx, mod, path, x):  # F.rrelu(x, lower, upper, self.training, inplace)
    return _rrelu(cx, x, mod.lower, mod.upper, mod.training, mod.inplace)


@function(F.rrelu)
def f_rrelu(cx, x, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return _rrelu(cx, x, lower, upper, training, inplace)


@module(nn.ELU)
def m_elu(cx, mod, path, x):
    return _elu(cx, x, mod.alpha, inplace=mod.inplace)


@module(nn.SELU)
def m_selu(cx, mod, path, x):  # F.selu runs elu(x, alpha, scale): an EluBackward0 node
    return _elu(cx, x, _SELU_ALPHA, _SELU_SCALE, inplace=mod.inplace)


@module(nn.CELU)
def m_celu(cx, mod, path, x):  # celu = elu(x, alpha, 1, 1/alpha); CeluBackward0 keeps self as EluBackward0
    return _elu(cx, x, mod.alpha, 1.0, 1.0 / mod.alpha, inplace=mod.inplace)


@function(F.elu)
def f_elu(cx, x, alpha=1.0, inplace=False):
    return _elu(cx, x, alpha, inplace=inplace)


@function(F.selu, torch.selu)
def f_selu(cx, x, inplace=False):
    return _elu(cx, x, _SELU_ALPHA, _SELU_SCALE, inplace=inplace)


@function(F.celu, torch.celu)
def f_celu(cx, x, alpha=1.0, inplace=False):
    return _elu(cx, x, alpha, 1.0, 1.0 / alpha, inplace=inplace)


@module(nn.Softplus)
def m_softplus(cx, mod, path, x):
    return f_softplus(cx, x, mod.beta, mod.threshold)


@function(F.softplus)
def f_softplus(cx, x, beta=1.0, threshold=20.0):
    x = T(x)
    return cx.emit("softplus", [x], {"beta": float(beta), "threshold": float(threshold)}, shape=x.shape)


@module(nn.Mish)
def m_mish(cx, mod, path, x):
    return f_mish(cx, x, mod.inplace)


@function(F.mish)
def f_mish(cx, x, inplace=False):
    x = T(x)
    return cx.emit("mish", [x], {"inplace": bool(inplace)}, shape=x.shape)


@module(nn.PReLU)
def m_prelu(cx, mod, path, x):
    return f_prelu(cx, x, cx.param(mod.weight))


@function(F.prelu, torch.prelu)
def f_prelu(cx, x, weight):
    x = T(x)
    return cx.emit("prelu", [x, T(weight, "weight")], shape=x.shape)


def _hardtanh(cx, x, min_val, max_val, inplace):
    x = T(x)
    if (min_val, max_val) == (0.0, 6.0):  # relu6 keeps its own row
        return cx.emit("relu6", [x], {"inplace": bool(inplace)}, shape=x.shape)
    return cx.emit("hardtanh", [x], {"min_val": float(min_val), "max_val": float(max_val), "inplace": bool(inplace)},
                   shape=x.shape)


@module(nn.Hardtanh)
def m_hardtanh(cx, mod, path, x):
    return _hardtanh(cx, x, mod.min_val, mod.max_val, mod.inplace)


@function(F.hardtanh)
def f_hardtanh(cx, x, min_val=-1.0, max_val=1.0, inplace=False):
    return _hardtanh(cx, x, min_val, max_val, inplace)


def _clamp(inplace):
    def h(cx, x, min=None, max=None):
        x = T(x)
        if isinstance(min, (TRef, torch.Tensor)) or isinstance(max, (TRef, torch.Tensor)):
            raise Unsupported("clamp with tensor bounds")
        attrs = {"inplace": inplace}
        if min is not None:
            attrs["min"] = float(min)
        if max is not None:
            attrs["max"] = float(max)
        if min is None and max is None:
            raise Unsupported("clamp without bounds")
        return cx.emit("clamp", [x], attrs, shape=x.shape)
    return h


function(torch.clamp, torch.clip)(_clamp(False))
method("clamp", "clip")(_clamp(False))
method("clamp_", "clip_")(_clamp(True))
function(torch.clamp_min)(lambda cx, x, min: _clamp(False)(cx, x, min=min))
method("clamp_min")(lambda cx, x, min: _clamp(False)(cx, x, min=min))
function(torch.clamp_max)(lambda cx, x, max: _clamp(False)(cx, x, max=max))
method("clamp_max")(lambda cx, x, max: _clamp(False)(cx, x, max=max))


@function(torch.abs)
@method("abs")
def f_abs(cx, x):
    x = T(x)
    return cx.emit("abs", [x], shape=x.shape)


@module(nn.LogSigmoid)
def m_logsigmoid(cx, mod, path, x):
    return f_logsigmoid(cx, x)


@function(F.logsigmoid)
def f_logsigmoid(cx, x):
    x = T(x)
    return cx.emit("log_sigmoid", [x], shape=x.shape)


@module(nn.GLU)
def m_glu(cx, mod, path, x):
    return f_glu(cx, x, mod.dim)


@function(F.glu)
def f_glu(cx, x, dim=-1):
    x = T(x)
    d = dim + x.ndim if dim < 0 else dim
    shape = tuple(s // 2 if i == d else s for i, s in enumerate(x.shape))
    return cx.emit("glu", [x], {"dim": int(dim)}, shape=shape)


@module(nn.Hardshrink, nn.Softshrink)
def m_shrink(cx, mod, path, x):
    x = T(x)
    op = "hardshrink" if isinstance(mod, nn.Hardshrink) else "softshrink"
    return cx.emit(op, [x], {"lambd": float(mod.lambd)}, shape=x.shape)


@function(F.hardshrink)
def f_hardshrink(cx, x, lambd=0.5):
    x = T(x)
    return cx.emit("hardshrink", [x], {"lambd": float(lambd)}, shape=x.shape)


@function(F.softshrink)
def f_softshrink(cx, x, lambd=0.5):
    x = T(x)
    return cx.emit("softshrink", [x], {"lambd": float(lambd)}, shape=x.shape)


@module(nn.Softsign)
def m_softsign(cx, mod, path, x):
    return f_softsign(cx, x)


@function(F.softsign)
def f_softsign(cx, x):  # torch/nn/functional.py: input / (input.abs() + 1)
    x = T(x)
    a = cx.emit("abs", [x], shape=x.shape)
    d = cx.emit("add", [a], {"scalar": 1, "inplace": False}, shape=x.shape)
    return cx.emit("div", [x, d], {"inplace": False}, shape=x.shape)


@module(nn.Tanhshrink)
def m_tanhshrink(cx, mod, path, x):
    return f_tanhshrink(cx, x)


@function(F.tanhshrink)
def f_tanhshrink(cx, x):  # torch/nn/functional.py: input - input.tanh()
    x = T(x)
    t = cx.emit("tanh", [x], {"inplace": False}, shape=x.shape)
    return cx.emit("sub", [x, t], {"inplace": False}, shape=x.shape)


def _threshold(cx, x, threshold, value, inplace=False):
    """F.threshold / nn.Threshold: aten::threshold keeps self (threshold_ a clone of it)."""
    x = T(x)
    return cx.emit("threshold", [x], {"threshold": float(threshold), "value": float(value), "inplace": bool(inplace)},
                   shape=x.shape)


@module(nn.Threshold)
def m_threshold(cx, mod, path, x):
    return _threshold(cx, x, mod.threshold, mod.value, mod.inplace)


@function(F.threshold)
def f_threshold(cx, x, threshold, value, inplace=False):
    return _threshold(cx, x, threshold, value, inplace)


@function(F.threshold_)
def f_threshold_(cx, x, threshold, value):
    return _threshold(cx, x, threshold, value, True)
