"""A recorded rule for an op memsim has no rule for (Note [Recorded rules] in docs/op-rules.md).

The op runs once on small real CPU tensors of its own sizes, with every floating input requiring
grad, under PyTorch's profiler with ``profile_memory`` (an ordered log of the CPU allocator's
allocations and frees, with their addresses) and ``saved_tensors_hooks`` (what its autograd node
saves); then ``torch.autograd.grad`` runs its backward under the same log. From the two logs:

* the forward program: every buffer allocated during the call, in order, and freed where it was
  freed (``A<k>`` / ``F<k>``); the outputs' buffers (``fwd_outputs``);
* the saved set: inputs and outputs the node saves (matched to the hooks by storage), and every
  other forward buffer still alive when the call returns (only the node holds it);
* the backward program: its buffers (``A<k>`` / ``F<k>``), each input's grad (``bwd_grads``; -2:
  the incoming grad passed through), and where a saved buffer is released (``R<k>``).

Each buffer's size is written as measured (``fwd_bytes`` / ``bwd_bytes``, made symbolic by the
probe merge) and, where it equals the bytes of one of the op's inputs or outputs or their elements
times 1, 2, 4 or 8 bytes, as that relation (``fwd_like`` / ``bwd_like``: ``i0``, ``o0``, ``i1x4``;
``-``: the fixed measured bytes), so the rule scales with the graph's symbols.
"""
import re

import torch

# Buffers smaller than this are not matched to a tensor (a scalar's 4 bytes would match any
# 1-element input by accident): they keep their measured bytes.
MIN_LIKE_BYTES = 64


class TSpec:
    """A tensor argument of a recorded call: its sizes and dtype (the meta tensor itself is not kept,
    so that recording does not change when Python frees it); with value=True, a copy of its values
    too (an export run on CPU tensors: the op is measured on the values it ran on, so a data-dependent
    size, nms's kept boxes, is the one of the exported input)."""
    __slots__ = ("shape", "dtype", "index", "value")

    def __init__(self, t, index, value=False):
        self.shape = tuple(int(s) for s in t.shape)
        self.dtype = t.dtype
        self.index = index
        self.value = t.detach().clone() if value and not t.is_meta else None

    def __repr__(self):
        return "T%d%s%s" % (self.index, list(self.shape), self.dtype)


def spec_args(v, tensors):
    """v with each tensor replaced by a TSpec numbered in order of first appearance (tensors: the
    list of distinct tensors seen so far, extended in place)."""
    if isinstance(v, torch.Tensor):
        for k, t in enumerate(tensors):
            if t is v:
                return TSpec(v, k)
        tensors.append(v)
        return TSpec(v, len(tensors) - 1)
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(spec_args(x, tensors) for x in v)
    if isinstance(v, list):
        return [spec_args(x, tensors) for x in v]
    if isinstance(v, dict):
        return {k: spec_args(x, tensors) for k, x in v.items()}
    if isinstance(v, torch.device) or (isinstance(v, str) and v == "meta"):
        return torch.device("cpu")
    return v


def _real(v, reals):
    if isinstance(v, TSpec):
        return reals[v.index]
    if isinstance(v, tuple):
        return tuple(_real(x, reals) for x in v)
    if isinstance(v, list):
        return [_real(x, reals) for x in v]
    if isinstance(v, dict):
        return {k: _real(x, reals) for k, x in v.items()}
    return v


def _make(spec, grad=True):
    if spec.value is not None:
        t = spec.value.clone()
        return t.requires_grad_(grad) if t.dtype.is_floating_point else t
    if spec.dtype.is_floating_point:
        return (torch.rand(spec.shape, dtype=spec.dtype) + 0.5).requires_grad_(grad)
    return torch.zeros(spec.shape, dtype=spec.dtype)


def _not_differentiable(call, args, kwargs, error):
    """The TSpec index of the argument an op refuses a grad for ("The function 'soft_margin_loss' is
    not differentiable with respect to argument 'target'": a loss's target, rrelu's noise), or None."""
    m = re.search(r"not differentiable with respect to argument '(\w+)'", str(error))
    schema = getattr(call, "_schema", None)
    if not m or schema is None:
        return None
    names = [a.name for a in schema.arguments]
    if m.group(1) not in names:
        return None
    pos = names.index(m.group(1))
    v = args[pos] if pos < len(args) else kwargs.get(m.group(1))
    return v.index if isinstance(v, TSpec) else None


