"""Handlers for torch.nn layers (by module class) and their functional forms: linear, conv,
normalizations, activations, softmax, dropout, flatten, embedding (pooling: ops_pool.py)."""
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


def _dropout3d(cx, x, p, training, inplace):
    """F.dropout3d (1.13 and 2.x): a 5-D input is batched; any other is unsqueeze(0)d, channel-dropped
    ([1, N] noise draws) and squeeze(0)d (Note [Channel and alpha dropout])."""
    x = T(x)
    if x.ndim == 5:
        return _noise_dropout(cx, x, p, training, inplace, True, False, 5)
    if inplace:
        raise Unsupported("in-place dropout3d of an unbatched %d-D input" % x.ndim)
    u = cx.emit("unsqueeze", [x], {"dim": 0}, shape=(1,) + tuple(x.shape))
    d = _noise_dropout(cx, u, p, training, False, True, False)
    return cx.emit("squeeze", [d], {"dim": 0}, shape=tuple(x.shape))


@module(*_NOISE_DROPOUT)
def m_noise_dropout(cx, mod, path, x):
    if type(mod) is nn.Dropout3d:
        return _dropout3d(cx, x, mod.p, mod.training, mod.inplace)
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
    return _dropout3d(cx, x, p, training, inplace)


@function(F.alpha_dropout)
def f_alpha_dropout(cx, x, p=0.5, training=False, inplace=False):
    return _noise_dropout(cx, x, p, training, inplace, False, True)


@function(F.feature_alpha_dropout)
def f_feature_alpha_dropout(cx, x, p=0.5, training=False, inplace=False):
    return _noise_dropout(cx, x, p, training, inplace, True, True)


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
    input is flattened (torch/nn/functional.py), then aten::_embedding_bag; modes sum (float32 weights:
    the CPU kernel's fast path), mean and max, without options."""
    ids, weight = T(ids), T(weight)
    if mode not in ("sum", "mean", "max") or max_norm is not None or scale_grad_by_freq or sparse \
            or per_sample_weights is not None or include_last_offset or (padding_idx is not None and padding_idx >= 0):
        raise Unsupported("embedding_bag with options (per_sample_weights, include_last_offset, padding_idx, ...)")
    if mode == "sum" and weight.dtype != torch.float32:
        raise Unsupported("embedding_bag mode='sum' on %s weights" % weight.dtype)
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
