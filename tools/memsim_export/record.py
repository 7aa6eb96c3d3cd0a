"""Export by execution: run the model on meta tensors and record what PyTorch calls.

Any Python around the tensors (asserts, ``*lead, seq, d = x.size()``, generators, helper
functions, ``if`` on shapes) simply runs.  Two levels are recorded:

* ``torch.overrides.TorchFunctionMode`` sees every torch function and Tensor method as the user
  calls it (``F.linear``, ``x + y``, ``x[ids]``).  Calls with a handler in the tables of
  :mod:`.registry` become the same memsim ops the fx path writes (so a model exports to the same
  graph either way).
* Functions without a handler (``torch.einsum``) run under a
  ``TorchDispatchMode`` that records the ATen ops they decompose into (permute, view, bmm, ...):
  exactly the sequence autograd sees.

Module paths come from global forward pre/post hooks.  Python lifetimes are observed directly:
every recorded tensor has a weakref finalizer, so a tensor that a Python name keeps alive past
its last use as an input (a local held until ``forward`` returns) gets a ``keep_alive`` entry on
the last op that ran before it died.  The model runs under ``torch.no_grad()`` so that no
autograd graph holds references.
"""
import contextlib
import gc
import operator
import weakref

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import expand, expand_rnn, ops_aten, ops_llm, ops_moe, ops_shape, recorded  # noqa: F401  (ops_llm, ops_moe register handlers)
from .convert import Context
from .registry import dtype_name
from .registry import ATEN_HANDLERS, FUNC_HANDLERS, METHOD_HANDLERS, PROPERTY_HANDLERS, TRef, Unsupported

# module class -> the fx path's expansion handler (cx, module, path, *args, **kwargs)
EXPANDED = {nn.MultiheadAttention: expand.m_mha, nn.TransformerEncoderLayer: expand.m_encoder_layer,
            nn.TransformerEncoder: expand.m_encoder,
            **{c: expand_rnn.m_rnn for c in (nn.RNN, nn.LSTM, nn.GRU)},
            **{c: expand_rnn.m_rnn_cell for c in (nn.RNNCell, nn.LSTMCell, nn.GRUCell)}}

# Tensor dunder methods → the operator functions the fx handlers are registered for.
_DUNDER = {
    "__add__": operator.add, "__sub__": operator.sub, "__mul__": operator.mul, "__truediv__": operator.truediv,
    "__div__": operator.truediv, "__iadd__": operator.iadd, "__isub__": operator.isub, "__imul__": operator.imul,
    "__itruediv__": operator.itruediv, "__floordiv__": operator.floordiv, "__getitem__": operator.getitem, "__matmul__": operator.matmul,
    "__eq__": operator.eq, "__ne__": operator.ne, "__lt__": operator.lt, "__le__": operator.le,
    "__gt__": operator.gt, "__ge__": operator.ge, "__neg__": operator.neg, "__pow__": operator.pow,
    "__radd__": "radd", "__rmul__": "rmul", "__rsub__": torch.rsub, "__rtruediv__": "rtruediv",
    "__rdiv__": "rtruediv", "__and__": operator.and_, "__or__": operator.or_, "__invert__": operator.invert,
}
_SWAPPED = {"radd": operator.add, "rmul": operator.mul}


