"""Convert one shape-propagated fx GraphModule into memsim ops (concrete sizes, one probe).

The converter walks the fx graph in order.  Nodes whose recorded value holds no tensor (``x.size(0)``,
``x.shape``, ``torch._assert``, arithmetic on ints) emit nothing and keep their concrete value.
Every other node is mapped by a handler from the tables below (modules by class, functions by
object, methods by name).  Handlers emit memsim ops through :class:`Context`; modules whose forward
is functional code fx cannot see are expanded by :mod:`memsim_export.expand`.

Attribute values are concrete integers for the probe's symbol values; :mod:`memsim_export.symbols`
merges several probes into symbolic sizes.
"""
import builtins
import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .shapes import TInfo

MODULE_HANDLERS = {}   # nn.Module class -> handler(cx, mod, path, *args, **kwargs)
FUNC_HANDLERS = {}     # function object -> handler(cx, *args, **kwargs)
METHOD_HANDLERS = {}   # Tensor method name -> handler(cx, self, *args, **kwargs)


class TRef:
    """A tensor in the memsim graph (by name) with its concrete shape in this probe."""
    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype=torch.float32):
        self.name = name
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = dtype

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return "TRef(%s, %s)" % (self.name, self.shape)


class Unsupported(Exception):
    def __init__(self, what, detail=""):
        super().__init__(what)
        self.what = what
        self.detail = detail


def module(*classes):
    def deco(fn):
        for c in classes:
            MODULE_HANDLERS[c] = fn
        return fn
    return deco


def function(*fns):
    def deco(fn):
        for f in fns:
            if f is not None:
                FUNC_HANDLERS[f] = fn
        return fn
    return deco


def method(*names):
    def deco(fn):
        for n in names:
            METHOD_HANDLERS[n] = fn
        return fn
    return deco


def dtype_name(dt):
    return {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
            torch.float64: "float64", torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8",
            torch.bool: "bool"}.get(dt) or _bad_dtype(dt)


def _bad_dtype(dt):
    raise Unsupported("dtype %s" % dt)


def _ilist(v):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return int(v)


def _pair_list(v, n=2):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return [int(v)] * n


def contains_tensor(v):
    if isinstance(v, (TInfo, TRef)):
        return True
    if isinstance(v, (list, tuple)):
        return any(contains_tensor(x) for x in v)
    if isinstance(v, dict):
        return any(contains_tensor(x) for x in v.values())
    return False


