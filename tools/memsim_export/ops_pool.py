"""Handlers for pooling layers and their functional forms (Notes [3-D convolution and pooling],
[Adaptive max pooling], [1-D pooling], [MaxUnpool], [Fractional max pooling], [LPPool] in
docs/op-rules.md): max / average / adaptive pooling in 1-D (ATen's composites over the 2-D ops),
2-D and 3-D, max pooling with indices and max unpooling, fractional max pooling, LP pooling."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import T, Unsupported, dtype_name, function, module, _ilist, _pair_list


def _pool_nd(mod_cls_name):
    return 3 if mod_cls_name.endswith("3d") else 2


@module(nn.MaxPool2d, nn.MaxPool3d)
def m_max_pool(cx, mod, path, x):
    return _max_pool(cx, _pool_nd(type(mod).__name__), x, mod.kernel_size, mod.stride, mod.padding, mod.dilation,
                     mod.ceil_mode, mod.return_indices)


def _max_pool(cx, nd, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    x = T(x)
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        stride = kernel_size
    attrs = {"kernel_size": _pair_list(kernel_size, nd), "stride": _pair_list(stride, nd),
             "padding": _pair_list(padding, nd), "dilation": _pair_list(dilation, nd), "ceil_mode": bool(ceil_mode)}
    if return_indices:  # the indices as output 1 (Note [MaxUnpool])
        out = cx.out_info()[0].shape
        attrs["return_indices"] = True
        return tuple(cx.emit("max_pool%dd" % nd, [x], attrs, shapes=[out, out]))
    return cx.emit("max_pool%dd" % nd, [x], attrs, shape=cx.out_shape())


@function(F.max_pool2d, getattr(torch, "max_pool2d", None))
def f_max_pool2d(cx, x, *args, **kwargs):
    return _max_pool(cx, 2, x, *args, **kwargs)


@function(F.max_pool3d, getattr(torch, "max_pool3d", None))
def f_max_pool3d(cx, x, *args, **kwargs):
    return _max_pool(cx, 3, x, *args, **kwargs)


for _nd in (2, 3):
    function(getattr(F, "max_pool%dd_with_indices" % _nd, None))(
        lambda cx, x, *a, _nd=_nd, **kw: _max_pool(cx, _nd, x, *a, **dict(kw, return_indices=True)))


@module(nn.AvgPool2d, nn.AvgPool3d)
def m_avg_pool(cx, mod, path, x):
    return _avg_pool(cx, _pool_nd(type(mod).__name__), x, mod.kernel_size, mod.stride, mod.padding, mod.ceil_mode,
                     mod.count_include_pad, mod.divisor_override)


def _avg_pool(cx, nd, x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    x = T(x)
    if divisor_override is not None:
        raise Unsupported("avg_pool%dd(divisor_override=...)" % nd)
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        stride = kernel_size
    return cx.emit("avg_pool%dd" % nd, [x], {"kernel_size": _pair_list(kernel_size, nd), "stride": _pair_list(stride, nd),
                                             "padding": _pair_list(padding, nd), "ceil_mode": bool(ceil_mode),
                                             "count_include_pad": bool(count_include_pad)}, shape=cx.out_shape())


@function(F.avg_pool2d)
def f_avg_pool2d(cx, x, *args, **kwargs):
    return _avg_pool(cx, 2, x, *args, **kwargs)


@function(F.avg_pool3d)
def f_avg_pool3d(cx, x, *args, **kwargs):
    return _avg_pool(cx, 3, x, *args, **kwargs)


@module(nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)
def m_adaptive_avg(cx, mod, path, x):
    return _adaptive_avg(cx, _pool_nd(type(mod).__name__), x, mod.output_size)


def _adaptive_avg(cx, nd, x, output_size):
    x = T(x)
    osz = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * nd
    osz = [x.shape[-nd + i] if s is None else int(s) for i, s in enumerate(osz)]
    return cx.emit("adaptive_avg_pool%dd" % nd, [x], {"output_size": osz}, shape=x.shape[:-nd] + tuple(osz))


@function(F.adaptive_avg_pool2d)
def f_adaptive_avg(cx, x, output_size):
    return _adaptive_avg(cx, 2, x, output_size)


@function(F.adaptive_avg_pool3d)
def f_adaptive_avg3d(cx, x, output_size):
    return _adaptive_avg(cx, 3, x, output_size)


@module(nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
def m_adaptive_max(cx, mod, path, x):
    return _adaptive_max(cx, int(type(mod).__name__[-2]), x, mod.output_size, mod.return_indices)


def _adaptive_max(cx, nd, x, output_size, return_indices=False):
    """adaptive_max_pool{2,3}d: the output and its int64 indices (Note [Adaptive max pooling]);
    adaptive_max_pool1d is ATen's composite: adaptive_max_pool2d of x.unsqueeze(-2), squeezed."""
    x = T(x)
    if return_indices:
        raise Unsupported("adaptive_max_pool%dd(return_indices=True)" % nd)
    osz = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * nd
    osz = [x.shape[-nd + i] if s is None else int(s) for i, s in enumerate(osz)]
    if nd == 1:
        u = cx.emit("unsqueeze", [x], {"dim": -2}, shape=x.shape[:-1] + (1, x.shape[-1]))
        y = cx.emit("adaptive_max_pool2d", [u], {"output_size": [1] + osz}, shape=x.shape[:-1] + (1, osz[0]))
        return cx.emit("squeeze", [y], {"dim": -2}, shape=x.shape[:-1] + (osz[0],))
    return cx.emit("adaptive_max_pool%dd" % nd, [x], {"output_size": osz}, shape=x.shape[:-nd] + tuple(osz))