class _Node:
    """Stands for the fx node the handlers name their outputs after."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class EagerContext(Context):
    """Context for recorded execution: tensors are real (meta) tensors, mapped to TRefs by id."""
    writes_into_views = True  # Context.writes_into_views: _apply_rebinds renames the written base's refs

    def __init__(self, param_names, buffer_names):
        super().__init__(None, {}, param_names, buffer_names)
        self.refs = {}          # id(tensor) -> TRef
        self.deaths = []        # (TRef name, number of ops emitted when it died)
        self.result = None      # the real result of the call being converted
        self.module_stack = [""]
        self.node_names = {}
        self.paused = False     # True while an expanded module runs (ExpandedModules)
        self.pending = []       # recorded ops to measure: (op record, callable, args, kwargs, input specs)
        self.routings = {}      # id(bincount result) -> (routing index, counted elements) (ops_moe)
        self.routing_counts = []        # (routing index, counted elements) of each routing, in forward order
        self.routed_symbols_order = []  # experts of each routing, in forward order
        self.routed_symbols = {}        # routed<L>_e<i> -> its balanced count at this probe
        self.on_cpu = False     # the model runs on CPU tensors (values kept for recorded ops)
        self.preexisting = {}   # id -> tensor: every tensor alive before the call (constants)
        self.constants = []     # (buffer name, tensor): plain tensor attributes the call read
        self.aliases = {}       # id(detached alias) -> (alias, argument) while a composite runs (AtenRecorder.run)

    def unique(self, base):
        """base, base_1, base_2, ...: the first one not yet used as a tensor or node name."""
        k = self.node_names.get(base, 0)
        name = base if k == 0 else "%s_%d" % (base, k)
        while name in self.used:
            k += 1
            name = "%s_%d" % (base, k)
        self.node_names[base] = k + 1
        return name

    # handlers ask for the output's shape/dtype: the real result's
    def out_info(self):
        return self.result

    def out_shape(self):
        r = self.result
        return tuple(r.shape) if isinstance(r, torch.Tensor) else None

    def out_dtype(self):
        r = self.result
        return r.dtype if isinstance(r, torch.Tensor) else None

    def ref(self, t):
        r = self.refs.get(id(t))
        if r is not None:
            return r
        if id(t) in self.aliases:  # a detached alias of a composite's argument (AtenRecorder.run)
            return self.ref(self.aliases[id(t)][1])
        try:
            r = self.param(t)
        except Unsupported:
            if id(t) in self.preexisting:  # a plain tensor attribute or global: a constant buffer
                return self._constant(t)
            if t.dim() == 0 and self.node is not None:
                # a Python number ATen wrapped into a 0-dim tensor (index_put_'s value, lift_fresh)
                r = self.emit("full", [], {"shape": [], "dtype": dtype_name(t.dtype)}, shape=(), dtype=t.dtype)
                self.bind(t, r)
                return r
            raise Unsupported("a tensor made outside the recorded model call",
                              "shape %s (a plain tensor attribute? register it as a buffer)" % list(t.shape))
        return r

    def _constant(self, t):
        """A tensor that existed before the model call and is neither a parameter nor a buffer (torchvision's
        AnchorGenerator.cell_anchors, a list attribute): a buffer of the graph, named after the module that
        first reads it (Note [Constants read in forward])."""
        base = (self.module_stack[-1] + "." if self.module_stack[-1] else "") + "_constant"
        name = self.unique(base)
        self.buffer_names[id(t)] = name
        self.graph_names.add(name)
        self.constants.append((name, t))
        return TRef(name, tuple(t.shape), t.dtype)

    def mark_value_read(self, t):
        """Python read t's value (`if x.sum() > 0`, `.item()`) on CPU tensors: the op that made t is
        marked data_dependent, so memsim's report says the graph follows the exported input."""
        r = self.refs.get(id(t))
        for rec in reversed(self.ops if r is not None else []):
            if r.name in rec["outputs"]:
                rec.setdefault("attrs", {})["data_dependent"] = True
                return

    def _apply_rebinds(self):
        """In-place writes (Note [Writes into views]), once the node is named: every tensor known
        as the written base is now read as the write's output."""
        for old, new in self._rebinds:
            stale = old.name
            for r in self.refs.values():
                if r.name == stale:
                    r.name = new.name
        self._rebinds = []

    def bind(self, t, r):
        """t is now known as r; its death is recorded."""
        old = self.refs.get(id(t))
        self.refs[id(t)] = r
        if old is None:
            weakref.finalize(t, self._died, id(t))

    def _died(self, key):
        r = self.refs.pop(key, None)
        if r is not None:
            self.deaths.append((r.name, len(self.ops)))

    def to_refs(self, v):
        if isinstance(v, torch.Tensor):
            return self.ref(v)
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(self.to_refs(x) for x in v)
        if isinstance(v, list):
            if hasattr(v, "symbols"):  # routed token counts (ops_moe.RoutedCounts): no tensors
                return v
            return [self.to_refs(x) for x in v]
        if isinstance(v, dict):
            return {k: self.to_refs(x) for k, x in v.items()}
        return v

    def bind_result(self, real, refs):
        if isinstance(real, torch.Tensor):
            if isinstance(refs, TRef):
                self.bind(real, refs)
            elif isinstance(refs, (list, tuple)) and len(refs) >= 1 and isinstance(refs[0], TRef):
                self.bind(real, refs[0])
            return
        if isinstance(real, (list, tuple)) and isinstance(refs, (list, tuple)):
            for a, b in zip(real, refs):
                self.bind_result(a, b)

    def convert(self, handler, name, real, args, kwargs, fallback=None):
        """Run one handler on TRefs, with `real` (the call's result) as the output info; where the
        handler refuses the call, fallback(name, real, args, kwargs) records it instead."""
        self.node = _Node(self.unique(name))
        self._node_ops = []
        self._counter = 0
        self.module_path = self.module_stack[-1]
        self.result = real
        try:
            refs = _call_handler(handler, self, self.to_refs(args), self.to_refs(kwargs))
        except Unsupported as u:
            for rec, _ in self._node_ops:
                self.ops.remove(rec)
            if fallback is not None and RECORD:
                self.node = None
                return fallback(name, real, args, kwargs)
            self.unsupported.append((u.what, name, self.module_path, u.detail))
            refs = None
            self._rebinds = []
        if self.on_cpu and refs is not None and _values_decide_sizes(name, args):
            for rec, _ in self._node_ops:
                rec.setdefault("attrs", {})["data_dependent"] = True
        self._finish_node(self.node)
        self._apply_rebinds()
        self.node = None
        if refs is not None:
            self.bind_result(real, refs)
        return refs

    def record_op(self, call, name, real, args, kwargs, target, what=None):
        """An op with no rule: a `recorded` op whose plan recorded.measure fills in after the run
        (without RECORD: |what| is listed as unsupported). A call that returns no tensor (a value
        read: `_local_scalar_dense` of `bool(t)` or `.item()`) makes no node and allocates nothing
        on the device: nothing is recorded."""
        if not recorded.flat_tensors(real):
            return None
        if not RECORD:
            self.unsupported.append((what or target, name, self.module_stack[-1], ""))
            return None
        tensors = []
        sargs, skw = recorded.spec_args(args, tensors), recorded.spec_args(kwargs, tensors)
        self.node = _Node(self.unique(name))
        self._node_ops = []
        self._counter = 0
        self.module_path = self.module_stack[-1]
        outs = recorded.flat_tensors(real)
        try:
            ins = [self.ref(t) for t in tensors]
        except Unsupported as u:
            self.unsupported.append((u.what, name, self.module_path, u.detail))
            return None
        refs = self.emit("recorded", ins, {"target": target}, shapes=[tuple(o.shape) for o in outs],
                         dtype=outs[0].dtype if outs else None)
        self.pending.append((self.ops[-1], call, sargs, skw,
                             [recorded.TSpec(t, k, self.on_cpu) for k, t in enumerate(tensors)]))
        self._finish_node(self.node)
        self.node = None
        for o, r in zip(outs, refs):
            self.bind(o, r)
        return refs

    def measure_pending(self):
        """Fills in the plans of the recorded ops (each distinct call measured once)."""
        cache = {}
        for rec, call, sargs, skw, specs in self.pending:
            key = (rec["attrs"]["target"], repr(sargs), repr(skw), id(specs) if self.on_cpu else 0)
            if key not in cache:
                try:
                    cache[key] = recorded.measure_any(call, sargs, skw, specs)
                    shapes = [cache[key]["out%d_shape" % j] for j in range(len(rec["outputs"]))]
                    if self.on_cpu and recorded.data_dependent(call, sargs, skw, specs, shapes, rec["attrs"]["target"]):
                        cache[key]["data_dependent"] = True
                except Exception as e:  # noqa: BLE001 - the op's own error on CPU tensors
                    self.unsupported.append(("recording %s" % rec["attrs"]["target"], rec["outputs"][0],
                                             rec.get("module", ""), "%s: %s" % (type(e).__name__, e)))
                    continue
            rec["attrs"].update(cache[key])
        self.pending = []

    def add_keep_alive(self):
        """A tensor that died after its last use: kept alive (keep_alive) until the op before it died."""
        last_use = {}
        made = {}
        for i, op in enumerate(self.ops):
            for n in op["inputs"]:
                last_use[n] = i
            for n in op["outputs"]:
                made.setdefault(n, i)
        for name, n_ops in self.deaths:
            at = n_ops - 1
            if name not in made or at <= max(last_use.get(name, -1), made[name]):
                continue
            op = self.ops[at]
            keep = op.setdefault("attrs", {}).setdefault("keep_alive", [])
            if name not in keep:
                keep.append(name)




