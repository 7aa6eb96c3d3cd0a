"""Handlers for torch.nn layers (by module class) and their functional forms: linear, conv,
normalizations, activations, softmax, dropout, pooling, flatten, embedding."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import T, Unsupported, dtype_name, function, method, module, _ilist, _pair_list


# =================================================================================================
# modules
# =================================================================================================

@module(nn.Linear)
def m_linear(cx, mod, path, x):
    x = T(x)
    return cx.emit("linear", [x, cx.param(mod.weight), cx.param(mod.bias)],
                   shape=x.shape[:-1] + (mod.out_features,))


def _conv_attrs(mod_or_args, nd, weight_shape, padding):
    stride, dilation, groups = mod_or_args
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * nd
        elif padding == "same":
            ks = list(weight_shape[2:])
            dil = _pair_list(dilation, nd)
            pads = []
            for k, d in zip(ks, dil):
                total = d * (k - 1)
                if total % 2:
                    raise Unsupported("conv padding='same' with asymmetric padding")
                pads.append(total // 2)
            padding = pads
    return {"stride": _pair_list(stride, nd), "padding": _pair_list(padding, nd),
            "dilation": _pair_list(dilation, nd), "groups": int(groups)}


@module(nn.Conv1d, nn.Conv2d, nn.Conv3d)
def m_conv(cx, mod, path, x):
    x = T(x)
    nd = len(mod.kernel_size)
    if mod.padding_mode != "zeros":
        raise Unsupported("%s with padding_mode=%r" % (type(mod).__name__, mod.padding_mode))
    attrs = _conv_attrs((mod.stride, mod.dilation, mod.groups), nd, mod.weight.shape, mod.padding)
    return cx.emit("conv%dd" % nd, [x, cx.param(mod.weight), cx.param(mod.bias)], attrs, shape=cx.out_shape())


@function(F.conv1d, F.conv2d, F.conv3d)
def f_conv(cx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x, weight = T(x), T(weight, "weight")
    nd = weight.ndim - 2
    attrs = _conv_attrs((stride, dilation, groups), nd, weight.shape, padding)
    return cx.emit("conv%dd" % nd, [x, T(weight), bias], attrs, shape=cx.out_shape())


def _conv_transpose_attrs(nd, stride, padding, output_padding, dilation, groups):
    if isinstance(padding, str):
        raise Unsupported("conv_transpose with padding=%r" % padding)
    return {"stride": _pair_list(stride, nd), "padding": _pair_list(padding, nd),
            "output_padding": _pair_list(output_padding, nd), "dilation": _pair_list(dilation, nd),
            "groups": int(groups)}


@module(nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
def m_conv_transpose(cx, mod, path, x, output_size=None):
    x = T(x)
    nd = len(mod.kernel_size)
    if mod.padding_mode != "zeros":
        raise Unsupported("%s with padding_mode=%r" % (type(mod).__name__, mod.padding_mode))
    out_pad = mod.output_padding
    if output_size is not None:  # forward(x, output_size): the padding that reaches the requested size
        size = list(output_size)[-nd:]
        out_pad = [size[i] - ((x.shape[-nd + i] - 1) * mod.stride[i] - 2 * mod.padding[i]
                              + mod.dilation[i] * (mod.kernel_size[i] - 1) + 1) for i in range(nd)]
    attrs = _conv_transpose_attrs(nd, mod.stride, mod.padding, out_pad, mod.dilation, mod.groups)
    return cx.emit("conv_transpose%dd" % nd, [x, cx.param(mod.weight), cx.param(mod.bias)], attrs,
                   shape=cx.out_shape())


@function(F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)
def f_conv_transpose(cx, x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    x, weight = T(x), T(weight, "weight")
    nd = weight.ndim - 2
    attrs = _conv_transpose_attrs(nd, stride, padding, output_padding, dilation, groups)
    return cx.emit("conv_transpose%dd" % nd, [x, T(weight), bias], attrs, shape=cx.out_shape())


@module(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
def m_batch_norm(cx, mod, path, x):
    x = T(x)
    if not mod.affine or mod.running_mean is None:
        raise Unsupported("%s without affine parameters or running stats" % type(mod).__name__)
    training = bool(mod.training or mod.running_mean is None)
    return cx.emit("batch_norm", [x, cx.param(mod.weight), cx.param(mod.bias), cx.param(mod.running_mean),
                                  cx.param(mod.running_var)],
                   {"momentum": mod.momentum, "eps": mod.eps, "training": training}, shape=x.shape)


@function(F.batch_norm)
def f_batch_norm(cx, x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    x = T(x)
    if weight is None or bias is None or running_mean is None or running_var is None:
        raise Unsupported("F.batch_norm without weight, bias or running stats")
    return cx.emit("batch_norm", [x, weight, bias, running_mean, running_var],
                   {"momentum": momentum, "eps": eps, "training": bool(training)}, shape=x.shape)


# instance_norm (aten/src/ATen/native/Normalization.cpp, the same in 1.13 and 2.x): weight, bias and
# the running stats each repeated B times (`repeat_if_defined`), `input.contiguous().view({1, B*C,
# ...})`, batch_norm over that in training mode (the repeats are its inputs: the node keeps them),
# the repeated running stats averaged over B (`view({b, c}).mean(0)`) and copied into the buffers,
# and the output viewed back to the input's sizes.
def _instance_norm(cx, x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps):
    x = T(x)
    if x.ndim < 3:
        raise Unsupported("instance_norm of an unbatched %d-D input" % x.ndim)
    if not use_input_stats:
        raise Unsupported("instance_norm with the running stats (use_input_stats=False)")
    if (weight is None) != (bias is None) or (weight is None and running_mean is not None) or \
            (running_mean is None) != (running_var is None):
        raise Unsupported("instance_norm with running stats but no affine parameters")
    b, c = x.shape[0], x.shape[1]
    stats = [cx.emit("repeat", [T(t)], {"repeats": [b]}, shape=(b * c,))
             for t in (weight, bias, running_mean, running_var) if t is not None]
    flat = (1, b * c) + tuple(x.shape[2:])
    v = cx.emit("view", [cx.emit("contiguous", [x], shape=x.shape)], {"shape": list(flat)}, shape=flat)
    y = cx.emit("batch_norm", [v] + stats, {"momentum": float(momentum or 0.0), "eps": float(eps), "training": True},
                shape=flat)
    for r in stats[2:]:
        per = cx.emit("view", [r], {"shape": [b, c]}, shape=(b, c))
        cx.emit("mean", [per], {"dim": 0, "keepdim": False}, shape=(c,))  # copied into the buffer
    return cx.emit("view", [y], {"shape": list(x.shape)}, shape=x.shape)


@module(nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
def m_instance_norm(cx, mod, path, x):
    use_input_stats = mod.training or not mod.track_running_stats
    return _instance_norm(cx, x, cx.param(mod.running_mean), cx.param(mod.running_var), cx.param(mod.weight),
                          cx.param(mod.bias), use_input_stats, mod.momentum, mod.eps)


@function(F.instance_norm)
def f_instance_norm(cx, x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                    momentum=0.1, eps=1e-5):
    return _instance_norm(cx, x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


@module(nn.LayerNorm)
def m_layer_norm(cx, mod, path, x):
    x = T(x)
    return cx.emit("layer_norm", [x, cx.param(mod.weight), cx.param(mod.bias)],
                   {"normalized_shape": list(mod.normalized_shape), "eps": mod.eps}, shape=x.shape)


@function(F.layer_norm)
def f_layer_norm(cx, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = T(x)
    if weight is None and bias is not None:
        raise Unsupported("layer_norm with bias but no weight")
    return cx.emit("layer_norm", [x, weight, bias], {"normalized_shape": _ilist(list(normalized_shape)), "eps": eps},
                   shape=x.shape)


def _rms_norm(cx, x, normalized_shape, weight, eps):
    x = T(x)
    if eps is None:  # F.rms_norm's default: the dtype's machine epsilon
        eps = torch.finfo(x.dtype).eps
    return cx.emit("rms_norm", [x, weight], {"normalized_shape": _ilist(list(normalized_shape)), "eps": float(eps)},
                   shape=x.shape)


if hasattr(nn, "RMSNorm"):  # torch >= 2.4
    @module(nn.RMSNorm)
    def m_rms_norm(cx, mod, path, x):
        return _rms_norm(cx, x, mod.normalized_shape, cx.param(mod.weight) if mod.weight is not None else None, mod.eps)


@function(getattr(F, "rms_norm", None))
def f_rms_norm(cx, x, normalized_shape, weight=None, eps=None):
    return _rms_norm(cx, x, normalized_shape, weight, eps)


@module(nn.GroupNorm)
def m_group_norm(cx, mod, path, x):
    x = T(x)
    return cx.emit("group_norm", [x, cx.param(mod.weight), cx.param(mod.bias)],
                   {"num_groups": mod.num_groups, "eps": mod.eps}, shape=x.shape)


@function(F.group_norm)
def f_group_norm(cx, x, num_groups, weight=None, bias=None, eps=1e-5):
    x = T(x)
    if weight is None and bias is not None:
        raise Unsupported("group_norm with bias but no weight")
    return cx.emit("group_norm", [x, weight, bias], {"num_groups": int(num_groups), "eps": eps}, shape=x.shape)


_ACT_MODULES = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.SiLU: "silu", nn.Hardswish: "hardswish",
                nn.Hardsigmoid: "hardsigmoid"}


@module(*_ACT_MODULES)
def m_act(cx, mod, path, x):
    x = T(x)
    op = next(v for k, v in _ACT_MODULES.items() if isinstance(mod, k))
    return cx.emit(op, [x], {"inplace": bool(getattr(mod, "inplace", False))}, shape=x.shape)


@module(nn.Sigmoid, nn.Tanh)
def m_act_noinplace(cx, mod, path, x):
    x = T(x)
    op = "sigmoid" if isinstance(mod, nn.Sigmoid) else "tanh"
    return cx.emit(op, [x], {"inplace": False}, shape=x.shape)


@module(nn.GELU)
def m_gelu(cx, mod, path, x):
    x = T(x)
    return cx.emit("gelu", [x], {"inplace": False, "approximate": getattr(mod, "approximate", "none")}, shape=x.shape)


@module(nn.LeakyReLU)
def m_leaky(cx, mod, path, x):
    x = T(x)
    return cx.emit("leaky_relu", [x], {"inplace": bool(mod.inplace), "negative_slope": mod.negative_slope},
                   shape=x.shape)


def _softmax_dim(dim, ndim):
    if dim is None:
        return 0 if ndim in (0, 1, 3) else 1
    return int(dim)


@module(nn.Softmax, nn.LogSoftmax)
def m_softmax(cx, mod, path, x):
    x = T(x)
    op = "softmax" if isinstance(mod, nn.Softmax) else "log_softmax"
    return cx.emit(op, [x], {"dim": _softmax_dim(mod.dim, x.ndim)}, shape=x.shape)


@module(nn.Dropout)
def m_dropout(cx, mod, path, x):
    x = T(x)
    return cx.emit("dropout", [x], {"p": float(mod.p), "inplace": bool(mod.inplace), "training": bool(mod.training)},
                   shape=x.shape)


_NOISE_DROPOUT = {nn.Dropout1d: (True, False, 3), nn.Dropout2d: (True, False, 4), nn.Dropout3d: (True, False, 5),
                  nn.AlphaDropout: (False, True, 0), nn.FeatureAlphaDropout: (True, True, 0)}


def _noise_dropout(cx, x, p, training, inplace, feature, alpha, batched_dim=0):
    """Channel and alpha dropout (Note [Channel and alpha dropout]): a dropout op with `feature`
    (one noise draw per (N, C)) and/or `alpha` (SELU-preserving affine noise)."""
    x = T(x)
    if feature and (x.ndim < 2 or (batched_dim and x.ndim != batched_dim)):
        raise Unsupported("channel dropout of an unbatched %d-D input" % x.ndim)
    attrs = {"p": float(p), "inplace": bool(inplace), "training": bool(training)}
    if feature:
        attrs["feature"] = True
    if alpha:
        attrs["alpha"] = True
    return cx.emit("dropout", [x], attrs, shape=x.shape)


@module(*_NOISE_DROPOUT)
def m_noise_dropout(cx, mod, path, x):
    feature, alpha, nd = next(v for k, v in _NOISE_DROPOUT.items() if type(mod) is k)
    return _noise_dropout(cx, x, mod.p, mod.training, mod.inplace, feature, alpha, nd)


@function(getattr(F, "dropout1d", None))
def f_dropout1d(cx, x, p=0.5, training=True, inplace=False):
    return _noise_dropout(cx, x, p, training, inplace, True, False, 3)


@function(F.dropout2d)
def f_dropout2d(cx, x, p=0.5, training=True, inplace=False):
    return _noise_dropout(cx, x, p, training, inplace, True, False, 4)


@function(F.dropout3d)
def f_dropout3d(cx, x, p=0.5, training=True, inplace=False):
    return _noise_dropout(cx, x, p, training, inplace, True, False, 5)


@function(F.alpha_dropout)
def f_alpha_dropout(cx, x, p=0.5, training=False, inplace=False):
    return _noise_dropout(cx, x, p, training, inplace, False, True)


@function(F.feature_alpha_dropout)
def f_feature_alpha_dropout(cx, x, p=0.5, training=False, inplace=False):
    return _noise_dropout(cx, x, p, training, inplace, True, True)


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


@module(nn.Flatten)
def m_flatten(cx, mod, path, x):
    return f_flatten(cx, x, mod.start_dim, mod.end_dim)


@function(torch.flatten)
@method("flatten")
def f_flatten(cx, x, start_dim=0, end_dim=-1):
    x = T(x)
    return cx.emit("flatten", [x], {"start_dim": int(start_dim), "end_dim": int(end_dim)}, shape=cx.out_shape())


@module(nn.Unflatten)
def m_unflatten(cx, mod, path, x):
    x = T(x)
    return cx.emit("view", [x], {"shape": list(cx.out_shape())}, shape=cx.out_shape())


@method("unflatten")
def t_unflatten(cx, x, dim, sizes):
    x = T(x)
    return cx.emit("view", [x], {"shape": list(cx.out_shape())}, shape=cx.out_shape())


@module(nn.Embedding)
def m_embedding(cx, mod, path, ids):
    if mod.max_norm is not None:
        raise Unsupported("nn.Embedding(max_norm=...)")
    ids = T(ids)
    return cx.emit("embedding", [ids, cx.param(mod.weight)], {"padding_idx": mod.padding_idx},
                   shape=ids.shape + (mod.embedding_dim,), dtype=mod.weight.dtype)


@function(F.embedding)
def f_embedding(cx, ids, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                sparse=False):
    if max_norm is not None:
        raise Unsupported("F.embedding(max_norm=...)")
    ids, weight = T(ids), T(weight)
    return cx.emit("embedding", [ids, weight], {"padding_idx": padding_idx}, shape=ids.shape + weight.shape[1:],
                   dtype=weight.dtype)


def _embedding_bag(cx, ids, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, mode="mean",
                   sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """F.embedding_bag (Note [EmbeddingBag]): a 2-D input's offsets are `arange(0, numel, L)` and the
    input is flattened (torch/nn/functional.py), then aten::_embedding_bag; mode mean only."""
    ids, weight = T(ids), T(weight)
    if mode != "mean" or max_norm is not None or scale_grad_by_freq or sparse or per_sample_weights is not None \
            or include_last_offset or (padding_idx is not None and padding_idx >= 0):
        raise Unsupported("embedding_bag other than mode='mean' without options")
    if ids.ndim == 2:
        if offsets is not None:
            raise Unsupported("embedding_bag of a 2-D input with offsets")
        b = ids.shape[0]
        offsets = cx.emit("arange", [], {"end": b, "dtype": dtype_name(ids.dtype)}, shape=(b,), dtype=ids.dtype)
        ids = cx.emit("view", [ids], {"shape": [-1]}, shape=(ids.shape[0] * ids.shape[1],))
    elif ids.ndim != 1 or offsets is None:
        raise Unsupported("embedding_bag of a %d-D input" % ids.ndim)
    offsets = T(offsets, "offsets")
    return cx.emit("embedding_bag", [weight, ids, offsets], {"mode": mode},
                   shape=(offsets.shape[0], weight.shape[1]), dtype=weight.dtype)


@module(nn.EmbeddingBag)
def m_embedding_bag(cx, mod, path, ids, offsets=None, per_sample_weights=None):
    return _embedding_bag(cx, ids, cx.param(mod.weight), offsets, mod.max_norm, mod.norm_type, mod.scale_grad_by_freq,
                          mod.mode, mod.sparse, per_sample_weights, mod.include_last_offset, mod.padding_idx)


function(F.embedding_bag)(_embedding_bag)


@module(nn.Identity)
def m_identity(cx, mod, path, x, *a, **k):
    return x


# =================================================================================================
# activations as functions / methods
# =================================================================================================

def _act_fn(op, inplace_default=False, force_inplace=False):
    def h(cx, x, inplace=inplace_default, **kw):
        x = T(x)
        attrs = {"inplace": bool(inplace or force_inplace)}
        if force_inplace:  # `x.relu_()`: not the module's choice that --inplace-activations changes
            attrs["inplace_fixed"] = True
        return cx.emit(op, [x], attrs, shape=x.shape)
    return h


function(F.relu, torch.relu)(_act_fn("relu"))
method("relu")(_act_fn("relu"))
function(torch.relu_, getattr(F, "relu_", None))(_act_fn("relu", force_inplace=True))
method("relu_")(_act_fn("relu", force_inplace=True))
function(F.relu6)(_act_fn("relu6"))
function(F.silu)(_act_fn("silu"))
function(F.hardswish)(_act_fn("hardswish"))
function(F.hardsigmoid)(_act_fn("hardsigmoid"))
function(torch.sigmoid, F.sigmoid)(_act_fn("sigmoid"))
method("sigmoid")(_act_fn("sigmoid"))
method("sigmoid_")(_act_fn("sigmoid", force_inplace=True))
function(torch.tanh, F.tanh)(_act_fn("tanh"))
method("tanh")(_act_fn("tanh"))
method("tanh_")(_act_fn("tanh", force_inplace=True))


@function(F.gelu)
@method("gelu")
def f_gelu(cx, x, approximate="none"):
    x = T(x)
    return cx.emit("gelu", [x], {"inplace": False, "approximate": approximate}, shape=x.shape)


@function(F.leaky_relu)
def f_leaky(cx, x, negative_slope=0.01, inplace=False):
    x = T(x)
    return cx.emit("leaky_relu", [x], {"inplace": bool(inplace), "negative_slope": negative_slope}, shape=x.shape)


@function(F.softmax, torch.softmax)
@method("softmax")
def f_softmax(cx, x, dim=None, _stacklevel=3, dtype=None):
    return _softmax(cx, "softmax", x, dim, dtype)


@function(F.log_softmax, torch.log_softmax)
@method("log_softmax")
def f_log_softmax(cx, x, dim=None, _stacklevel=3, dtype=None):
    return _softmax(cx, "log_softmax", x, dim, dtype)


def _softmax(cx, op, x, dim, dtype):
    x = T(x)
    if isinstance(dtype, torch.dtype) and dtype != x.dtype:
        raise Unsupported("%s(dtype=%s) (a dtype cast)" % (op, dtype))
    return cx.emit(op, [x], {"dim": _softmax_dim(dim, x.ndim)}, shape=x.shape)


@function(F.dropout, torch.dropout)
def f_dropout(cx, x, p=0.5, training=True, inplace=False):
    x = T(x)
    return cx.emit("dropout", [x], {"p": float(p), "inplace": bool(inplace), "training": bool(training)},
                   shape=x.shape)


@function(getattr(torch, "dropout_", None))
def f_dropout_(cx, x, p=0.5, training=True):
    return f_dropout(cx, x, p, training, True)


# =================================================================================================
# spatial transformers (Note [Grid sampling] in docs/op-rules.md)
# =================================================================================================

@function(F.affine_grid)
def f_affine_grid(cx, theta, size, align_corners=None):
    theta = T(theta, "theta")
    if len(size) != 4:
        raise Unsupported("F.affine_grid of a %d-D size (2-D grids only)" % len(size))
    return cx.emit("affine_grid", [theta], {"size": [int(s) for s in size], "align_corners": bool(align_corners)},
                   shape=cx.out_shape())


@function(F.grid_sample)
def f_grid_sample(cx, x, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    x, grid = T(x), T(grid, "grid")
    if x.ndim != 4:
        raise Unsupported("F.grid_sample of a %d-D input (2-D sampling only)" % x.ndim)
    return cx.emit("grid_sample", [x, grid], {"mode": mode, "padding_mode": padding_mode,
                                              "align_corners": bool(align_corners)}, shape=cx.out_shape())