class Context:
    """Per-probe conversion state."""

    def __init__(self, gm, values, param_names, buffer_names):
        self.gm = gm
        self.values = values
        self.param_names = param_names      # id(tensor) -> name
        self.buffer_names = buffer_names
        self.ops = []
        self.unsupported = []
        self.used = set()
        self.node = None
        self.module_path = ""
        self._counter = 0
        self._node_ops = []

    # ---- naming -----------------------------------------------------------------------------
    def fresh(self, hint=None):
        base = self.node.name if self.node is not None else "t"
        if hint is None:
            self._counter += 1
            hint = str(self._counter)
        name = "%s:%s" % (base, hint)
        k = 2
        while name in self.used:
            name = "%s:%s_%d" % (base, hint, k)
            k += 1
        self.used.add(name)
        return name

    # ---- emission ---------------------------------------------------------------------------
    def emit(self, op, inputs, attrs=None, shape=None, dtype=None, n_out=None, shapes=None,
             module=None, hint=None):
        """Append one memsim op; returns its output TRef (or a list when n_out/shapes is given)."""
        in_names = []
        for t in inputs:
            if t is None:
                continue
            if not isinstance(t, TRef):
                raise Unsupported("%s with a non-tensor input %r" % (op, t))
            in_names.append(t.name)
        first = next((t for t in inputs if isinstance(t, TRef)), None)
        if dtype is None:
            dtype = first.dtype if first is not None else torch.float32
        multi = n_out is not None or shapes is not None
        if shapes is None:
            shapes = [shape] * (n_out if n_out is not None else 1)
        outs = []
        for i, s in enumerate(shapes):
            h = hint if len(shapes) == 1 else "%s%d" % (hint + "." if hint else "", i)
            outs.append(TRef(self.fresh(h), s, dtype))
        rec = {"op": op}
        mod = self.module_path if module is None else module
        if mod:
            rec["module"] = mod
        rec["inputs"] = in_names
        rec["outputs"] = [o.name for o in outs]
        if attrs:
            rec["attrs"] = {k: _json_number(v) for k, v in attrs.items()}
        self.ops.append(rec)
        self._node_ops.append((rec, outs))
        return outs if multi else outs[0]

    def param(self, t):
        """TRef for a parameter or buffer tensor (None stays None)."""
        if t is None:
            return None
        name = self.param_names.get(id(t)) or self.buffer_names.get(id(t))
        if name is None:
            raise Unsupported("tensor attribute that is neither a parameter nor a buffer",
                              "shape %s" % list(t.shape))
        return TRef(name, tuple(t.shape), t.dtype)

    def out_info(self):
        return self.values.get(self.node.name)

    def out_shape(self):
        v = self.out_info()
        return v.shape if isinstance(v, TInfo) else None

    def out_dtype(self):
        v = self.out_info()
        return v.dtype if isinstance(v, TInfo) else None

    # ---- driving ----------------------------------------------------------------------------
    def run(self, input_names):
        env = {}
        self.graph_names = set(input_names) | set(self.param_names.values()) | set(self.buffer_names.values())
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        out_value = None
        for node in self.gm.graph.nodes:
            self.node = node
            self.module_path = node.meta.get("memsim_module", "")
            self._node_ops = []
            self._counter = 0
            if node.op == "output":
                out_value = _load(node.args[0], env)
                break
            self._process(node, env, placeholders, input_names)
            keep = node.meta.get("memsim_keep")
            if keep:
                self.keep_alive([env.get(n.name) for n in keep])
        self.node = None
        return out_value

    def keep_alive(self, values):
        """Python still references these tensors when the last op so far finishes (a module's
        arguments and its forward's locals at return): ``attrs.keep_alive`` of that op."""
        if not self.ops:
            return
        names = []
        for v in values:
            for t in _flat_trefs(v):
                if t.name not in self.graph_names and t.name not in names:
                    names.append(t.name)
        op = self.ops[-1]
        names = [n for n in names if n not in op["inputs"] and n not in op["outputs"]]
        if not names:
            return
        cur = op.setdefault("attrs", {}).setdefault("keep_alive", [])
        cur.extend(n for n in names if n not in cur)

    def _process(self, node, env, placeholders, input_names):
        rec = self.values.get(node.name)
        if node.op == "placeholder":
            i = placeholders.index(node)
            if isinstance(rec, TInfo):
                env[node.name] = TRef(input_names[i], rec.shape, rec.dtype)
            else:
                env[node.name] = rec
            return
        if node.op == "get_attr":
            obj = _fetch_attr(self.gm, node.target)
            if isinstance(obj, torch.Tensor):
                try:
                    env[node.name] = self.param(obj)
                except Unsupported:
                    self._unsupported("tensor constant %s" % node.target,
                                      "a plain tensor attribute (register it as a buffer)")
                    env[node.name] = TRef(node.name, tuple(obj.shape), obj.dtype)
            else:
                env[node.name] = obj
            return
        if not contains_tensor(rec) and not _always_emit(node):
            env[node.name] = rec
            return
        args = _load(node.args, env)
        kwargs = _load(node.kwargs, env)
        try:
            result = self._dispatch(node, args, kwargs)
        except Unsupported as u:
            self._unsupported(u.what, u.detail)
            result = _placeholder_result(node.name, rec)
        self._finish_node(node)
        env[node.name] = result

    def _finish_node(self, node):
        # A node that emitted exactly one op with one output: name the output after the node.
        if len(self._node_ops) == 1 and len(self._node_ops[0][1]) == 1 and node.name not in self.used:
            rec, outs = self._node_ops[0]
            self.used.discard(outs[0].name)
            outs[0].name = node.name
            rec["outputs"] = [node.name]
            self.used.add(node.name)

    def _unsupported(self, what, detail=""):
        self.unsupported.append((what, self.node.name if self.node else "?", self.module_path, detail))

    def _dispatch(self, node, args, kwargs):
        if node.op == "call_module":
            mod = self.gm.get_submodule(node.target)
            h = _module_handler(type(mod))
            if h is None:
                raise Unsupported("module %s" % _class_name(type(mod)))
            return h(self, mod, node.target, *args, **kwargs)
        if node.op == "call_function":
            h = FUNC_HANDLERS.get(node.target)
            if h is None and isinstance(node.target, type) and issubclass(node.target, tuple) \
                    and hasattr(node.target, "_fields"):
                h = namedtuple_handler
            if h is None:
                raise Unsupported("function %s" % _func_name(node.target))
            return h(self, *args, **kwargs)
        if node.op == "call_method":
            h = METHOD_HANDLERS.get(node.target)
            if h is None:
                raise Unsupported("method Tensor.%s" % node.target)
            return h(self, *args, **kwargs)
        raise Unsupported("fx node kind %s" % node.op)

    def call_submodule(self, mod, path, *args, **kwargs):
        """Emit a (leaf) submodule's ops under its own module path (used by expansions)."""
        h = _module_handler(type(mod))
        if h is None:
            raise Unsupported("module %s" % _class_name(type(mod)), "inside %s" % self.module_path)
        saved = self.module_path
        self.module_path = path
        try:
            return h(self, mod, path, *args, **kwargs)
        finally:
            self.module_path = saved