def _f_adaptive_max(nd):
    def h(cx, x, output_size, return_indices=False):
        return _adaptive_max(cx, nd, x, output_size, return_indices)
    return h


for _nd in (1, 2, 3):
    function(getattr(F, "adaptive_max_pool%dd" % _nd), getattr(F, "_adaptive_max_pool%dd" % _nd, None))(
        _f_adaptive_max(_nd))


# 1-D pooling: ATen's composites over the 2-D kernels (aten/src/ATen/native/Pooling.cpp
# max_pool1d_with_indices and avg_pool1d, AdaptiveAveragePooling.cpp adaptive_avg_pool1d, 1.13 and
# 2.x): the input unsqueezed at -2, the 2-D op with a window of height 1, the result squeezed, each
# its own autograd node (a view's grad is a view: only the 2-D node allocates). max_pool1d takes
# this path whenever its input requires grad (MaxPooling.cpp); on an input without grad it runs
# max_pool1d_impl, which has no indices (not modelled: a transient of the indices' bytes).
def _pool1d(cx, op, x, attrs, out_len):
    x = T(x)
    if x.ndim not in (2, 3):
        raise Unsupported("%s of a %d-D input" % (op.replace("2d", "1d"), x.ndim))
    u = cx.emit("unsqueeze", [x], {"dim": -2}, shape=x.shape[:-1] + (1, x.shape[-1]))
    y = cx.emit(op, [u], attrs, shape=x.shape[:-1] + (1, out_len))
    return cx.emit("squeeze", [y], {"dim": -2}, shape=x.shape[:-1] + (out_len,))


def _one(v, what):
    v = _ilist(v)
    if isinstance(v, list):
        if len(v) != 1:
            raise Unsupported("1-D pooling with %s %r" % (what, v))
        v = v[0]
    return int(v)