def measure_any(call, args, kwargs, specs):
    """measure(), with the floating inputs the op takes no grad for (its schema's
    non-differentiable arguments, named by its own error) made without requires_grad."""
    no_grad = set()
    while True:
        try:
            return measure(call, args, kwargs, specs, no_grad)
        except RuntimeError as e:
            k = _not_differentiable(call, args, kwargs, e)
            if k is None or k in no_grad:
                raise
            no_grad.add(k)


# Ops whose result sizes are counts of values (Note [Data-dependent sizes]), by the last part of
# their target's name; `where` only with its condition alone.
VALUE_SIZED_OPS = ("nonzero", "argwhere", "masked_select", "unique", "_unique2", "unique_dim", "unique_consecutive",
                   "bincount", "nms", "batched_nms", "repeat_interleave")


def _perturbed(t):
    """The same values in another arrangement, safe for kernels that index with them (a float box
    tensor's batch-index column keeps its values): floating rows reversed, booleans negated, integers
    kept."""
    if t.dtype == torch.bool:
        return ~t
    if t.dtype.is_floating_point and t.dim() > 0:
        return t.flip(0)
    return t


def data_dependent(call, args, kwargs, specs, shapes, target=""):
    """Whether call's output sizes depend on its inputs' values (Note [Data-dependent sizes]): a
    value-sized op by name, or the output sizes change when the first floating or boolean input is
    rearranged (_perturbed); |shapes| are the output sizes on the real values."""
    if all(s.value is None for s in specs):
        return False
    name = target.split(".")[-2] if target.endswith((".default", ".Tensor", ".Scalar", ".self")) else target.split(".")[-1]
    if name in VALUE_SIZED_OPS or (name == "where" and len(specs) == 1):
        return True
    reals = [s.value.clone() for s in specs]
    k = next((i for i, t in enumerate(reals) if t.dtype == torch.bool or (t.dtype.is_floating_point and t.dim() > 0)), None)
    if k is None:
        return False
    reals[k] = _perturbed(reals[k])
    try:
        with torch.no_grad():
            a = _real(args, reals)
            out = call(*a, **_real(kwargs, reals))
    except Exception:  # noqa: BLE001 - values the op refuses in another arrangement
        return True
    if out is None and a and isinstance(a[0], torch.Tensor):
        out = a[0]
    return [tuple(o.shape) for o in flat_tensors(out)] != [tuple(x) for x in shapes]


def flat_tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in flat_tensors(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in flat_tensors(x)]
    return []


def _base(t):
    return t.data_ptr() - t.storage_offset() * t.element_size()


def _alloc_log(prof):
    """[(ptr, bytes)] of the profiled window in order (bytes < 0: a free)."""
    out = []

    def walk(events):
        for e in sorted(events, key=lambda e: e.start_time_ns):
            extra = getattr(e, "extra_fields", None)
            if extra is None:
                extra = e.typed[1]
            if type(extra).__name__ == "_ExtraFields_Allocation":
                out.append((int(extra.ptr), int(extra.alloc_size)))
            walk(e.children)
    walk(prof.profiler.kineto_results.experimental_event_tree())
    return out


def _profiled(fn):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    return result, _alloc_log(prof)


def _program(log, known=None):
    """Buffers (bytes, ptr) and A/F tokens from an allocation log; frees of pointers in |known|
    ({ptr: token}) give that token; other frees of unknown pointers are ignored."""
    buffers, live, program = [], {}, []
    for ptr, n in log:
        if n > 0:
            live[ptr] = len(buffers)
            program.append("A%d" % len(buffers))
            buffers.append([n, ptr, True])
        elif ptr in live:
            k = live.pop(ptr)
            buffers[k][2] = False
            program.append("F%d" % k)
        elif known and ptr in known:
            program.append(known.pop(ptr))
    return buffers, program


def _like(n, ins, outs, prefer=None):
    """The like tokens a buffer of n bytes matches at this probe, best first, joined by "|"
    (reconcile keeps the first that every probe matched)."""
    if prefer is not None:
        return prefer
    if n < MIN_LIKE_BYTES:
        return "-"
    cands = [("i%d" % i, t) for i, t in enumerate(ins)] + [("o%d" % j, t) for j, t in enumerate(outs)]
    found = [name for name, t in cands if t.numel() * t.element_size() == n]
    for per in (4, 2, 8, 1):
        found += ["%sx%d" % (name, per) for name, t in cands if t.numel() and t.numel() * per == n]
    return "|".join(found + ["-"])