# Calls through which Python reads a tensor's value (a branch on it, a count): Note [Data-dependent sizes].
_VALUE_READS = {"bool", "item", "tolist", "int", "float", "index"}


def _call_handler(handler, cx, args, kwargs):
    """handler(cx, *args, **kwargs); a keyword its rule does not take (`torch.pow(x, 2, out=buf)`
    in a legacy autograd.Function) is a call the rule refuses, so that it is recorded instead."""
    try:
        return handler(cx, *args, **kwargs)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise Unsupported("%s with %s" % (getattr(handler, "__name__", "op"), str(e).split("argument", 1)[1].strip())) from e


def _values_decide_sizes(name, args):
    """Whether a call's result sizes follow its inputs' values (Note [Data-dependent sizes]): an export
    on CPU tensors marks the ops it emits for it "data_dependent"."""
    if name in recorded.VALUE_SIZED_OPS:
        return True
    if name == "where" and len(args) == 1:
        return True
    if name in ("getitem", "setitem") and len(args) > 1:  # indexing with a boolean mask
        idx = args[1] if isinstance(args[1], tuple) else (args[1],)
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in idx)
    return False


def _func_name(func):
    name = getattr(func, "__name__", None) or "op"
    return name.strip("_") or "op"


def _is_tensor_method(func, name):
    return getattr(torch.Tensor, name, None) is func or getattr(torch._C._TensorBase, name, None) is func