def _json_number(v):
    """JSON has no inf/nan: they are written as the strings "inf", "-inf", "nan"."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    return v


def _flat_trefs(v):
    if isinstance(v, TRef):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat_trefs(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _flat_trefs(x)]
    return []


def _always_emit(node):
    return False


def _placeholder_result(name, rec):
    if isinstance(rec, TInfo):
        return TRef(name, rec.shape, rec.dtype)
    if isinstance(rec, (list, tuple)):
        return type(rec)(_placeholder_result("%s.%d" % (name, i), r) for i, r in enumerate(rec)) \
            if not hasattr(rec, "_fields") else tuple(_placeholder_result("%s.%d" % (name, i), r) for i, r in enumerate(rec))
    return rec


def _load(a, env):
    from torch.fx import Node
    if isinstance(a, Node):
        return env[a.name]
    if isinstance(a, tuple):
        return tuple(_load(x, env) for x in a)
    if isinstance(a, list):
        return [_load(x, env) for x in a]
    if isinstance(a, dict):
        return {k: _load(v, env) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_load(a.start, env), _load(a.stop, env), _load(a.step, env))
    return a


def _fetch_attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _module_handler(cls):
    for c in cls.__mro__:
        if c in MODULE_HANDLERS:
            return MODULE_HANDLERS[c]
    return None


def _class_name(cls):
    mod = cls.__module__
    short = mod
    if mod.startswith("torch.nn.modules"):
        short = "nn"
    return "%s.%s" % (short, cls.__name__)


def _func_name(fn):
    name = getattr(fn, "__name__", None)
    if name:
        for ns, prefix in ((torch, "torch"), (F, "torch.nn.functional"), (torch.Tensor, "torch.Tensor")):
            if getattr(ns, name, None) is fn:
                return "%s.%s" % (prefix, name)
    mod = getattr(fn, "__module__", None) or ""
    qual = getattr(fn, "__qualname__", None) or name or repr(fn)
    if mod in ("_operator", "operator"):
        return "operator.%s" % qual
    return "%s.%s" % (mod, qual) if mod else qual


# =================================================================================================
# helpers shared by handlers
# =================================================================================================

def T(x, what="input"):
    if not isinstance(x, TRef):
        raise Unsupported("non-tensor %s %r" % (what, x))
    return x


def norm_dim(d, ndim):
    return d + ndim if d < 0 else d


def _unary(op, extra=None):
    def h(cx, x, *rest, inplace=False, **kw):
        x = T(x)
        attrs = {"inplace": bool(inplace)}
        if extra:
            attrs.update(extra(*rest, **kw))
        return cx.emit(op, [x], attrs, shape=x.shape)
    return h


def _tuple_arg(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return list(args[0])
    return list(args)


def view_out_shape(shape_in, shape):
    numel = 1
    for s in shape_in:
        numel *= s
    out = list(shape)
    if -1 in out:
        known = 1
        for s in out:
            if s != -1:
                known *= s
        out[out.index(-1)] = numel // known if known else 0
    return tuple(out)


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


@module(nn.Conv1d, nn.Conv2d)
def m_conv(cx, mod, path, x):
    x = T(x)
    nd = 1 if isinstance(mod, nn.Conv1d) else 2
    if mod.padding_mode != "zeros":
        raise Unsupported("%s with padding_mode=%r" % (type(mod).__name__, mod.padding_mode))
    attrs = _conv_attrs((mod.stride, mod.dilation, mod.groups), nd, mod.weight.shape, mod.padding)
    return cx.emit("conv%dd" % nd, [x, cx.param(mod.weight), cx.param(mod.bias)], attrs, shape=cx.out_shape())


@function(F.conv1d, F.conv2d)
def f_conv(cx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x = T(x)
    nd = x.ndim - 2
    attrs = _conv_attrs((stride, dilation, groups), nd, weight.shape, padding)
    return cx.emit("conv%dd" % nd, [x, T(weight), bias], attrs, shape=cx.out_shape())


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


@module(nn.Hardtanh)
def m_hardtanh(cx, mod, path, x):
    # nn.ReLU6 is a Hardtanh subclass and is matched earlier (more specific class first in the MRO)
    x = T(x)
    if (mod.min_val, mod.max_val) != (0.0, 6.0):
        raise Unsupported("nn.Hardtanh(min_val=%g, max_val=%g)" % (mod.min_val, mod.max_val))
    return cx.emit("relu6", [x], {"inplace": bool(mod.inplace)}, shape=x.shape)


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


@module(nn.MaxPool2d)
def m_max_pool(cx, mod, path, x):
    if mod.return_indices:
        raise Unsupported("nn.MaxPool2d(return_indices=True)")
    return f_max_pool2d(cx, x, mod.kernel_size, mod.stride, mod.padding, mod.dilation, mod.ceil_mode)


@function(F.max_pool2d, getattr(torch, "max_pool2d", None))
def f_max_pool2d(cx, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    x = T(x)
    if return_indices:
        raise Unsupported("max_pool2d(return_indices=True)")
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        stride = kernel_size
    return cx.emit("max_pool2d", [x], {"kernel_size": _pair_list(kernel_size), "stride": _pair_list(stride),
                                       "padding": _pair_list(padding), "dilation": _pair_list(dilation),
                                       "ceil_mode": bool(ceil_mode)}, shape=cx.out_shape())


@module(nn.AvgPool2d)
def m_avg_pool(cx, mod, path, x):
    return f_avg_pool2d(cx, x, mod.kernel_size, mod.stride, mod.padding, mod.ceil_mode, mod.count_include_pad,
                        mod.divisor_override)


@function(F.avg_pool2d)
def f_avg_pool2d(cx, x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
    x = T(x)
    if divisor_override is not None:
        raise Unsupported("avg_pool2d(divisor_override=...)")
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        stride = kernel_size
    return cx.emit("avg_pool2d", [x], {"kernel_size": _pair_list(kernel_size), "stride": _pair_list(stride),
                                       "padding": _pair_list(padding), "ceil_mode": bool(ceil_mode),
                                       "count_include_pad": bool(count_include_pad)}, shape=cx.out_shape())


@module(nn.AdaptiveAvgPool2d)
def m_adaptive_avg(cx, mod, path, x):
    return f_adaptive_avg(cx, x, mod.output_size)


@function(F.adaptive_avg_pool2d)
def f_adaptive_avg(cx, x, output_size):
    x = T(x)
    osz = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size, output_size]
    osz = [x.shape[-2 + i] if s is None else int(s) for i, s in enumerate(osz)]
    return cx.emit("adaptive_avg_pool2d", [x], {"output_size": osz}, shape=x.shape[:-2] + tuple(osz))


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


@module(nn.Identity)
def m_identity(cx, mod, path, x, *a, **k):
    return x


# =================================================================================================
# activations as functions / methods
# =================================================================================================

def _act_fn(op, inplace_default=False, force_inplace=False):
    def h(cx, x, inplace=inplace_default, **kw):
        x = T(x)
        return cx.emit(op, [x], {"inplace": bool(inplace or force_inplace)}, shape=x.shape)
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


@function(F.hardtanh)
def f_hardtanh(cx, x, min_val=-1.0, max_val=1.0, inplace=False):
    x = T(x)
    if (min_val, max_val) != (0.0, 6.0):
        raise Unsupported("F.hardtanh(min_val=%g, max_val=%g)" % (min_val, max_val))
    return cx.emit("relu6", [x], {"inplace": bool(inplace)}, shape=x.shape)


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
                # number - X: same memory behaviour as X - number (saves nothing, one output)
                return cx.emit("sub", [b], {"scalar": a, "inplace": False, "reverse": True}, shape=b.shape)
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
def f_sdpa(cx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    q = T(q)
    attrs = {"dropout_p": float(dropout_p), "is_causal": bool(is_causal)}
    if scale is not None:
        attrs["scale"] = scale
    return cx.emit("scaled_dot_product_attention", [q, T(k), T(v), attn_mask], attrs,
                   shape=q.shape[:-1] + T(v).shape[-1:])


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
    if isinstance(split_size_or_sections, (list, tuple)):
        attrs = {"sections": [int(s) for s in split_size_or_sections], "dim": int(dim)}
    else:
        attrs = {"split_size": int(split_size_or_sections), "dim": int(dim)}
    return tuple(cx.emit("split", [x], attrs, shapes=shapes))


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


def tensor_index(cx, x, idx):
    """Python indexing ``x[idx]`` as ATen's applySlicing does it: ints → select, partial slices →
    slice (full slices are skipped), None → unsqueeze, one 1-D integer tensor → index_select."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    cur = x
    d = 0
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
            # ATen's applySlicing emits a slice for every slice item, `:` included (a view; only an
            # explicit 0:len is returned as is, which we do not special-case: it can depend on
            # the symbol values and costs nothing either way)
            size = cur.shape[d]
            start, stop, step = item.start, item.stop, item.step
            step = 1 if step is None else int(step)
            st = 0 if start is None else int(start)
            r = range(*slice(start, stop, step).indices(size))
            s = list(cur.shape)
            s[d] = len(r)
            end = None if stop is None or int(stop) >= 2 ** 62 else int(stop)
            cur = cx.emit("slice", [cur], {"dim": d, "start": st, "end": end, "step": step}, shape=tuple(s))
            d += 1
            continue
        if isinstance(item, TRef):
            if item.dtype in (torch.int64, torch.int32) and item.ndim == 1 and n_real == 1:
                s = list(cur.shape)
                s[d] = item.shape[0]
                cur = cx.emit("index_select", [cur, item], {"dim": d}, shape=tuple(s))
                d += 1
                continue
            raise Unsupported("advanced indexing with a %s tensor of shape %s" % (item.dtype, list(item.shape)))
        raise Unsupported("indexing with %r" % (item,))
    return cur


