"""Mixture-of-experts routing ops: bincount, sort/argsort, floor division, scatter_add, and the
split of the routed tokens by the counts the router produced (Note [Routed token counts] in
docs/op-rules.md).

How many tokens each expert receives depends on the data: ``torch.bincount(indices,
minlength=E).tolist()`` reads values a meta tensor does not have.  The recorder runs the model on
meta tensors, so a bincount's result is marked as routed counts (one routing per bincount, in
forward order): its ``tolist()`` gives :class:`RoutedCounts`, the balanced split at the probe's
size, and a split by them writes symbols ``routed<L>_e<i>`` as its sections.  The graph's
``symbols`` give each the balanced count at the default sizes; a run sets the counts a batch
actually routed (``--set``, or ``--moe-routing``).
"""
import operator

import torch

from .registry import T, TRef, Unsupported, function, method


class RoutedCounts(list):
    """Balanced per-expert counts standing for routing |layer|'s data-dependent bincount."""

    def __init__(self, values, layer):
        super().__init__(values)
        self.layer = layer

    def symbols(self):
        return ["routed%d_e%d" % (self.layer, i) for i in range(len(self))]


def balanced(n, experts):
    """n tokens over |experts|: n // E each, the first n % E experts one more."""
    return [n // experts + (1 if i < n % experts else 0) for i in range(experts)]


def meta_bincount(cx, x, weights=None, minlength=0):
    """bincount on a meta tensor: an int64 [minlength] result marked as routing counts."""
    if weights is not None or not minlength:
        raise Unsupported("bincount without minlength or with weights (its size depends on the values)")
    out = torch.empty(int(minlength), dtype=torch.int64, device=x.device)
    # a freed result's id is reused by a later layer's: the map finds the live one, the list keeps every layer
    cx.routings[id(out)] = (len(cx.routed_symbols_order), int(x.numel()))
    cx.routing_counts.append(cx.routings[id(out)])
    cx.routed_symbols_order.append(int(minlength))
    return out


def routed_tolist(cx, t):
    """tolist() of a marked bincount result: the balanced counts, tagged with the routing."""
    layer, n = cx.routings[id(t)]
    counts = RoutedCounts(balanced(n, t.shape[0]), layer)
    for s, v in zip(counts.symbols(), counts):
        cx.routed_symbols.setdefault(s, v)
    return counts


@function(torch.bincount)
@method("bincount")
def f_bincount(cx, x, weights=None, minlength=0):
    if weights is not None:
        raise Unsupported("bincount(weights=...)")
    out = cx.emit("bincount", [T(x)], {"minlength": int(minlength)}, shape=cx.out_shape(), dtype=torch.int64)
    return out


def _sort(indices_only):
    def h(cx, x, dim=-1, descending=False, stable=False):
        x = T(x)
        if isinstance(dim, bool):  # sort(x, stable, dim=..)
            raise Unsupported("sort(stable, ...) positional form")
        outs = cx.emit("sort", [x], {"dim": int(dim), "descending": bool(descending), "stable": bool(stable)},
                       shapes=[x.shape, x.shape])
        outs[1].dtype = torch.int64
        return outs[1] if indices_only else tuple(outs)
    return h


function(torch.sort)(_sort(False))
method("sort")(_sort(False))
function(torch.argsort)(_sort(True))
method("argsort")(_sort(True))


@function(operator.floordiv, torch.floor_divide)
@method("floor_divide")
def f_floordiv(cx, a, b):
    if not isinstance(a, TRef) or isinstance(b, TRef) or isinstance(b, bool) or not isinstance(b, (int, float)):
        raise Unsupported("floor division other than tensor // number")
    return cx.emit("floor_divide", [a], {"scalar": b}, shape=a.shape)


def _scatter_add(inplace):
    def h(cx, x, dim, index, src):
        return cx.emit("scatter", [T(x), T(index, "index"), T(src)], {"dim": int(dim), "inplace": inplace,
                                                                       "reduce": "add"}, shape=T(x).shape)
    return h


function(torch.scatter_add)(_scatter_add(False))
method("scatter_add")(_scatter_add(False))
method("scatter_add_")(_scatter_add(True))


def _grouped_mm_fns():
    fns = [getattr(torch.nn.functional, "grouped_mm", None), getattr(torch, "_grouped_mm", None)]
    return [f for f in fns if f is not None]


def meta_grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    """torch._grouped_mm's output on meta tensors, as create_grouped_gemm_output_tensor
    (aten/src/ATen/native/GroupedMMUtils.h) makes it: [rows, N] with each row padded to 16 bytes.
    (The meta kernel insists on bf16 where the CPU kernel takes float32 too.)"""
    if a.dim() != 2 or b.dim() != 3 or bias is not None:
        raise Unsupported("grouped_mm other than a 2-D input × 3-D expert weights with offsets")
    dt = out_dtype or a.dtype
    align = 16 // torch.empty((), dtype=dt).element_size()
    n = b.shape[-1]
    padded = (n + align - 1) // align * align
    return torch.empty_strided((a.shape[0], n), (padded, 1), dtype=dt, device=a.device)


def f_grouped_mm(cx, a, b, offs=None, bias=None, out_dtype=None):
    a, b = T(a), T(b)
    if len(a.shape) != 2 or len(b.shape) != 3 or offs is None or bias is not None:
        raise Unsupported("grouped_mm other than a 2-D input × 3-D expert weights with offsets")
    return cx.emit("grouped_mm", [a, b, T(offs, "offs")], {}, shape=(a.shape[0], b.shape[-1]))


GROUPED_MM = tuple(_grouped_mm_fns())
function(*GROUPED_MM)(f_grouped_mm)


@function(torch.histc)
@method("histc")
def f_histc(cx, x, bins=100, min=0, max=0):
    """histc(x, bins, min, max): transformers' grouped experts count the tokens per expert with it
    (``integrations/moe.py``); a [bins] output of x's dtype (Note [MoE routing ops])."""
    x = T(x)
    if min == max:
        raise Unsupported("histc without a (min, max) range (its range comes from the data)")
    return cx.emit("histc", [x], {"bins": int(bins)}, shape=(int(bins),), dtype=x.dtype)