def find_handler(func):
    """(handler, swapped): the handler of a torch function, Tensor method or operator."""
    h = FUNC_HANDLERS.get(func)
    if h is not None:
        return h, False
    if getattr(func, "memsim_getitem", False):
        return FUNC_HANDLERS.get(operator.getitem), False
    if getattr(func, "memsim_setitem", False):
        return FUNC_HANDLERS.get(operator.setitem), False
    name = getattr(func, "__name__", None)
    if name == "__get__":  # a Tensor property (weight.T)
        prop = getattr(func, "__self__", None)
        owner = getattr(prop, "__objclass__", None)
        if isinstance(owner, type) and issubclass(torch.Tensor, owner):
            return PROPERTY_HANDLERS.get(getattr(prop, "__name__", None)), False
        return None, False
    if name in _DUNDER and _is_tensor_method(func, name):
        target = _DUNDER[name]
        if target in _SWAPPED:
            return FUNC_HANDLERS.get(_SWAPPED[target]), True
        if target == "rtruediv":
            return FUNC_HANDLERS.get(operator.truediv), True
        return FUNC_HANDLERS.get(target), False
    if name and _is_tensor_method(func, name):
        return METHOD_HANDLERS.get(name), False
    return None, False


def _has_tensor(v):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_tensor(x) for x in v)
    if isinstance(v, dict):
        return any(_has_tensor(x) for x in v.values())
    return False