def _remaining_real(idx, ell):
    after = idx[idx.index(ell) + 1:]
    return sum(1 for i in after if i is not None and i is not Ellipsis)


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
    if start != 0 or step != 1:
        raise Unsupported("torch.arange with start/step", "arange(%s)" % ", ".join(map(str, args)))
    odt = cx.out_dtype() or torch.int64
    return cx.emit("arange", [], {"end": int(end), "dtype": dtype_name(odt)}, shape=(int(end),), dtype=odt)


def _cast_alias(cx, x, *args, **kwargs):
    x = T(x)
    odt = cx.out_dtype()
    if odt is not None and odt != x.dtype:
        raise Unsupported("dtype cast to %s" % dtype_name(odt) if odt in (torch.float16, torch.bfloat16,
                                                                        torch.float32) else "dtype cast")
    return x


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


@function(F.mse_loss)
def f_mse_loss(cx, x, target, size_average=None, reduce=None, reduction="mean"):
    return cx.emit("mse_loss", [T(x), T(target)], {"reduction": reduction}, shape=cx.out_shape())


# torch._assert and friends return None: they never reach a handler (no tensor in the value).
_ = builtins, math


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


@function(getattr(torch, "swapaxes", None), getattr(torch, "swapdims", None))
@method("swapaxes", "swapdims")
def t_swapaxes(cx, x, a, b):
    return t_transpose(cx, x, a, b)


def namedtuple_handler(cx, *args, **kwargs):
    """Constructing a namedtuple of outputs (GoogLeNetOutputs, InceptionOutputs): no op."""
    return tuple(args) + tuple(kwargs.values())