def reconcile(graphs):
    """Each recorded op's like tokens, the same in every probe's graph: per buffer, the first token
    of probe 0 that every probe matched (a size that equals a tensor's at one probe only is fixed)."""
    for ops in zip(*[g["ops"] for g in graphs]):
        if ops[0]["op"] != "recorded":
            continue
        for key in ("fwd_like", "bwd_like"):
            per_probe = [op["attrs"].get(key, "").split() for op in ops]
            if any(len(p) != len(per_probe[0]) for p in per_probe):
                continue  # the programs differ: the merge names it
            chosen = []
            for cands in zip(*per_probe):
                sets = [set(c.split("|")) for c in cands]
                chosen.append(next(t for t in cands[0].split("|") if all(t in s_ for s_ in sets)))
            for op in ops:
                op["attrs"][key] = " ".join(chosen)


def run_on_cpu(func, args, kwargs):
    """func on CPU tensors of args' sizes (an op without a meta kernel), its result as meta tensors."""
    tensors = []
    a, k = spec_args(args, tensors), spec_args(kwargs, tensors)
    reals = [torch.zeros(t.shape, dtype=t.dtype) for t in tensors]
    with torch.no_grad():
        out = func(*_real(a, reals), **_real(k, reals))
    return _to_meta(out)


def _to_meta(v):
    if isinstance(v, torch.Tensor):
        return torch.empty(v.shape, dtype=v.dtype, device="meta")
    if isinstance(v, (list, tuple)):
        return type(v)(_to_meta(x) for x in v) if not hasattr(v, "_fields") else type(v)(*[_to_meta(x) for x in v])
    return v


def measure(call, args, kwargs, specs, no_grad=frozenset()):
    """The recorded plan (attributes of a `recorded` op) of call(*args, **kwargs), where args and
    kwargs hold TSpecs numbered into |specs| (the op's inputs, in order); the inputs |no_grad|
    names take no grad."""
    torch.manual_seed(0)
    leaves = [_make(s, k not in no_grad) for k, s in enumerate(specs)]
    with torch.enable_grad():  # non-leaf copies (made before the log): an in-place op may write them
        reals = [t.clone() if t.requires_grad else t for t in leaves]
    a, k = _real(args, reals), _real(kwargs, reals)
    saved = []

    def pack(t):
        saved.append((_base(t), t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else None))
        return t

    def forward():
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            return call(*a, **k)
    out, flog = _profiled(forward)
    if out is None and a and isinstance(a[0], torch.Tensor):  # x[idx] = v: the result is the written x
        out = a[0]
    outs = flat_tensors(out)
    fbufs, fprog = _program(flog)
    in_base = {_base(t): i for i, t in reversed(list(enumerate(reals)))}
    attrs = {}
    fwd_outputs = []
    for j, o in enumerate(outs):
        b = _base(o)
        buf = next((kk for kk, (n, p, alive) in enumerate(fbufs) if p == b and alive), -1)
        fwd_outputs.append(buf)
        attrs["out%d_shape" % j] = [int(s) for s in o.shape]
        attrs["out%d_dtype" % j] = _dtype_name(o.dtype)
        if buf < 0 and b in in_base:
            attrs["out%d_alias" % j] = in_base[b]
    out_buf = {kk: j for j, kk in enumerate(fwd_outputs) if kk >= 0}
    # the saved set: hooks' inputs/outputs, then every other forward buffer alive at return
    tokens, release = [], {}
    for b, _ in saved:
        buf = next((kk for kk, (n, p, alive) in enumerate(fbufs) if p == b and alive), -1)
        if b in in_base and buf < 0:
            tok = "i%d" % in_base[b]
        elif buf >= 0:
            tok = "o%d" % out_buf[buf] if buf in out_buf else "b%d" % buf
        else:
            continue
        if tok not in tokens:
            tokens.append(tok)
    for kk, (n, p, alive) in enumerate(fbufs):
        if alive and kk not in out_buf and "b%d" % kk not in tokens:
            tokens.append("b%d" % kk)
    for t_i, tok in enumerate(tokens):
        if tok[0] == "b":
            release[fbufs[int(tok[1:])][1]] = "R%d" % t_i
    attrs.update({
        "fwd_bytes": [n for n, _, _ in fbufs],
        "fwd_like": " ".join(_like(n, reals, outs, "o%d" % out_buf[kk] if kk in out_buf else None)
                             for kk, (n, _, _) in enumerate(fbufs)),
        "fwd_program": " ".join(fprog), "fwd_outputs": fwd_outputs, "saved": " ".join(tokens)})
    attrs.update(_backward(leaves, reals, outs, release))
    return attrs


