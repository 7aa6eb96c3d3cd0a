"""Handlers for the nn ops of lib/ops/rules_nn_extra.cc: the margin losses over class indices
(Note [Margin losses] in docs/op-rules.md), F.bilinear (Note [Bilinear]) and nn.CrossMapLRN2d
(Note [CrossMapLRN2d])."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import T, Unsupported, function, module


def _legacy(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return torch.nn._reduction.legacy_get_string(size_average, reduce)
    return reduction


@module(nn.MultiMarginLoss)
def m_multi_margin(cx, mod, path, x, target):
    return f_multi_margin(cx, x, target, mod.p, mod.margin, cx.param(mod.weight), reduction=mod.reduction)


@module(nn.MultiLabelMarginLoss)
def m_multilabel_margin(cx, mod, path, x, target):
    return f_multilabel_margin(cx, x, target, reduction=mod.reduction)


@function(F.multi_margin_loss)
def f_multi_margin(cx, x, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """aten::multi_margin_loss: keeps self, target (and weight)."""
    ins = [T(x), T(target, "target")] + ([T(weight, "weight")] if weight is not None else [])
    return cx.emit("multi_margin_loss", ins, {"p": int(p), "margin": float(margin),
                                              "reduction": _legacy(size_average, reduce, reduction)},
                   shape=cx.out_shape())


@function(F.multilabel_margin_loss)
def f_multilabel_margin(cx, x, target, size_average=None, reduce=None, reduction="mean"):
    """aten::multilabel_margin_loss_forward: the output and is_target (kept with self and target)."""
    return cx.emit("multilabel_margin_loss", [T(x), T(target, "target")],
                   {"reduction": _legacy(size_average, reduce, reduction)}, shape=cx.out_shape())


@module(nn.Bilinear)
def m_bilinear(cx, mod, path, x1, x2):
    return f_bilinear(cx, x1, x2, cx.param(mod.weight), cx.param(mod.bias))


@function(F.bilinear)
def f_bilinear(cx, x1, x2, weight, bias=None):
    """aten::bilinear (Linear.cpp): both inputs reshaped to 2-D, _trilinear, reshaped back, `+ bias`."""
    x1, x2, weight = T(x1), T(x2), T(weight)
    if x1.ndim < 1 or x1.shape[:-1] != x2.shape[:-1]:
        raise Unsupported("F.bilinear of %s and %s" % (tuple(x1.shape), tuple(x2.shape)))
    lead = tuple(x1.shape[:-1])
    rows = 1
    for d in lead:
        rows *= d
    if x1.ndim != 2:
        x1 = cx.emit("reshape", [x1], {"shape": [-1, x1.shape[-1]]}, shape=(rows, x1.shape[-1]))
        x2 = cx.emit("reshape", [x2], {"shape": [-1, x2.shape[-1]]}, shape=(rows, x2.shape[-1]))
    out = cx.emit("bilinear", [x1, x2, weight], {}, shape=(rows, weight.shape[0]))
    if len(lead) != 1:
        out = cx.emit("reshape", [out], {"shape": list(lead) + [weight.shape[0]]}, shape=lead + (weight.shape[0],))
    if bias is not None:
        out = cx.emit("add", [out, T(bias)], {"inplace": False}, shape=out.shape)
    return out


@module(nn.CrossMapLRN2d)
def m_cross_map_lrn2d(cx, mod, path, x):
    """torch's autograd.Function _cross_map_lrn2d as one op: keeps input and output, ctx.scale."""
    x = T(x)
    if x.ndim != 4:
        raise Unsupported("nn.CrossMapLRN2d of a %d-D input" % x.ndim)
    return cx.emit("cross_map_lrn2d", [x], {"size": int(mod.size), "alpha": float(mod.alpha), "beta": float(mod.beta),
                                            "k": float(mod.k)}, shape=x.shape)
