"""Convert one shape-propagated fx GraphModule into memsim ops (concrete sizes, one probe).

The converter walks the fx graph in order.  Nodes whose recorded value holds no tensor (``x.size(0)``,
``x.shape``, ``torch._assert``, arithmetic on ints) emit nothing and keep their concrete value.
Every other node is mapped by a handler from the tables in :mod:`memsim_export.registry` (modules
by class, functions by object, methods by name), filled by :mod:`.ops_nn`, :mod:`.ops_pool`, :mod:`.ops_math` and
:mod:`.ops_shape`.  Handlers emit memsim ops through :class:`Context`; modules whose forward
is functional code fx cannot see are expanded by :mod:`memsim_export.expand`.

Attribute values are concrete integers for the probe's symbol values; :mod:`memsim_export.symbols`
merges several probes into symbolic sizes.
"""
import math

import torch
import torch.nn.functional as F

from . import ops_nn, ops_pool, ops_act, ops_math, ops_shape, ops_llm, ops_hf, ops_nn_extra  # noqa: F401  (register the handlers, in this order)
from .registry import FUNC_HANDLERS, METHOD_HANDLERS, MODULE_HANDLERS, TRef, Unsupported
from .registry import dtype_name  # noqa: F401  (re-exported for the exporter)
from .shapes import TInfo
from . import recorded

# Whether the fx path measures a call with no handler into a recorded op (Note [Recorded rules]):
# export_torch.py --trace fx; off (export_model's default, and --trace auto's fx attempt) it lists the
# call as unsupported, and --trace auto then records the model as it runs.
RECORD_UNSUPPORTED = False


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

    # An in-place write into a view can be emitted (a view_write op rebinding its base's later uses;
    # export by execution, record.EagerContext, renames every ref of the base once the node is named).
    writes_into_views = True

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
        self._rebinds = []
        self.env = {}

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
            outs.append(TRef(self.fresh(h), s, dtype, base=first if op in ("slice", "select") else None))
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

    def rebind(self, old, new):
        """An in-place write into ``old``'s storage made ``new``: once the node is named, every
        later use of ``old`` reads ``new`` (Note [Writes into views])."""
        self._rebinds.append((old, new))

    def _apply_rebinds(self):
        for old, new in self._rebinds:
            stale, fresh = old.name, new.name
            for v in self.env.values():
                for t in _flat_trefs(v):
                    if t.name == stale:
                        t.name = fresh
        self._rebinds = []

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
        env = self.env = {}
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
            result = self._record(node, args, kwargs, rec)
            if result is None:
                self._unsupported(u.what, u.detail)
                result = _placeholder_result(node.name, rec)
        self._finish_node(node)
        self._apply_rebinds()
        env[node.name] = result

    def _finish_node(self, node):
        # A node that emitted exactly one op with one output: name the output after the node.
        if len(self._node_ops) == 1 and len(self._node_ops[0][1]) == 1 and node.name not in self.used:
            rec, outs = self._node_ops[0]
            self.used.discard(outs[0].name)
            outs[0].name = node.name
            rec["outputs"] = [node.name]
            self.used.add(node.name)

    def _record(self, node, args, kwargs, rec):
        """A call with no handler as a recorded op (Note [Recorded rules]), or None when it cannot be."""
        if not RECORD_UNSUPPORTED or node.op not in ("call_function", "call_method", "call_module"):
            return None
        for r, _ in self._node_ops:  # what a refusing handler emitted before it refused
            self.ops.remove(r)
        self._node_ops = []
        try:
            return recorded.record_fx(self, node, args, kwargs, rec)
        except Exception:  # noqa: BLE001 - cannot run it on CPU tensors here: listed as unsupported
            return None

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
    import operator
    return node.op == "call_function" and node.target is operator.setitem


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


def namedtuple_handler(cx, *args, **kwargs):
    """Constructing a namedtuple of outputs (GoogLeNetOutputs, InceptionOutputs): no op."""
    return tuple(args) + tuple(kwargs.values())