def _backward(leaves, reals, outs, release):
    """The backward's attributes: grads with respect to the leaves, through the copies' clone nodes
    (which hand the grad on as it is)."""
    diff = [t for t in outs if t.requires_grad and t.grad_fn is not None]
    wants = [i for i, t in enumerate(leaves) if t.requires_grad]
    grads_in = [torch.rand_like(t) for t in diff]
    gbase = {_base(g) for g in grads_in}
    if diff and wants:
        grads, blog = _profiled(lambda: torch.autograd.grad(diff, [leaves[i] for i in wants], grads_in,
                                                            allow_unused=True))
    else:
        grads, blog = [], []
    bbufs, bprog = _program(blog, dict(release))
    while bprog and bprog[-1][0] == "R":  # the node's release at its end: the engine's own, after the grads go
        bprog.pop()
    bwd_grads = [-1] * len(reals)
    grad_bufs = {}
    for i, g in zip(wants, grads):
        if g is None:
            continue
        b = _base(g)
        buf = next((kk for kk, (n, p, alive) in enumerate(bbufs) if p == b and alive), -1)
        if buf >= 0 and buf not in grad_bufs:
            bwd_grads[i] = buf
            grad_bufs[buf] = i
        elif b in gbase:
            bwd_grads[i] = -2
    del grads
    like = [_like(n, reals, outs, "i%d" % grad_bufs[kk] if kk in grad_bufs else None)
            for kk, (n, _, _) in enumerate(bbufs)]
    return {"bwd_bytes": [n for n, _, _ in bbufs], "bwd_like": " ".join(like), "bwd_program": " ".join(bprog),
            "bwd_grads": bwd_grads}


def _dtype_name(dt):
    from .registry import dtype_name
    return dtype_name(dt)


def record_fx(cx, node, args, kwargs, info):
    """The fx path's recorded op for |node| (a call with no handler): its TRef arguments become the
    op's inputs, measured at once (this probe's sizes); returns its output TRef(s), or None when
    the call cannot be run here (the caller lists it as unsupported)."""
    from .registry import TRef
    refs, call = [], _fx_callable(cx, node)
    if call is None:
        return None

    def spec(v):
        if isinstance(v, TRef):
            for k, r in enumerate(refs):
                if r.name == v.name:
                    return TSpec(_Shaped(r), k)
            refs.append(v)
            return TSpec(_Shaped(v), len(refs) - 1)
        if isinstance(v, (list, tuple)):
            return type(v)(spec(x) for x in v)
        if isinstance(v, dict):
            return {k: spec(x) for k, x in v.items()}
        return v
    a, k = spec(args), spec(kwargs)
    if node.op == "call_module":  # the module's parameters and buffers are inputs too
        mod = cx.gm.get_submodule(node.target)
        state = dict(list(mod.named_parameters()) + list(mod.named_buffers()))
        k = {"__state": {n: spec(cx.param(t)) for n, t in state.items()}, "__kw": k}
    specs = [TSpec(_Shaped(r), i) for i, r in enumerate(refs)]
    attrs = measure(call, a, k, specs)
    attrs["target"] = _fx_target(cx, node)
    outs = [o for o in (info if isinstance(info, (list, tuple)) else [info]) if hasattr(o, "shape")]
    res = cx.emit("recorded", refs, attrs, shapes=[o.shape for o in outs], dtype=outs[0].dtype if outs else None)
    if isinstance(info, (list, tuple)):
        it = iter(res)
        return type(info)(next(it) if hasattr(o, "shape") else o for o in info)
    return res[0]


class _Shaped:
    """A TRef seen as a tensor's sizes and dtype (for TSpec)."""

    def __init__(self, r):
        self.shape, self.dtype = r.shape, r.dtype


def _fx_callable(cx, node):
    if node.op == "call_function":
        return node.target
    if node.op == "call_method":
        return lambda self, *a, **k: getattr(self, node.target)(*a, **k)
    if node.op == "call_module":
        mod = cx.gm.get_submodule(node.target)
        try:
            from torch.func import functional_call
        except ImportError:  # torch 1.13
            from torch.nn.utils.stateless import functional_call
        real = _cpu_copy(mod)
        return lambda *a, __state, __kw: functional_call(real, __state, a, __kw)
    return None


def _cpu_copy(mod):
    import copy
    m = copy.deepcopy(mod)
    return m.to_empty(device="cpu") if any(t.is_meta for t in m.parameters()) else m


def _fx_target(cx, node):
    if node.op == "call_module":
        return type(cx.gm.get_submodule(node.target)).__qualname__
    if node.op == "call_method":
        return "Tensor." + node.target
    from .convert import _func_name
    return _func_name(node.target)