class AtenRecorder(TorchDispatchMode):
    """Records the ATen ops of a composite call (einsum, F.cosine_embedding_loss) through ATEN_HANDLERS
    and the fx-level handlers of ops_aten's tables (Note [ATen ops on explicit rules] in docs/exporter.md)."""

    def __init__(self, cx):
        super().__init__()
        self.cx = cx

    def run(self, func, args, kwargs):
        """func(*args, **kwargs) under this mode with grad mode on, its arguments that require grad
        (parameters: the model runs under no_grad) replaced by detached aliases: no autograd graph is
        built, and an op the composite runs under its own no-grad guard (cosine_similarity's
        clamp_min_ of the norms) is seen with grad mode off. Other tensors pass as they are, so an
        in-place change of their sizes (`output.resize_as_(input)`) stays theirs."""
        cx = self.cx
        outer = cx.aliases
        cx.aliases = dict(outer)

        def detach(v):
            if isinstance(v, torch.Tensor) and v.requires_grad:
                d = v.detach()
                cx.aliases[id(d)] = (d, v)
                return d
            if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
                return type(v)(detach(x) for x in v)
            if isinstance(v, dict):
                return {k: detach(x) for k, x in v.items()}
            return v

        def original(v):
            if isinstance(v, torch.Tensor):
                a = cx.aliases.get(id(v))
                return a[1] if a is not None and a[0] is v else v
            if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
                return type(v)(original(x) for x in v)
            return v
        try:
            dargs, dkwargs = detach(args), detach(kwargs)
            with torch.enable_grad(), self:
                out = func(*dargs, **dkwargs)
            del dargs, dkwargs
            out = original(out)
        finally:
            for key, (d, v) in cx.aliases.items():
                r = cx.refs.pop(key, None) if key not in outer else None
                if r is not None:  # written in place: the argument is now read as the write's output
                    cx.bind(v, r)
            cx.aliases = outer
        return out

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        overload = str(func)
        h = ATEN_HANDLERS.get(overload) or ATEN_HANDLERS.get(name) or ops_aten.aten_handler(overload)
        grad = torch.is_grad_enabled()
        try:
            with torch.no_grad():
                out = func(*args, **kwargs)
        except NotImplementedError:
            if h is not None:
                raise
            out = recorded.run_on_cpu(func, args, kwargs)  # no meta kernel: its sizes from CPU tensors
        if not grad and name.endswith("_") and args and out is args[0]:
            return out  # an in-place write under the composite's no-grad guard: no node, no allocation
        if h is None:  # no memsim rule: measured (Note [Recorded rules])
            self.cx.record_op(func, name, out, args, kwargs, overload, "ATen op %s" % func)
            return out

        def fallback(name, real, _args, _kwargs):  # the handler refused these arguments: measured
            return self.cx.record_op(func, name, real, args, kwargs, overload, "ATen op %s" % func)
        self.cx.convert(h, name, out, args, kwargs, fallback=fallback)
        return out


# Whether an op with no rule is measured into a recorded op (Note [Recorded rules]); off
# (export_torch.py --no-recorded) it is listed as unsupported.
RECORD = True

# Names of torch functions recorded (Note [Recorded rules]) although a handler exists: the round trip of
# tests/export/test_recorded.py, which compares a recorded rule with the explicit one.
ALWAYS_RECORD = set()


class FunctionRecorder(TorchFunctionMode):
    def __init__(self, cx):
        super().__init__()
        self.cx = cx

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.cx.paused:  # inside an expanded module (ExpandedModules): its handler emits
            return func(*args, **kwargs)
        name = _func_name(func)
        if self.cx.on_cpu and name in _VALUE_READS and args and isinstance(args[0], torch.Tensor):
            self.cx.mark_value_read(args[0])
        if name == "tolist" and args and id(args[0]) in self.cx.routings:
            return ops_moe.routed_tolist(self.cx, args[0])  # data-dependent counts (Note [Routed token counts])
        h, swapped = find_handler(func)
        if name == "bincount" and args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
            out = ops_moe.meta_bincount(self.cx, *args, **kwargs)
            self.cx.convert(h, name, out, args, kwargs)
            return out
        if name == "setitem" and args and isinstance(args[0], torch.Tensor):  # Note [Writes into views]
            out = func(*args, **kwargs)
            self.cx.convert(ops_shape.setitem_by_execution, name, args[0], args, kwargs, fallback=self._record(func, args))
            return out
        if func in ops_moe.GROUPED_MM and args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
            out = ops_moe.meta_grouped_mm(*args, **kwargs)  # the meta kernel refuses float32
            self.cx.convert(h, name, out, args, kwargs)
            return out
        if h is not None and name in ALWAYS_RECORD:
            out = func(*args, **kwargs)
            self.cx.record_op(func, _func_name(func), out, args, kwargs, _qual_name(func))
            return out
        if h is None and _needs_recording(func, args, kwargs):
            # no memsim op for the call as a whole (torch.einsum): record the ATen ops it runs
            return AtenRecorder(self.cx).run(func, args, kwargs)
        out = func(*args, **kwargs)
        if h is None or not (_has_tensor(out) or _is_inplace_call(func)):
            return out
        call_args = (args[1], args[0]) + tuple(args[2:]) if swapped else args
        self.cx.convert(h, _func_name(func), out, call_args, kwargs, fallback=self._record(func, args))
        return out

    def _record(self, func, args):
        """Where the handler refuses the call: a recorded op of func on its own arguments (unswapped:
        `2.0 / x` is Tensor.__rdiv__(x, 2.0))."""
        def fallback(name, real, _handler_args, kwargs):
            return self.cx.record_op(func, name, real, args, kwargs, _qual_name(func))
        return fallback