def _max_pool1d(cx, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k = _one(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] or stride == () else _one(stride, "stride")
    pad, dil = _one(padding, "padding"), _one(dilation, "dilation")
    attrs = {"kernel_size": [1, k], "stride": [1, s], "padding": [0, pad], "dilation": [1, dil],
             "ceil_mode": bool(ceil_mode)}
    if not return_indices:
        return _pool1d(cx, "max_pool2d", x, attrs, cx.out_shape()[-1])
    x = T(x)  # max_pool1d_with_indices: both results squeezed (Note [MaxUnpool])
    n = cx.out_info()[0].shape[-1]
    u = cx.emit("unsqueeze", [x], {"dim": -2}, shape=x.shape[:-1] + (1, x.shape[-1]))
    y, i = cx.emit("max_pool2d", [u], dict(attrs, return_indices=True), shapes=[x.shape[:-1] + (1, n)] * 2)
    return tuple(cx.emit("squeeze", [t], {"dim": -2}, shape=x.shape[:-1] + (n,)) for t in (y, i))


def _avg_pool1d(cx, x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    k = _one(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] or stride == () else _one(stride, "stride")
    pad = _one(padding, "padding")
    n = cx.out_shape()[-1]
    return _pool1d(cx, "avg_pool2d", x, {"kernel_size": [1, k], "stride": [1, s], "padding": [0, pad],
                                         "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)}, n)


def _adaptive_avg1d(cx, x, output_size):
    o = output_size[0] if isinstance(output_size, (list, tuple)) else output_size
    o = cx.out_shape()[-1]
    return _pool1d(cx, "adaptive_avg_pool2d", x, {"output_size": [1, o]}, o)


@module(nn.MaxPool1d)
def m_max_pool1d(cx, mod, path, x):
    return _max_pool1d(cx, x, mod.kernel_size, mod.stride, mod.padding, mod.dilation, mod.ceil_mode, mod.return_indices)


@module(nn.AvgPool1d)
def m_avg_pool1d(cx, mod, path, x):
    return _avg_pool1d(cx, x, mod.kernel_size, mod.stride, mod.padding, mod.ceil_mode, mod.count_include_pad)


@module(nn.AdaptiveAvgPool1d)
def m_adaptive_avg1d(cx, mod, path, x):
    return _adaptive_avg1d(cx, x, mod.output_size)


function(F.max_pool1d, getattr(torch, "max_pool1d", None), getattr(F, "_max_pool1d", None))(lambda cx, x, *a, **kw: _max_pool1d(cx, x, *a, **kw))
function(getattr(F, "max_pool1d_with_indices", None), getattr(torch, "max_pool1d_with_indices", None))(
    lambda cx, x, *a, **kw: _max_pool1d(cx, x, *a, **dict(kw, return_indices=True)))


# lp_pool (Note [LPPool]): torch/nn/functional.py lp_pool1d/2d/3d, 1.13 and 2.x:
# `avg_pool(input.pow(p), kernel, stride, 0, ceil_mode)`, then
# `(torch.sign(out) * relu(torch.abs(out))).mul(prod(kernel)).pow(1 / p)`, each a Python-level op.
def _lp_pool(cx, nd, x, norm_type, kernel_size, stride=None, ceil_mode=False):
    from .registry import FUNC_HANDLERS
    x = T(x)
    if nd > 1 and x.ndim != nd + 2 and x.ndim != nd + 1:
        raise Unsupported("lp_pool%dd of a %d-D input" % (nd, x.ndim))
    k = _pair_list(kernel_size, nd)
    s = k if stride is None else _pair_list(stride, nd)
    p = FUNC_HANDLERS[torch.pow](cx, x, norm_type)
    if nd == 1:
        out = _avg_pool1d(cx, p, k[0], s[0], 0, ceil_mode)
    else:
        out = cx.emit("avg_pool%dd" % nd, [p], {"kernel_size": k, "stride": s, "padding": [0] * nd,
                                                "ceil_mode": bool(ceil_mode), "count_include_pad": True},
                      shape=cx.out_shape())
    sign = cx.emit("sign", [out], shape=out.shape)
    mag = FUNC_HANDLERS[F.relu](cx, FUNC_HANDLERS[torch.abs](cx, out))
    prod = 1
    for v in k:
        prod *= v
    m = FUNC_HANDLERS[torch.mul](cx, FUNC_HANDLERS[torch.mul](cx, sign, mag), prod)
    return FUNC_HANDLERS[torch.pow](cx, m, 1.0 / float(norm_type))


@module(*[c for c in (nn.LPPool1d, nn.LPPool2d, getattr(nn, "LPPool3d", None)) if c is not None])
def m_lp_pool(cx, mod, path, x):
    return _lp_pool(cx, int(type(mod).__name__[-2]), x, mod.norm_type, mod.kernel_size, mod.stride, mod.ceil_mode)


for _nd in (1, 2, 3):
    function(getattr(F, "lp_pool%dd" % _nd, None))(lambda cx, x, *a, _nd=_nd, **kw: _lp_pool(cx, _nd, x, *a, **kw))


# fractional_max_pool (Note [Fractional max pooling]): torch/nn/functional.py draws
# `_random_samples = torch.rand(N, C, nd)` when none is given (a `full` here), then runs the ATen op.
def _fractional_max_pool(cx, nd, x, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                         _random_samples=None):
    x = T(x)
    if x.ndim != nd + 2:
        raise Unsupported("fractional_max_pool%dd of an unbatched input" % nd)
    out = tuple(cx.out_info()[0].shape) if return_indices else tuple(cx.out_shape())
    if _random_samples is None:
        _random_samples = cx.emit("full", [], {"shape": [x.shape[0], x.shape[1], nd], "dtype": dtype_name(x.dtype)},
                                  shape=(x.shape[0], x.shape[1], nd), dtype=x.dtype)
    attrs = {"kernel_size": _pair_list(kernel_size, nd), "output_size": list(out[-nd:])}
    if return_indices:
        return tuple(cx.emit("fractional_max_pool%dd" % nd, [x, T(_random_samples)], dict(attrs, return_indices=True),
                             shapes=[out, out]))
    return cx.emit("fractional_max_pool%dd" % nd, [x, T(_random_samples)], attrs, shape=out)


@module(nn.FractionalMaxPool2d, nn.FractionalMaxPool3d)
def m_fractional_max_pool(cx, mod, path, x):
    return _fractional_max_pool(cx, int(type(mod).__name__[-2]), x, mod.kernel_size, mod.output_size, mod.output_ratio,
                                mod.return_indices, cx.param(getattr(mod, "_random_samples", None)))


for _nd in (2, 3):
    function(getattr(F, "fractional_max_pool%dd" % _nd), getattr(F, "_fractional_max_pool%dd" % _nd, None))(
        lambda cx, x, *a, _nd=_nd, **kw: _fractional_max_pool(cx, _nd, x, *a, **kw))
    function(getattr(F, "fractional_max_pool%dd_with_indices" % _nd, None))(
        lambda cx, x, *a, _nd=_nd, **kw: _fractional_max_pool(cx, _nd, x, *a, **dict(kw, return_indices=True)))


# max_unpool (Note [MaxUnpool]): F.max_unpool1d is max_unpool2d of input.unsqueeze(-1) and
# indices.unsqueeze(-1), squeezed (torch/nn/functional.py); 2-D and 3-D call the ATen ops directly.
def _max_unpool(cx, nd, x, indices, *args, **kwargs):
    x, indices = T(x), T(indices, "indices")
    out = tuple(cx.out_shape())
    if nd == 1:
        xu = cx.emit("unsqueeze", [x], {"dim": -1}, shape=x.shape + (1,))
        iu = cx.emit("unsqueeze", [indices], {"dim": -1}, shape=indices.shape + (1,), dtype=indices.dtype)
        y = cx.emit("max_unpool2d", [xu, iu], {"output_size": [out[-1], 1]}, shape=out + (1,))
        return cx.emit("squeeze", [y], {"dim": -1}, shape=out)
    return cx.emit("max_unpool%dd" % nd, [x, indices], {"output_size": list(out[-nd:])}, shape=out)


@module(nn.MaxUnpool1d, nn.MaxUnpool2d, nn.MaxUnpool3d)
def m_max_unpool(cx, mod, path, x, indices, output_size=None):
    return _max_unpool(cx, int(type(mod).__name__[-2]), x, indices)


for _nd in (1, 2, 3):
    function(getattr(F, "max_unpool%dd" % _nd))(lambda cx, x, indices, *a, _nd=_nd, **kw: _max_unpool(cx, _nd, x, indices))
function(F.avg_pool1d)(lambda cx, x, *a, **kw: _avg_pool1d(cx, x, *a, **kw))
function(F.adaptive_avg_pool1d)(lambda cx, x, output_size: _adaptive_avg1d(cx, x, output_size))
