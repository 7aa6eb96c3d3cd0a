"""torch.fx tracing with module scopes and in-place operator recording.

* Every fx node gets ``node.meta["memsim_module"]``: the dotted path of the nn.Module whose forward
  created it ("" for the root).
* ``a += b`` on a Proxy is recorded as ``operator.iadd`` (1.13's Proxy has no ``__iadd__``, so
  Python falls back to ``a = a + b`` and the in-place-ness is lost). Same for ``-=``, ``*=``, ``/=``.
"""
import dis
import inspect
import operator
import sys

import torch
import torch.fx as fx

from .errors import ExportError


class MemsimProxy(fx.Proxy):
    def __getattr__(self, k):
        return MemsimAttribute(self, k)

    def __iter__(self):
        # fx 1.13 finds the calling instruction with f_lasti // 2, which is wrong on Python 3.11
        # (inline caches); look it up by byte offset instead.
        frame = inspect.currentframe().f_back
        for inst in dis.get_instructions(frame.f_code):
            if inst.offset == frame.f_lasti:
                if inst.opname == "UNPACK_SEQUENCE":
                    return (self[i] for i in range(inst.argval))
                break
        return self.tracer.iter(self)

    def __iadd__(self, other):
        return self.tracer.create_proxy("call_function", operator.iadd, (self, other), {})

    def __isub__(self, other):
        return self.tracer.create_proxy("call_function", operator.isub, (self, other), {})

    def __imul__(self, other):
        return self.tracer.create_proxy("call_function", operator.imul, (self, other), {})

    def __itruediv__(self, other):
        return self.tracer.create_proxy("call_function", operator.itruediv, (self, other), {})

    def __setitem__(self, idx, value):  # x[idx] = value: a node of its own (Note [Writes into views])
        self.tracer.create_proxy("call_function", operator.setitem, (self, idx, value), {})


class MemsimAttribute(MemsimProxy, fx.proxy.Attribute):
    pass


class MemsimTracer(fx.Tracer):
    """fx.Tracer that records module scopes and in-place operators.

    Leaf modules: fx's default (every ``torch.nn`` module except Sequential) — the converter maps
    them, and expands the ones whose forward is functional code (MultiheadAttention,
    TransformerEncoderLayer, TransformerEncoder).  ``extra_leaves`` adds module classes.
    """

    def __init__(self, extra_leaves=()):
        super().__init__()
        self.memsim_scope = [""]
        self.extra_leaves = tuple(extra_leaves)
        self.proxy_buffer_attributes = True  # buffers used in forward become get_attr nodes

    def is_leaf_module(self, m, qualname):
        if self.extra_leaves and isinstance(m, self.extra_leaves):
            return True
        return super().is_leaf_module(m, qualname)

    def proxy(self, node):
        return MemsimProxy(node, self)

    def call_module(self, m, forward, args, kwargs):
        try:
            path = self.path_of_module(m)
        except NameError:
            path = self.memsim_scope[-1]
        self.memsim_scope.append(path)
        try:
            if self.is_leaf_module(m, path):
                return super().call_module(m, forward, args, kwargs)
            code = getattr(getattr(type(m), "forward", None), "__code__", None)
            with FrameLocals(code) as fl:
                out = super().call_module(m, forward, args, kwargs)
            self.mark_python_refs((args, kwargs, fl.locals))
            return out
        finally:
            self.memsim_scope.pop()

    def mark_python_refs(self, values):
        """Python keeps a module's arguments (the caller's stack) and its forward's locals alive until
        the forward returns: record them on the last node created so far (``memsim_keep``)."""
        last = None
        for last in reversed(self.graph.nodes):
            break
        if last is None:
            return
        keep = last.meta.setdefault("memsim_keep", [])
        for n in _proxy_nodes(values):
            if n is not last and n not in keep:
                keep.append(n)

    def mark_python_refs_before_output(self, values):
        """The root forward's locals: kept until its last node before ``output``."""
        last = None
        for n in reversed(self.graph.nodes):
            if n.op != "output":
                last = n
                break
        if last is None:
            return
        keep = last.meta.setdefault("memsim_keep", [])
        for n in _proxy_nodes(values):
            if n is not last and n not in keep and n.graph is self.graph:
                keep.append(n)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        node.meta["memsim_module"] = target if kind == "call_module" else self.memsim_scope[-1]
        return node