def _qual_name(func):
    if getattr(func, "memsim_getitem", False) or getattr(func, "memsim_setitem", False):
        return "torch.Tensor.__%s__" % ("getitem" if getattr(func, "memsim_getitem", False) else "setitem")
    mod = getattr(func, "__module__", None) or ""
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return "%s.%s" % (mod, qual) if mod else qual


def _is_inplace_call(func):
    name = getattr(func, "__name__", "")
    return name.endswith("_") and not name.startswith("_")


_PASSIVE = {"__get__", "__set__", "size", "dim", "numel", "is_floating_point", "__len__", "__bool__",
            "__format__", "__repr__", "__hash__", "stride", "is_contiguous", "data_ptr", "element_size",
            "__iter__", "storage_offset", "_has_compatible_shallow_copy_type", "requires_grad_",
            "__reduce_ex__", "__deepcopy__", "__setstate__", "__index__", "__int__", "__float__",
            "tolist", "item", "dim_order", "ndimension", "nelement", "get_device", "is_complex"}


def _needs_recording(func, args, kwargs):
    """Calls that make or change tensors but have no handler (not attribute reads and queries)."""
    name = getattr(func, "__name__", "")
    if name in _PASSIVE:
        return False
    return True


class ModulePaths:
    """Global forward hooks keeping cx.module_stack = the dotted path of the running module."""

    def __init__(self, cx, model):
        self.cx = cx
        self.paths = {}
        for n, m in model.named_modules(remove_duplicate=False):
            self.paths.setdefault(id(m), n)

    def _pre(self, mod, inputs):
        self.cx.module_stack.append(self.paths.get(id(mod), self.cx.module_stack[-1]))

    def _post(self, mod, inputs, out):
        if len(self.cx.module_stack) > 1:
            self.cx.module_stack.pop()

    def __enter__(self):
        from torch.nn.modules import module as M
        self.h = [M.register_module_forward_pre_hook(self._pre), M.register_module_forward_hook(self._post)]
        return self

    def __exit__(self, *exc):
        for h in self.h:
            h.remove()


# torch 1.13's advanced indexing (``x[b, idx]``: tensors in the index) runs without consulting the
# torch-function mode (2.x dispatches it as __getitem__); the wrapper below dispatches it itself.
_INDEXING_SKIPS_MODES = torch.__version__.startswith("1.")


@contextlib.contextmanager
def _tuple_indexing():
    """torch 1.13 indexes a plain tensor with a lone int or slice (``x[:t]``, ``x[0]``) without
    consulting the torch-function mode; ``x[(i,)]`` is the same indexing and is seen."""
    orig, orig_set = torch.Tensor.__getitem__, torch.Tensor.__setitem__
    inside = [False]

    def dispatched(fn, real, self, idx, *value):
        if _INDEXING_SKIPS_MODES and not inside[0] and any(isinstance(i, torch.Tensor) for i in idx):
            inside[0] = True  # the mode's own call of fn below runs the real indexing
            try:
                return torch.overrides.handle_torch_function(fn, (self,), self, idx, *value)
            finally:
                inside[0] = False
        return real(self, idx, *value)

    def getitem(self, idx):
        return dispatched(getitem, orig, self, idx if isinstance(idx, tuple) else (idx,))

    def setitem(self, idx, value):
        return dispatched(setitem, orig_set, self, idx if isinstance(idx, tuple) else (idx,), value)
    getitem.memsim_getitem = True
    setitem.memsim_setitem = True
    torch.Tensor.__getitem__, torch.Tensor.__setitem__ = getitem, setitem
    try:
        yield
    finally:
        torch.Tensor.__getitem__, torch.Tensor.__setitem__ = orig, orig_set


def _unrecorded(cx, fn, *args, **kwargs):
    """fn(*args, **kwargs) with recording paused: the ops it runs inside are not recorded (the caller
    records the whole call as one op)."""
    cx.paused = True
    try:
        return fn(*args, **kwargs)
    finally:
        cx.paused = False


