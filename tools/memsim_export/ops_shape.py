"""Handlers for shape and view ops (view/reshape, transpose/permute, (un)squeeze, expand, split,
cat, select/narrow), Python indexing ``x[idx]``, and padding, resampling, roll, repeat, detach."""
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import ExportError
from .registry import T, TRef, Unsupported, _ilist, function, method, module, norm_dim, view_out_shape, _tuple_arg


# =================================================================================================
# shape / view ops
# =================================================================================================

@method("view")
def t_view(cx, x, *shape):
    x = T(x)
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise Unsupported("Tensor.view(dtype)")
    shape = [int(s) for s in _tuple_arg(shape)]
    return cx.emit("view", [x], {"shape": shape}, shape=view_out_shape(x.shape, shape))


@function(torch.reshape)
@method("reshape")
def t_reshape(cx, x, *shape):
    x = T(x)
    shape = [int(s) for s in _tuple_arg(shape)]
    return cx.emit("reshape", [x], {"shape": shape}, shape=view_out_shape(x.shape, shape))


@method("view_as")
def t_view_as(cx, x, other):
    x = T(x)
    return cx.emit("view", [x], {"shape": list(T(other).shape)}, shape=T(other).shape)


@method("reshape_as")
def t_reshape_as(cx, x, other):
    x = T(x)
    return cx.emit("reshape", [x], {"shape": list(T(other).shape)}, shape=T(other).shape)


@function(torch.transpose)
@method("transpose")
def t_transpose(cx, x, dim0, dim1):
    x = T(x)
    s = list(x.shape)
    d0, d1 = norm_dim(dim0, x.ndim), norm_dim(dim1, x.ndim)
    s[d0], s[d1] = s[d1], s[d0]
    return cx.emit("transpose", [x], {"dim0": int(dim0), "dim1": int(dim1)}, shape=tuple(s))


@function(torch.t)
@method("t")
def t_t(cx, x):
    x = T(x)
    if x.ndim < 2:
        return x
    return t_transpose(cx, x, 0, 1)


@function(torch.permute)
@method("permute")
def t_permute(cx, x, *dims):
    x = T(x)
    dims = [int(d) for d in _tuple_arg(dims)]
    return cx.emit("permute", [x], {"dims": dims}, shape=tuple(x.shape[norm_dim(d, x.ndim)] for d in dims))


@method("expand")
def t_expand(cx, x, *sizes):
    x = T(x)
    sizes = [int(s) for s in _tuple_arg(sizes)]
    return cx.emit("expand", [x], {"sizes": sizes}, shape=cx.out_shape())


@method("expand_as")
def t_expand_as(cx, x, other):
    x = T(x)
    return cx.emit("expand", [x], {"sizes": list(T(other).shape)}, shape=T(other).shape)


@function(torch.unsqueeze)
@method("unsqueeze")
def t_unsqueeze(cx, x, dim):
    x = T(x)
    d = dim if dim >= 0 else dim + x.ndim + 1
    s = list(x.shape)
    s.insert(d, 1)
    return cx.emit("unsqueeze", [x], {"dim": int(dim)}, shape=tuple(s))


@function(torch.squeeze)
@method("squeeze")
def t_squeeze(cx, x, dim=None):
    x = T(x)
    if dim is None:
        ones = [i for i, s in enumerate(x.shape) if s == 1]
        if not ones:
            return x
        if len(ones) == 1:
            dim = ones[0]
        else:
            out = tuple(s for s in x.shape if s != 1)
            return cx.emit("view", [x], {"shape": list(out)}, shape=out)
    d = norm_dim(dim, x.ndim)
    s = list(x.shape)
    if s[d] == 1:
        del s[d]
    return cx.emit("squeeze", [x], {"dim": int(dim)}, shape=tuple(s))


@method("contiguous")
def t_contiguous(cx, x, memory_format=torch.contiguous_format):
    x = T(x)
    if memory_format not in (torch.contiguous_format, None):
        raise Unsupported("contiguous(memory_format=%s)" % memory_format)
    return cx.emit("contiguous", [x], shape=x.shape)