def _proxy_nodes(v, acc=None, depth=0):
    acc = [] if acc is None else acc
    if isinstance(v, fx.Proxy):
        try:
            acc.append(v.node)
        except Exception:  # noqa: BLE001 - an Attribute proxy that was never materialised
            pass
    elif depth < 4 and isinstance(v, (list, tuple)):
        for x in v:
            _proxy_nodes(x, acc, depth + 1)
    elif depth < 4 and isinstance(v, dict):
        for x in v.values():
            _proxy_nodes(x, acc, depth + 1)
    return acc


class FrameLocals:
    """Captures the locals of the first frame running ``code`` at the moment it returns."""

    def __init__(self, code):
        self.code = code
        self.locals = {}
        self.frame = None

    def _prof(self, frame, event, arg):
        if frame.f_code is not self.code:
            return
        if event == "call" and self.frame is None:
            self.frame = frame
        elif event == "return" and frame is self.frame:
            self.locals = {k: v for k, v in frame.f_locals.items() if not k.startswith("__")}

    def __enter__(self):
        self.old = sys.getprofile()
        if self.code is not None:
            sys.setprofile(self._prof)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self.old)
        self.frame = None


# Tensor factories take no tensor argument, so __torch_function__ never sees a Proxy passed as a
# size (``torch.arange(ids.shape[1])``); they are wrapped while tracing.
_FACTORIES = ("arange", "zeros", "ones", "full", "empty", "rand", "randn", "randint", "tensor", "linspace")


def _has_proxy(v):
    if isinstance(v, fx.Proxy):
        return v
    if isinstance(v, (list, tuple)):
        for x in v:
            p = _has_proxy(x)
            if p is not None:
                return p
    return None


def _wrap_factory(orig):
    def wrapper(*args, **kwargs):
        p = _has_proxy(args)
        if p is None:
            p = _has_proxy(list(kwargs.values()))
        if p is not None:
            return p.tracer.create_proxy("call_function", orig, args, kwargs)
        return orig(*args, **kwargs)
    wrapper.__wrapped__ = orig
    return wrapper


class _PatchFactories:
    def __enter__(self):
        self.saved = {n: getattr(torch, n) for n in _FACTORIES if hasattr(torch, n)}
        for n, f in self.saved.items():
            setattr(torch, n, _wrap_factory(f))

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(torch, n, f)


class _RefuseCustomFunctions:
    """A user's torch.autograd.Function runs its own backward, which fx would trace through as the
    forward's ops: tracing stops, and --trace auto records the model as it runs (Note [Recorded rules])."""

    def __enter__(self):
        self.owner = next(c for c in torch.autograd.Function.__mro__ if "apply" in c.__dict__)
        desc = self.owner.__dict__["apply"]

        def apply(cls, *args, **kwargs):
            if _has_proxy(list(args) + list(kwargs.values())) is not None and \
                    not (cls.__module__ or "").startswith("torch."):
                raise TypeError("%s is a torch.autograd.Function (its own backward)" % cls.__qualname__)
            return desc.__get__(None, cls)(*args, **kwargs)
        self.desc = desc
        torch.autograd.Function.apply = classmethod(apply)

    def __exit__(self, *exc):
        if self.owner is torch.autograd.Function:
            torch.autograd.Function.apply = self.desc
        else:
            del torch.autograd.Function.apply


def trace(model, concrete_args=None, extra_leaves=()):
    """Symbolically trace ``model``; returns a GraphModule sharing ``model``'s submodules."""
    tracer = MemsimTracer(extra_leaves)
    try:
        code = getattr(getattr(type(model), "forward", None), "__code__", None)
        with _PatchFactories(), _RefuseCustomFunctions():
            with FrameLocals(code) as fl:
                graph = tracer.trace(model, concrete_args=concrete_args)
            tracer.mark_python_refs_before_output(fl.locals)
    except Exception as e:  # fx raises TraceError, TypeError, AttributeError, ... on untraceable code
        raise ExportError("cannot trace %s with torch.fx: %s: %s%s" % (
            type(model).__name__, type(e).__name__, e, _user_frame(e))) from e
    name = model.__class__.__name__
    return fx.GraphModule(tracer.root, graph, name)


def _user_frame(exc):
    """' (at file:line in func)' for the innermost traceback frame outside torch/fx."""
    import traceback
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        f = fr.filename.replace("\\", "/")
        if "/torch/" in f or "/memsim_export/" in f:
            continue
        return " (at %s:%d in %s: %s)" % (fr.filename, fr.lineno, fr.name, (fr.line or "").strip())
    return ""