class ExpandedModules:
    """Modules whose forward is one functional call the recorder cannot see into at the right level
    (nn.MultiheadAttention → F.multi_head_attention_forward; the transformer encoder stack) run
    unrecorded; the fx path's expansion (:mod:`.expand`) then emits what 1.13 runs in training, from
    the module, its arguments and its real outputs."""

    def __init__(self, cx, model):
        self.cx = cx
        self.wrapped = []
        for path, m in model.named_modules():
            h = next((EXPANDED[c] for c in type(m).__mro__ if c in EXPANDED), None)
            if h is not None:
                self.wrapped.append((m, path, h))

    def _forward(self, m, path, h, orig):
        cx = self.cx

        def forward(*args, **kwargs):
            if cx.paused:
                return orig(*args, **kwargs)
            out = _unrecorded(cx, orig, *args, **kwargs)
            cx.convert(lambda c, *a, **k: h(c, m, path, *a, **k), path.replace(".", "_") or "root", out,
                       args, kwargs)
            return out
        return forward

    def __enter__(self):
        for m, path, h in self.wrapped:
            m.forward = self._forward(m, path, h, m.forward)
        return self

    def __exit__(self, *exc):
        for m, _, _ in self.wrapped:
            del m.forward


class _CustomFunctions:
    """A user's torch.autograd.Function runs as one op: its forward unrecorded, then a `recorded` op
    measured from the real Function (its own backward), as autograd sees one node."""

    def __init__(self, cx):
        self.cx = cx
        self.owner = next(c for c in torch.autograd.Function.__mro__ if "apply" in c.__dict__)
        self.desc = self.owner.__dict__["apply"]

    def __enter__(self):
        cx, desc = self.cx, self.desc

        def apply(cls, *args, **kwargs):
            orig = desc.__get__(None, cls)
            if cx.paused or (cls.__module__ or "").startswith("torch."):
                return orig(*args, **kwargs)
            out = _unrecorded(cx, orig, *args, **kwargs)
            cx.record_op(orig, cls.__name__, out, args, kwargs, "%s.apply" % cls.__qualname__)
            return out
        torch.autograd.Function.apply = classmethod(apply)
        return self

    def __exit__(self, *exc):
        if self.owner is torch.autograd.Function:
            torch.autograd.Function.apply = self.desc
        else:
            del torch.autograd.Function.apply


def record(model, args, input_names, param_names, buffer_names, by_name=False, loss_fn=None, on_cpu=False):
    """Run model(*args) (model(**{name: arg}) when by_name: inputs given by the forward argument's
    name, e.g. a transformers model's labels=) on meta tensors; return (EagerContext, output as TRefs).
    With loss_fn (--loss FILE.py:FUNC), the last arg is the target: loss_fn(output, target) runs
    after the model, recorded under module "loss", and the output is (model output, loss)."""
    cx = EagerContext(param_names, buffer_names)
    cx.on_cpu = on_cpu
    cx.used.update(input_names)
    cx.used.update(param_names.values())
    cx.used.update(buffer_names.values())
    cx.graph_names = set(input_names) | set(param_names.values()) | set(buffer_names.values())
    for t, n in zip(args, input_names):
        cx.bind(t, TRef(n, tuple(t.shape), t.dtype))
    known = set(param_names) | set(buffer_names) | {id(t) for t in args}
    cx.preexisting = {id(o): o for o in gc.get_objects() if isinstance(o, torch.Tensor) and id(o) not in known}
    with torch.no_grad(), ModulePaths(cx, model), ExpandedModules(cx, model), _tuple_indexing(), \
            FunctionRecorder(cx), _CustomFunctions(cx):
        n = len(args) - (loss_fn is not None)
        out = model(**dict(zip(input_names[:n], args[:n]))) if by_name else model(*args[:n])
        if loss_fn is not None:
            cx.module_stack.append("loss")
            out = (out, loss_fn(out, args[n]))
            cx.module_stack.pop()
    cx.measure_pending()
    if cx.unsupported:
        return cx, None
    refs = _out_refs(cx, out)
    del out, args
    cx.add_keep_alive()
    return cx, refs


def _out_refs(cx, v):
    if isinstance(v, torch.Tensor):
        return cx.refs.get(id(v)) or cx.param(v)
    if isinstance(v, dict):
        return {k: _out_refs(cx, x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_out_refs(cx, x) for x in v) if not hasattr(v, "_fields") else \
            tuple(_out_refs(cx, x) for x in v)
    return v