@function(torch.split)
@method("split")
def t_split(cx, x, split_size_or_sections, dim=0):
    x = T(x)
    outs = cx.out_info()
    shapes = [o.shape for o in outs]
    if hasattr(split_size_or_sections, "symbols"):  # routed token counts (ops_moe.RoutedCounts)
        attrs = {"sections": split_size_or_sections.symbols(), "dim": int(dim),
                 "routing": split_size_or_sections.layer}
    elif isinstance(split_size_or_sections, (list, tuple)):
        attrs = {"sections": [int(s) for s in split_size_or_sections], "dim": int(dim)}
    else:
        attrs = {"split_size": int(split_size_or_sections), "dim": int(dim)}
    return tuple(cx.emit("split", [x], attrs, shapes=shapes))


# tensor_split (aten/src/ATen/native/TensorShape.cpp, CompositeImplicit in 1.13 and 2.x): one ATen
# slice per piece, each with its own SliceBackward0 (a whole-dimension piece too: `aten`).
@function(getattr(torch, "tensor_split", None))
@method("tensor_split")
def t_tensor_split(cx, x, indices_or_sections=None, dim=0, *, indices=None, sections=None, tensor_indices_or_sections=None):
    x = T(x)
    spec = next(v for v in (indices_or_sections, indices, sections, tensor_indices_or_sections, 0) if v is not None)
    if isinstance(spec, torch.Tensor) or isinstance(spec, TRef):
        raise Unsupported("tensor_split at a tensor of indices")
    d = norm_dim(int(dim), x.ndim)
    length = x.shape[d]
    if isinstance(spec, (list, tuple)):
        cuts = [0] + [max(0, min(length, int(i) + (length if int(i) < 0 else 0))) for i in spec] + [length]
    else:
        n = int(spec)
        cuts = [0]
        for k in range(n):
            cuts.append(cuts[-1] + length // n + (1 if k < length % n else 0))
    outs = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        b = max(a, b)
        s = list(x.shape)
        s[d] = b - a
        outs.append(cx.emit("slice", [x], {"dim": int(dim), "start": a, "end": b, "step": 1, "aten": True},
                            shape=tuple(s)))
    return tuple(outs)


@function(torch.chunk)
@method("chunk")
def t_chunk(cx, x, chunks, dim=0):
    x = T(x)
    shapes = [o.shape for o in cx.out_info()]
    return tuple(cx.emit("chunk", [x], {"chunks": int(chunks), "dim": int(dim)}, shapes=shapes))


@function(torch.cat, getattr(torch, "concat", None))
def f_cat(cx, tensors, dim=0):
    ts = [T(t) for t in tensors]
    return cx.emit("cat", ts, {"dim": int(dim)}, shape=cx.out_shape())


@function(torch.stack)
def f_stack(cx, tensors, dim=0):
    ts = [T(t) for t in tensors]
    return cx.emit("stack", ts, {"dim": int(dim)}, shape=cx.out_shape())


@function(torch.select)
@method("select")
def t_select(cx, x, dim, index):
    x = T(x)
    s = list(x.shape)
    del s[norm_dim(dim, x.ndim)]
    return cx.emit("select", [x], {"dim": int(dim), "index": int(index)}, shape=tuple(s))


@function(torch.narrow)
@method("narrow")
def t_narrow(cx, x, dim, start, length):
    x = T(x)
    s = list(x.shape)
    s[norm_dim(dim, x.ndim)] = int(length)
    return cx.emit("slice", [x], {"dim": int(dim), "start": int(start), "end": int(start) + int(length), "step": 1},
                   shape=tuple(s))


@function(torch.index_select)
@method("index_select")
def t_index_select(cx, x, dim, index):
    x = T(x)
    return cx.emit("index_select", [x, T(index)], {"dim": int(dim)}, shape=cx.out_shape())


@function(operator.getitem)
def f_getitem(cx, base, idx):
    if not isinstance(base, TRef):
        return base[idx]
    return tensor_index(cx, base, idx)


# PyTorch 2.x's applySlicing skips a slice item that keeps its whole dim (`x[:, 0:n]`, `x[:, :]`:
# aten.alias, no slice node); 1.13 emits aten.slice for each (a node whose backward allocates an
# input-sized grad). Checked with a TorchDispatchMode under 1.13 and 2.13.
_FULL_SLICE_IS_ALIAS = not torch.__version__.startswith("1.")


def tensor_index(cx, x, idx):
    """Python indexing ``x[idx]`` as ATen's applySlicing does it: ints → select, partial slices →
    slice (full slices are skipped), None → unsqueeze, one 1-D integer tensor → index_select."""
    cur, tensors, n_real = basic_view(cx, x, idx)
    if not tensors:
        return cur
    if len(tensors) > 1 or tensors[0][1].dtype not in (torch.int64, torch.int32):
        raise Unsupported("advanced indexing with %s" % ", ".join(
            "a %s tensor of shape %s" % (t.dtype, list(t.shape)) for _, t in tensors))
    (d, item), = tensors
    if item.ndim == 1 and n_real == 1:
        s = list(cur.shape)
        s[d] = item.shape[0]
        return cx.emit("index_select", [cur, item], {"dim": d}, shape=tuple(s))
    if not INDEX_WITH_TENSOR:
        raise Unsupported("advanced indexing with a tensor of shape %s" % list(item.shape))
    return INDEX_WITH_TENSOR[0](cx, cur, d, item)


def basic_view(cx, x, idx):
    """The view applySlicing makes of ``x`` for the basic items of ``idx`` (selects, slices,
    unsqueezes), the tensor items left for aten::index / index_put_ as (dim, TRef), and the count
    of real items."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    cur = x
    d = 0
    tensors = []
    for item in idx:
        if item is Ellipsis:
            d = cur.ndim - _remaining_real(idx, item)
            continue
        if item is None:
            cur = t_unsqueeze(cx, cur, d)
            d += 1
            continue
        if isinstance(item, bool):
            raise Unsupported("indexing with a bool")
        if isinstance(item, int):
            cur = t_select(cx, cur, d, item)
            continue
        if isinstance(item, slice):
            # 1.13's applySlicing emits a slice for every slice item, `:` included (a view)
            size = cur.shape[d]
            start, stop, step = item.start, item.stop, item.step
            step = 1 if step is None else int(step)
            st = 0 if start is None else int(start)
            r = range(*slice(start, stop, step).indices(size))
            if _FULL_SLICE_IS_ALIAS and step == 1 and st == 0 and len(r) == size:
                d += 1  # 2.x: a slice that keeps the whole dim is skipped (the result is an alias)
                continue
            s = list(cur.shape)
            s[d] = len(r)
            end = None if stop is None or int(stop) >= 2 ** 62 else int(stop)
            cur = cx.emit("slice", [cur], {"dim": d, "start": st, "end": end, "step": step}, shape=tuple(s))
            d += 1
            continue
        if isinstance(item, TRef):
            # ATen applies every slice/select first, then one aten::index with the tensors
            tensors.append((d, item))
            d += 1
            continue
        raise Unsupported("indexing with %r" % (item,))
    return cur, tensors, n_real


def view_root(t):
    """The tensor whose storage the view ``t`` (a chain of slice/select ops) writes into."""
    while getattr(t, "base", None) is not None:
        t = t.base
    return t


@function(operator.setitem)
def f_setitem(cx, x, idx, value):
    """``x[idx] = value`` (Note [Writes into views]): the view applySlicing makes, then copy_ (a
    tensor value), fill_ (a number) or, with a 1-D integer tensor item, index_put_ into it; one
    ``view_write`` op whose output is the written base, which later uses of ``x`` read."""
    x = T(x)
    view, tensors, _ = basic_view(cx, x, idx)
    base = view_root(x)
    if tensors and len(tensors) == 1 and tensors[0][1].dtype == torch.bool:
        d, mask = tensors[0]
        if d != 0 or tuple(mask.shape) != tuple(view.shape[:mask.ndim]):
            raise Unsupported("x[mask] = ... with a mask other than over the leading dims")
        if isinstance(value, TRef):  # index_put_ with the mask: nonzero inside
            inputs, attrs = [base, view, value, mask], {"write": "mask_put"}
        elif isinstance(value, (int, float)) and not isinstance(value, bool):  # masked_fill_
            inputs, attrs = [base, view, mask], {"write": "mask_fill", "value": float(value)}
        else:
            raise Unsupported("assignment of %r" % (value,))
    elif tensors:
        (d, index), = tensors if len(tensors) == 1 else [(None, None)]
        if index is None or index.dtype != torch.int64 or index.ndim != 1:
            raise Unsupported("assignment through advanced indexing other than one 1-D int64 index")
        if not isinstance(value, TRef):
            raise Unsupported("x[index] = number (index_put_ of a 0-dim value)")
        inputs, attrs = [base, view, value, index], {"write": "index_put", "dim": d}
    elif isinstance(value, TRef):
        inputs, attrs = [base, view, value], {"write": "copy"}
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        inputs, attrs = [base, view], {"write": "fill", "value": float(value)}
    else:
        raise Unsupported("assignment of %r" % (value,))
    if attrs["write"] != "mask_fill" and len(inputs) > 2 and inputs[2].dtype != base.dtype:
        raise Unsupported("assignment of a %s value into a %s tensor" % (inputs[2].dtype, base.dtype))
    write_view(cx, base, inputs, attrs)
    return None


@method("masked_scatter_")
def t_masked_scatter_(cx, x, mask, source):
    """``x.masked_scatter_(mask, source)`` (Note [Writes into views]): in place on x (a view writes
    into its base through CopySlices)."""
    x, mask, source = T(x), T(mask, "mask"), T(source, "source")
    if mask.dtype != torch.bool or tuple(mask.shape) != tuple(x.shape[:mask.ndim]):
        raise Unsupported("masked_scatter_ with a mask that is not bool over x's leading dims")
    if source.dtype != x.dtype:
        raise Unsupported("masked_scatter_ of a %s source into a %s tensor" % (source.dtype, x.dtype))
    base = view_root(x)
    return write_view(cx, base, [base, x, source, mask], {"write": "masked_scatter"})


def _scalar_write(fn):
    """``x.fill_(number)``, ``x.zero_()``, ``x.bernoulli_(p)``, ``x.uniform_()``, ``x.normal_()``: an
    in-place op with no tensor operand, a ``view_write`` of kind ``scalar`` into x's base (x itself
    when it is no view; Note [Writes into views])."""
    def h(cx, x, *args, **kwargs):
        x = T(x)
        if any(isinstance(a, (TRef, torch.Tensor)) for a in list(args) + list(kwargs.values())):
            raise Unsupported("Tensor.%s with a tensor operand" % fn)
        base = view_root(x)
        if base is not x and not cx.writes_into_views:
            raise Unsupported("Tensor.%s into a view under export by execution" % fn)
        out = write_view(cx, base, [base, x], {"write": "scalar", "fn": fn})
        return x if base is not x else out
    return h


for _fn in ("fill_", "zero_", "bernoulli_", "uniform_", "normal_"):
    method(_fn)(_scalar_write(_fn))


def setitem_by_execution(cx, x, idx, value):
    """``x[idx] = value`` under export by execution (record.py): the write of f_setitem on x itself
    (a write into a view would leave its base's real tensor bound to the unwritten name: recorded
    instead); returns the written base, which the recorder binds to x."""
    x = T(x)
    if view_root(x) is not x:
        raise Unsupported("x[...] = value into a view under export by execution")
    f_setitem(cx, x, idx, value)
    return cx._node_ops[-1][1]


def write_view(cx, base, inputs, attrs):
    """Emits the ``view_write`` op and rebinds every later use of ``base`` to its output."""
    out = cx.emit("view_write", inputs, attrs, shape=base.shape, dtype=base.dtype)
    cx.rebind(base, out)
    return out


# ops_llm registers aten::index here (x[ids] with a multi-dimensional integer index)
INDEX_WITH_TENSOR = []


def _remaining_real(idx, ell):
    after = idx[idx.index(ell) + 1:]
    return sum(1 for i in after if i is not None and i is not Ellipsis)


@function(getattr(torch, "swapaxes", None), getattr(torch, "swapdims", None))
@method("swapaxes", "swapdims")
def t_swapaxes(cx, x, a, b):
    return t_transpose(cx, x, a, b)


# =================================================================================================
# padding, resampling, roll, repeat, detach (Note [Padding and resampling] in docs/op-rules.md)
# =================================================================================================

@function(F.pad)
def f_pad(cx, x, pad, mode="constant", value=None):
    x = T(x)
    if mode == "circular":
        return _pad_circular(cx, x, [int(p) for p in pad])
    if mode not in ("constant", "reflect", "replicate"):
        raise Unsupported("F.pad(mode=%r)" % mode)
    attrs = {"pad": [int(p) for p in pad], "mode": mode}
    if value:
        attrs["value"] = float(value)
    return cx.emit("pad", [x], attrs, shape=cx.out_shape())


def _pad_circular(cx, x, pad):
    """aten/src/ATen/native/PadNd.cpp `_pad_circular_symint` (1.13 and 2.x, Note [Writes into
    views]): a new_empty output, the input copied into its interior, then per padded dim (last
    first) the left and right pads copied from the output's own far side. The C++ slices of a
    whole dim are real slice nodes (`aten`: no Python indexing shortcut)."""
    nd = len(pad) // 2
    if nd < 1 or len(pad) % 2 or x.ndim < nd + 1 or any(p < 0 for p in pad):
        raise Unsupported("F.pad(mode='circular') with pads %r of a %d-D input" % (pad, x.ndim))
    from .registry import dtype_name
    out_shape = list(x.shape)
    for i in range(nd):
        out_shape[x.ndim - 1 - i] += pad[2 * i] + pad[2 * i + 1]
    out = cx.emit("full", [], {"shape": out_shape, "dtype": dtype_name(x.dtype)}, shape=out_shape, dtype=x.dtype)

    def sl(t, dim, start, end):
        shape = list(t.shape)
        shape[dim] = end - start
        return cx.emit("slice", [t], {"dim": dim, "start": start, "end": end, "step": 1, "aten": True}, shape=shape)

    o, i_ = out, x
    for i in range(nd):
        dim = x.ndim - 1 - i
        o = sl(o, dim, pad[2 * i], out_shape[dim] - pad[2 * i + 1])
        i_ = sl(i_, dim, 0, x.shape[dim])
    out = cx.emit("view_write", [out, o, i_], {"write": "copy"}, shape=out_shape, dtype=x.dtype)
    for i in range(nd):
        dim = x.ndim - 1 - i
        left, right, n = pad[2 * i], pad[2 * i + 1], out_shape[dim]
        if left > 0:
            v, src = sl(out, dim, 0, left), sl(out, dim, n - left - right, n - right)
            out = cx.emit("view_write", [out, v, src], {"write": "copy"}, shape=out_shape, dtype=x.dtype)
        if right > 0:
            v, src = sl(out, dim, n - right, n), sl(out, dim, left, left + right)
            out = cx.emit("view_write", [out, v, src], {"write": "copy"}, shape=out_shape, dtype=x.dtype)
    return out


_UPSAMPLE_MODES = {"nearest": (3, 4, 5), "nearest-exact": (3, 4, 5), "linear": (3,), "bilinear": (4,), "bicubic": (4,),
                   "trilinear": (5,)}


def _upsample(cx, x, size, scale_factor, mode, align_corners):
    x = T(x)
    if x.ndim not in _UPSAMPLE_MODES.get(mode, ()):
        raise Unsupported("interpolate(mode=%r) of a %d-D input" % (mode, x.ndim))
    out = cx.out_shape()
    if out is None:
        raise Unsupported("interpolate without a probed output shape")
    return cx.emit("upsample", [x], {"size": [int(s) for s in out[2:]], "mode": mode}, shape=out)


@function(F.interpolate, getattr(F, "upsample", None))
def f_interpolate(cx, x, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                  antialias=False):
    if antialias:
        raise Unsupported("interpolate(antialias=True)")
    return _upsample(cx, x, size, scale_factor, mode, align_corners)


@module(nn.Upsample)
def m_upsample(cx, mod, path, x):
    return _upsample(cx, x, mod.size, mod.scale_factor, mod.mode, mod.align_corners)


@function(torch.roll)
@method("roll")
def f_roll(cx, x, shifts, dims=None):
    x = T(x)
    return cx.emit("roll", [x], {"shifts": _ilist(shifts), "dims": _ilist(dims) if dims is not None else None},
                   shape=x.shape)


@function(torch.flip)
@method("flip")
def f_flip(cx, x, *dims):
    """torch.flip: a new tensor; FlipBackward0 flips the grad back (Note [Flip and pixel shuffle])."""
    x = T(x)
    return cx.emit("flip", [x], {"dims": _ilist(_tuple_arg(dims))}, shape=x.shape)


def _pixel_shuffle(cx, x, r, up):
    x = T(x)
    r = int(r)
    *lead, ch, h, w = x.shape
    shape = tuple(lead) + ((ch // (r * r), h * r, w * r) if up else (ch * r * r, h // r, w // r))
    return cx.emit("pixel_shuffle" if up else "pixel_unshuffle", [x],
                   {"upscale_factor" if up else "downscale_factor": r}, shape=shape)


@function(F.pixel_shuffle, torch.pixel_shuffle)
def f_pixel_shuffle(cx, x, upscale_factor):
    return _pixel_shuffle(cx, x, upscale_factor, True)


@function(F.pixel_unshuffle, torch.pixel_unshuffle)
def f_pixel_unshuffle(cx, x, downscale_factor):
    return _pixel_shuffle(cx, x, downscale_factor, False)


@module(nn.PixelShuffle)
def m_pixel_shuffle(cx, mod, path, x):
    return _pixel_shuffle(cx, x, mod.upscale_factor, True)


@module(nn.PixelUnshuffle)
def m_pixel_unshuffle(cx, mod, path, x):
    return _pixel_shuffle(cx, x, mod.downscale_factor, False)


@module(getattr(nn, "ChannelShuffle", None))
def m_channel_shuffle(cx, mod, path, x):
    return f_channel_shuffle(cx, x, mod.groups)


@function(getattr(F, "channel_shuffle", None), getattr(torch, "channel_shuffle", None))
def f_channel_shuffle(cx, x, groups):
    """nn.ChannelShuffle / F.channel_shuffle: aten::channel_shuffle, a new tensor, nothing kept. PyTorch
    1.13 has no derivative for it (its backward raises): refused there (Note [Flip and pixel shuffle])."""
    x = T(x)
    if torch.__version__.startswith("1."):
        raise ExportError("channel_shuffle: PyTorch %s has no derivative for it (its backward raises \"derivative "
                          "for channel_shuffle is not implemented\"): no training step to export" % torch.__version__)
    return cx.emit("channel_shuffle", [x], {"groups": int(groups)}, shape=x.shape)


@method("repeat")
def t_repeat(cx, x, *repeats):
    x = T(x)
    reps = _tuple_arg(repeats)
    return cx.emit("repeat", [x], {"repeats": [int(r) for r in reps]}, shape=cx.out_shape())


@function(torch.detach)
@method("detach")
def t_detach(cx, x):
    x = T(x)
    return cx.emit("detach", [x], shape=x.shape)


# =================================================================================================
# unfold / fold (im2col / col2im) and Tensor.unfold (Note [Unfold and fold] in docs/op-rules.md)
# =================================================================================================

def _window_attrs(kernel_size, dilation, padding, stride):
    return {"kernel_size": _pair(kernel_size), "dilation": _pair(dilation), "padding": _pair(padding),
            "stride": _pair(stride)}


def _pair(v):
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)] * 2


@function(F.unfold)
def f_unfold(cx, x, kernel_size, dilation=1, padding=0, stride=1):
    x = T(x)
    if x.ndim not in (3, 4):
        raise Unsupported("F.unfold of a %d-D input" % x.ndim)
    return cx.emit("im2col", [x], _window_attrs(kernel_size, dilation, padding, stride), shape=cx.out_shape())


@module(nn.Unfold)
def m_unfold(cx, mod, path, x):
    return f_unfold(cx, x, mod.kernel_size, mod.dilation, mod.padding, mod.stride)


@function(F.fold)
def f_fold(cx, x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    x = T(x)
    if x.ndim not in (2, 3):
        raise Unsupported("F.fold of a %d-D input" % x.ndim)
    attrs = dict(_window_attrs(kernel_size, dilation, padding, stride), output_size=_pair(output_size))
    return cx.emit("col2im", [x], attrs, shape=cx.out_shape())


@module(nn.Fold)
def m_fold(cx, mod, path, x):
    return f_fold(cx, x, mod.output_size, mod.kernel_size, mod.dilation, mod.padding, mod.stride)


@method("unfold")
def t_unfold(cx, x, dimension, size, step):
    x = T(x)
    return cx.emit("unfold", [x], {"dim": norm_dim(int(dimension), x.ndim), "size": int(size), "step": int(step)},
                   shape=cx.out_shape())
