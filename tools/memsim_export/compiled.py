"""torch.compile: a compiled training step as memsim sees it (Note [Compiled regions] in docs/op-rules.md).

`export_torch.py ... --compile [--memory-budget F]` exports the model as usual, then compiles it with
torch.compile's default Inductor backend and runs one forward and backward on the graph's example
sizes (which compiles both: Inductor generates a Python wrapper per graph that allocates every buffer
with `empty_strided_cpu`, reuses buffers (`buf3 = buf0; del buf0  # reuse`) and frees them with
`del`). The wrapper of the forward graph and of the backward graph that AOTAutograd's partitioner
produced are read as buffer programs: which buffer is allocated, of how many bytes, when its last
name goes; which of them the forward returns to the caller and which it saves for the backward
(the partitioner's saved set); which the backward returns as each input's grad. The model's ops are
replaced by one op "compiled" that carries these programs; the loss stays eager, as it ran.
"""
import contextlib
import re

from .errors import ExportError

_ELEM = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int8": 1,
         "uint8": 1, "bool": 1}
_ALLOC = re.compile(r"^(\w+) = empty_strided_cpu\(\(([^)]*)\), \(([^)]*)\), torch\.(\w+)\)$")
_REUSE = re.compile(r"^(\w+) = (\w+); del (\w+)  # reuse$")
_VIEW = re.compile(r"^(\w+) = reinterpret_tensor\((\w+),")
_DEL = re.compile(r"^del (\w+)$")
_ARGS = re.compile(r"^([\w, ]+) = args$")
_RET = re.compile(r"^return \((.*)\)$")
_ASSERT = re.compile(r"^assert_size_stride\((\w+), \(([^)]*)\), \(([^)]*)\)")
_FALLBACK = re.compile(r"^(\w+) = (torch\.ops\.[\w.]+|extern_kernels\.\w+)\((.*)\)$")
_ITEM = re.compile(r"^(\w+) = (\w+)\[(\d+)\]$")


def _ints(text):
    return [int(x) for x in text.replace(" ", "").split(",") if x]


def _storage_bytes(sizes, strides, dtype):
    if dtype not in _ELEM:
        raise ExportError("compiled region: buffer dtype %s" % dtype)
    if any(s == 0 for s in sizes):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(sizes, strides))) * _ELEM[dtype]


def _call_body(source):
    """The statements of the wrapper's `call(self, args)` (or `call(args)`), stripped."""
    lines, body, indent = source.splitlines(), [], None
    for i, line in enumerate(lines):
        if re.match(r"^\s*def call\((self, )?args\):", line):
            indent = len(line) - len(line.lstrip())
            for b in lines[i + 1:]:
                if b.strip() and len(b) - len(b.lstrip()) <= indent:
                    break
                if b.strip() and not b.strip().startswith("#"):
                    body.append(b.strip())
            return body
    raise ExportError("compiled region: no call(args) in Inductor's wrapper code")


def _split_top(text):
    """Splits `a, f(b, c), d` at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _returned_name(expr):
    """The local a returned expression refers to (`buf3`, `reinterpret_tensor(buf2, ...)`), or None."""
    if expr == "None":
        return None
    m = re.match(r"^reinterpret_tensor\((\w+),", expr) or re.match(r"^(\w+)$", expr)
    if not m:
        raise ExportError("compiled region: returned expression %r" % expr)
    return m.group(1)


class _Program:
    """A wrapper's buffer program: the storages behind each local name (a fallback's tuple names all
    of its results), and the events."""

    def __init__(self, source, kind, float_bytes=4, recomputed=None, dtypes=None):
        self.kind, self.body, self.float_bytes = kind, _call_body(source), float_bytes
        self.dtypes = dtypes or {}  # Inductor buffer name -> its dtype ("float32"), where known
        self.recomputed = recomputed or {}  # Inductor buffer name -> the recomputed FX nodes it computes
        self.recomputes = {}  # buffer N -> recomputed FX nodes its storage holds (under any of its names)
        self.names = {}      # local name -> storage keys ("in:K": the K-th argument, "buf:N": buffer N)
        self.bytes = []      # buffer N -> bytes
        self.labels = []     # buffer N -> its first name
        self.events = []     # ("A", N) / ("F", N) / ("R", K: argument K's last name went)
        self.args, self.returns, self.return_exprs = [], [], []
        self.layout = {}     # buffer N -> (sizes, strides) of its empty_strided_cpu
        self.pending, self.element_of = set(), {}  # fallback results not sized yet; tuple items -> tuple
        self._run()

    def _drop(self, name, kept=()):
        for key in self.names.pop(name):
            if key in kept or any(key in v for v in self.names.values()):
                continue
            kind, idx = key.split(":")
            self.events.append(("F" if kind == "buf" else "R", int(idx)))

    def _alloc(self, name, nbytes):
        n = len(self.bytes)
        self.bytes.append(nbytes)
        self.labels.append(name)
        self.names[name] = ("buf:%d" % n,)
        self.events.append(("A", n))
        self._note_recompute(name)
        return n

    def _note_recompute(self, name):
        """The recomputed FX nodes buffer |name| holds, credited to the storages it names."""
        for key in self.names.get(name, ()):
            if key.startswith("buf:") and self.recomputed.get(name):
                got = self.recomputes.setdefault(int(key[4:]), [])
                got += [x for x in self.recomputed[name] if x not in got]

    def _sized(self, name, sizes, strides):
        """A fallback kernel's result (or one item of its tuple) gets its size from Inductor's
        assert_size_stride; its dtype is not in the text: Inductor's buffer of that name has it
        (SDPA's logsumexp is float32 under autocast bf16), else the region's floating dtype."""
        self.pending.discard(name)
        elem = _ELEM.get(self.dtypes.get(name), self.float_bytes)
        n = self._alloc(name, (1 + sum((a - 1) * b for a, b in zip(sizes, strides))) * elem if all(sizes) else 0)
        if name in self.element_of:
            base = self.element_of[name]
            self.names[base] = self.names[base] + ("buf:%d" % n,)

    def _run(self):
        for st in self.body:
            m = _ARGS.match(st)
            if m:
                self.args = [a.strip() for a in m.group(1).split(",") if a.strip()]
                for k, a in enumerate(self.args):
                    self.names[a] = ("in:%d" % k,)
                continue
            m = _ASSERT.match(st)
            if m:
                if m.group(1) in self.pending:
                    self._sized(m.group(1), _ints(m.group(2)), _ints(m.group(3)))
                continue
            if st == "args.clear()" or st.startswith("assert_alignment"):
                continue
            m = _ALLOC.match(st)
            if m:
                n = self._alloc(m.group(1), _storage_bytes(_ints(m.group(2)), _ints(m.group(3)), m.group(4)))
                self.layout[n] = (_ints(m.group(2)), _ints(m.group(3)))
                continue
            m = _REUSE.match(st)
            if m:
                self.names[m.group(1)] = self.names[m.group(2)]
                self._drop(m.group(3))
                self._note_recompute(m.group(1))
                continue
            m = _VIEW.match(st)
            if m:  # a view; `bufB = reinterpret_tensor(bufA, ...); del bufA  # reuse` renames too
                self.names[m.group(1)] = self.names[m.group(2)]
                d = re.search(r"; del (\w+)  # reuse$", st)
                if d and d.group(1) in self.names:
                    self._drop(d.group(1))
                continue
            m = _DEL.match(st)
            if m:
                if m.group(1) in self.names:
                    self._drop(m.group(1))
                continue
            m = _RET.match(st)
            if m:
                self.return_exprs = _split_top(m.group(1))
                self.returns = [_returned_name(e) for e in self.return_exprs]
                break
            if re.match(r"^(extern_kernels\.\w+\(.*out=|cpp_fused_\w+\(|(torch\.ops\.)?aten\.[\w.]+\(.*out=\w+\)$)", st):
                continue  # writes into buffers the program allocated (aten.randint.low_out: dropout's
                # seeds); allocates nothing of its own
            m = _FALLBACK.match(st)
            if m and "out=" not in m.group(3):  # a kernel that returns fresh tensors (sized by its asserts)
                self.names[m.group(1)] = ()
                self.pending.add(m.group(1))
                continue
            m = _ITEM.match(st)
            if m and m.group(2) in self.pending:
                self.names[m.group(1)] = ()
                self.pending.add(m.group(1))
                self.element_of[m.group(1)] = m.group(2)
                continue
            raise ExportError("compiled region (%s): Inductor wrapper statement not modelled yet: %s"
                              % (self.kind, st[:160]))

    def key(self, name):
        if name is None:
            return None
        keys = self.names[name]
        if len(keys) != 1:
            raise ExportError("compiled region (%s): %s names %d storages" % (self.kind, name, len(keys)))
        return keys[0]

    def finish(self, kept):
        """Locals die as call() returns; the storages the return keeps (|kept|) stay."""
        for name in list(self.names):
            if name in self.names:
                self._drop(name, kept)  # an argument's last name: R (the forward's program leaves these out)


def _contiguous(sizes):
    out, acc = [], 1
    for d in reversed(sizes):
        out.insert(0, acc)
        acc *= max(d, 1)
    return out


def _grad_strides(bwd, j, key):
    """The strides of the backward's j-th returned tensor when they are not row-major (a
    transposed weight grad: AccumulateGrad copies it into the parameter's layout), else None."""
    expr = bwd.return_exprs[j]
    m = re.match(r"^reinterpret_tensor\((\w+), \(([^)]*)\), \(([^)]*)\)", expr)
    if m:
        sizes, strides = _ints(m.group(2)), _ints(m.group(3))
    else:
        n = int(key[4:])
        if n not in bwd.layout:
            return None
        sizes, strides = bwd.layout[n]
    live = [(d, st) for d, st in zip(sizes, strides) if d != 1]
    ref = [(d, st) for d, st in zip(sizes, _contiguous(sizes)) if d != 1]
    return None if live == ref else strides


def _region_op(fwd, bwd, inputs, outputs, in_meta, out_meta, rg, budget):
    nsaved = sum(1 for a in bwd.args if not a.startswith("tangents_"))
    nuser = len(fwd.returns) - nsaved
    if nuser != len(outputs):
        raise ExportError("compiled region: the forward returns %d user outputs, the graph has %d (mutated "
                          "inputs or outputs aliasing inputs are not modelled yet)" % (nuser, len(outputs)))
    out_keys = [fwd.key(n) for n in fwd.returns[:nuser]]
    saved_keys = [fwd.key(n) for n in fwd.returns[nuser:]]
    fwd.finish(set(out_keys) | set(saved_keys))
    fwd_outputs = []
    for j, key in enumerate(out_keys):
        if key is None or not key.startswith("buf:"):
            raise ExportError("compiled region: user output %d is not a buffer of the forward" % j)
        fwd_outputs.append(int(key[4:]))
    saved = []
    for key in saved_keys:
        if key.startswith("in:"):
            saved.append("i%s" % key[3:])
        elif int(key[4:]) in fwd_outputs:
            saved.append("o%d" % fwd_outputs.index(int(key[4:])))
        else:
            saved.append("b%s" % key[4:])
    # the backward: its arguments are the saved tensors, then the tangents
    grads = [bwd.key(n) for n in bwd.returns]
    if len(grads) != len(inputs):
        raise ExportError("compiled region: the backward returns %d grads for %d inputs" % (len(grads), len(inputs)))
    bwd.finish(set(k for k in grads if k))
    bwd_grads, grad_strides = [], {}
    for i, key in enumerate(grads):
        if key is None:
            bwd_grads.append(-1)
            continue
        if not key.startswith("buf:"):
            raise ExportError("compiled region: the grad of input %d is not a buffer of the backward" % i)
        n = int(key[4:])
        if bwd.bytes[n] != in_meta[i]:
            raise ExportError("compiled region: the grad buffer of input %d has %d bytes, the input %d"
                                   % (i, bwd.bytes[n], in_meta[i]))
        bwd_grads.append(n)
        strides = _grad_strides(bwd, i, key)
        if strides is not None:
            grad_strides[i] = strides
    prog = []
    for ev, k in bwd.events:
        if ev == "R":
            prog.append("R%d" % k if k < nsaved else "G")
        else:
            prog.append("%s%d" % (ev, k))
    attrs = {
        "fwd_bytes": fwd.bytes, "fwd_names": " ".join("fwd." + n for n in fwd.labels),
        "fwd_program": " ".join("%s%d" % e for e in fwd.events if e[0] != "R"),
        "fwd_outputs": fwd_outputs, "saved": " ".join(saved),
        "bwd_bytes": bwd.bytes, "bwd_names": " ".join("bwd." + n for n in bwd.labels), "bwd_program": " ".join(prog),
        "bwd_grads": bwd_grads, "bwd_recomputed": " ".join(
            "bwd.%s=%s" % (bwd.labels[n], ",".join(nodes)) for n, nodes in sorted(bwd.recomputes.items())),
        "input_bytes": in_meta, "requires_grad": [1 if r else 0 for r in rg],
        "memory_budget": float(budget),
    }
    for i, strides in sorted(grad_strides.items()):
        attrs["grad%d_strides" % i] = strides
    for j, (shape, dtype) in enumerate(out_meta):
        attrs["out%d_shape" % j] = shape
        attrs["out%d_dtype" % j] = dtype
    return {"op": "compiled", "name": "compiled_region_0", "module": "", "inputs": inputs, "outputs": outputs,
            "attrs": attrs}


@contextlib.contextmanager
def _buffer_origins():
    """Yields a dict that, once the block is done, maps each Inductor buffer of the graph lowered
    last (bufN, as the wrapper names it) to ([its origin node], its origins, its dtype), read as
    GraphLowering.codegen writes the wrapper: `origin_node` is the FX node whose result was
    realized into the buffer (GraphLowering.run_node, `ir.assign_origin_node`; for a reduction
    realized later, on the buffer's loops); `origins` are every FX node lowered into it, which for a
    fused kernel includes the nodes it inlines."""
    from torch._inductor.graph import GraphLowering
    origins, codegen = {}, GraphLowering.codegen

    def patched(self, *a, **kw):
        result = codegen(self, *a, **kw)
        origins.clear()
        for name, buf in self.name_to_buffer.items():
            node = getattr(buf, "origin_node", None) or getattr(getattr(buf, "data", None), "origin_node", None)
            try:
                wide = [o.name for o in buf.get_origins()]
            except (AssertionError, AttributeError):
                wide = []
            try:
                dtype = str(buf.get_dtype()).replace("torch.", "")
            except (AssertionError, AttributeError, NotImplementedError):
                dtype = None
            origins[name] = ([node.name] if node is not None else [], wide, dtype)
        return result
    GraphLowering.codegen = patched
    try:
        yield origins
    finally:
        GraphLowering.codegen = codegen


def _graph_modules(gm, model):
    """The module paths ("a.0") a Dynamo graph's nodes ran in: each node's `nn_module_stack`, whose
    keys are the modules' ids (its sources name a local in a resume function after a graph break,
    `L['___stack0']`; they are read only for a key that is no module of |model|)."""
    by_id = {str(id(mod)): name for name, mod in model.named_modules()}
    out = set()
    for n in gm.graph.nodes:
        for key, (src, _) in (n.meta.get("nn_module_stack") or {}).items():
            if key in by_id:
                out.add(by_id[key])
                continue
            src = re.sub(r"\._modules\['(\w+)'\]|\[(\d+)\]", lambda m: "." + (m.group(1) or m.group(2)), str(src))
            out.add(re.sub(r"^L\['\w+'\]\.?", "", src))
    return out


def _recomputed_nodes(gm):
    """The FX nodes of a backward graph that recompute forward values, in graph order: those the
    partitioner did not tag `is_backward` (`torch/_functorch/partitioners.py` tags the joint graph's
    nodes; the forward nodes it moves into the backward keep their forward tag)."""
    return [n.name for n in gm.graph.nodes if n.op == "call_function" and n.meta.get("partitioner_tag") != "is_backward"]


def _recomputed_buffers(recomputed, origins):
    """{bufN: recomputed nodes (in graph order)} for the buffers that hold a recomputed value: its
    origin node is recomputed, or (no origin node: a reduction inside a lowering, e.g. mean's sum)
    every node lowered into it is."""
    order = {n: k for k, n in reversed(list(enumerate(recomputed)))}
    out = {}
    for name, (node, wide) in ((n, o[:2]) for n, o in origins.items()):
        got = node if node else (wide if wide and all(o in order for o in wide) else [])
        if got and all(o in order for o in got):
            out[name] = sorted(set(wide if not node else got), key=order.get)
    return out


def _wrappers(model, inputs, budget, amp="none"):
    """Compiles |model| with Inductor and runs one forward and backward on |inputs|. Dynamo gives
    one graph per region between graph breaks; each region is [example inputs (the Dynamo graph's
    primals, in order), forward wrapper source, backward wrapper source, the tensors its compiled
    forward returned, {"recomputed": {backward buffer: the recomputed FX nodes it holds},
    "fwd_dtypes" / "bwd_dtypes": {buffer: dtype}}]. The backward graphs compile lazily as backward reaches them, through the
    same per-region inner_compile. Also returns the model's output."""
    import torch
    import torch._functorch.config as fconfig
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    regions = []

    def backend(gm, example_inputs):
        region = [list(example_inputs), None, None, None, {"modules": _graph_modules(gm, model)}]
        regions.append(region)

        def inner(gm, example_inputs, **kw):
            side = "bwd" if kw.get("is_backward") else "fwd"
            before = _recomputed_nodes(gm)  # Inductor's post-grad passes rewrite gm in place
            with _buffer_origins() as origins:
                out = compile_fx_inner(gm, example_inputs, **kw)
            region[2 if side == "bwd" else 1] = out.source_code
            region[4][side + "_dtypes"] = {name: o[2] for name, o in origins.items() if o[2]}
            if side == "bwd":
                region[4]["recomputed"] = _recomputed_buffers(before + _recomputed_nodes(gm), origins)
            return out
        fn = compile_fx(gm, example_inputs, inner_compile=inner)

        def run(*args):
            outs = fn(*args)
            if region[3] is None:
                region[3] = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            return outs
        return run
    import torch._inductor.config as iconfig
    # no AOTAutograd / FX graph cache: a cache hit would return a compiled graph without running
    # inner_compile, whose wrapper source is what is read (the C++ kernels stay cached)
    patches = [(fconfig, "activation_memory_budget", budget), (fconfig, "enable_autograd_cache", False),
               (iconfig, "fx_graph_cache", False)]
    saved = [(m, k, getattr(m, k)) for m, k, _ in patches]
    for m, k, v in patches:
        setattr(m, k, v)
    torch._dynamo.reset()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16) if amp == "bf16" else contextlib.nullcontext():
            out = torch.compile(model, backend=backend)(*inputs)
        if not isinstance(out, torch.Tensor):
            raise ExportError("--compile: the model returns %s; one tensor is modelled yet" % type(out).__name__)
        out.backward(torch.ones_like(out))
    finally:
        for m, k, v in saved:
            setattr(m, k, v)
        torch._dynamo.reset()
    for k, (_, fwd, bwd, _, _) in enumerate(regions):
        if fwd is None or bwd is None:
            raise ExportError("--compile: compiled graph %d has no %s wrapper (a region without a backward is "
                              "not modelled yet)" % (k, "forward" if fwd is None else "backward"))
    return regions, out


def capture_region(model, inputs, budget=1.0, amp="none"):
    """Compiles and runs |model| on |inputs| (real tensors at the graph's symbol defaults): what
    compile_graph needs. Run it before the eager export: the export's `--trace run` patches tensor
    factories while it records, and Dynamo's trace rules, once built then, no longer know the
    builtins (a graph break at `torch.arange`)."""
    return (model, inputs, budget, amp) + _wrappers(model, inputs, budget, amp)


PROGRAM_KEYS = ("fwd_bytes", "fwd_names", "fwd_program", "fwd_outputs", "saved", "bwd_bytes", "bwd_names",
                "bwd_program", "bwd_grads", "bwd_recomputed")  # (+ grad<i>_strides, the same for every budget of one graph)  # one partitioner program (lib/ir/compiled_budget.cc reads the same list)


def compile_graph(g, captures):
    """Replaces the model ops of the exported graph |g| (every op but the loss's) by the compiled
    regions of |captures| (capture_region, one per budget): the first budget's programs are each
    op's attributes, every other budget's under `mb<F>:<attribute>` (`memory_budgets` lists them,
    Note [Compiled regions]). The eager op list stays in the `compiled` section (`eager_ops`), the
    same model uncompiled for `memsim run --compile off` and `advise`."""
    ops = _region_ops(g, captures[0])
    budgets = [c[2] for c in captures]
    for cap in captures[1:]:
        alt = _region_ops(g, cap)
        if [(o["inputs"], o["outputs"]) for o in alt] != [(o["inputs"], o["outputs"]) for o in ops]:
            raise ExportError("--compile: budget %g gives other compiled graphs than budget %g" % (cap[2], budgets[0]))
        for op, a in zip(ops, alt):
            if op["op"] != "compiled":
                continue
            for key in PROGRAM_KEYS:
                op["attrs"]["mb%g:%s" % (cap[2], key)] = a["attrs"][key]
    if len(budgets) > 1:
        for op in (o for o in ops if o["op"] == "compiled"):
            op["attrs"]["memory_budgets"] = " ".join("%g" % b for b in budgets)
    import torch
    loss_ops = [o for o in g["ops"] if o.get("module") == "loss"]
    if not loss_ops:
        raise ExportError("--compile: the graph has no loss ops (module \"loss\")")
    eager_ops = g["ops"]
    g = dict(g)
    g["ops"] = ops + loss_ops
    g["compiled"] = {"backend": "inductor", "torch": torch.__version__.split("+")[0],
                     "activation_memory_budget": float(budgets[0]),
                     "regions": sum(o["op"] == "compiled" for o in ops)}
    if len(budgets) > 1:
        g["compiled"]["memory_budgets"] = [float(b) for b in budgets]
    if captures[0][3] != "none":
        g["compiled"]["autocast"] = captures[0][3]
    g["compiled"]["eager_ops"] = eager_ops  # the same model uncompiled: `memsim run --compile off`
    return g


def _region_ops(g, captured):
    """The compiled regions of one capture, in the order they ran, and the eager ops between them:
    a region's inputs are parameters, buffers, model inputs, outputs of the regions before it
    (graph breaks with no tensor code between them, e.g. a print) or tensors of eager code between
    graph breaks (_EagerCode); its outputs are new tensors `regionK.outJ`, except the model's
    output, which keeps the graph's name (the loss ops take it)."""
    import torch
    model, inputs, budget, amp, regions, out = captured
    names = {id(p): n for n, p in model.named_parameters()}
    names.update({id(b): n for n, b in model.named_buffers()})  # lifted as graph inputs, as parameters are
    model_inputs = [i["name"] for i in g["inputs"]][:len(inputs)]
    for k, x in enumerate(inputs):
        names[id(x)] = model_inputs[k]
    eager = _EagerCode(g, regions) if _has_eager_code(regions, names, out) else None
    ops, keep = [], [out]  # |keep|: the tensors whose ids name graph tensors stay alive
    for r, (primals, fwd_src, bwd_src, outs, info) in enumerate(regions):
        region_inputs = []
        for t in primals:
            if id(t) not in names:
                names[id(t)] = eager.region_input(r, t) if eager else None
            if names[id(t)] is None:
                raise ExportError("--compile: input %d of compiled graph %d is neither a parameter, a buffer, a model "
                                  "input nor an output of an earlier compiled graph: %s %s"
                                  % (len(region_inputs), r, str(t.dtype)[6:], list(t.shape)))
            region_inputs.append(names[id(t)])
        out_names = []
        for j, t in enumerate(outs):
            if not isinstance(t, torch.Tensor):
                raise ExportError("--compile: compiled graph %d returns a %s" % (r, type(t).__name__))
            out_names.append(g["outputs"][0] if t is out else "region%d.out%d" % (r, j))
            names[id(t)] = out_names[-1]
            keep.append(t)
        in_bytes = [t.numel() * t.element_size() for t in primals]
        rg = [t.requires_grad for t in primals]
        fb = next((t.element_size() for t in outs if t.is_floating_point()), 4)
        op = _region_op(_Program(fwd_src, "forward", fb, None, info.get("fwd_dtypes")),
                        _Program(bwd_src, "backward", fb, info.get("recomputed"), info.get("bwd_dtypes")),
                        region_inputs, out_names,
                        in_bytes, [(list(t.shape), str(t.dtype).replace("torch.", "")) for t in outs], rg, budget)
        op["name"] = "compiled_region_%d" % r
        if eager:
            ops += eager.ops_before(r, out_names, outs, regions)
        ops.append(op)
    if eager:
        ops += eager.ops_before(len(regions), [], [], regions)
    if g["outputs"][0] not in [o for op in ops for o in op["outputs"]]:
        raise ExportError("--compile: the model's output is neither an output of a compiled graph nor of eager "
                          "code between them")
    return ops


def _has_eager_code(regions, names, out):
    """Whether a region takes a tensor that no parameter, buffer, model input or earlier region gave."""
    known = set(names)
    for primals, _, _, outs, _ in regions:
        if any(id(t) not in known for t in primals):
            return True
        known |= {id(t) for t in outs}
    return False


class _EagerCode:
    """Eager tensor code between graph breaks (a `torch.compiler.disable`d call, code Dynamo does not
    trace): the eager export's model ops cut at the compiled regions. An op belongs to the region
    whose Dynamo graph ran in its module (`nn_module_stack`, _graph_modules), else it is eager code;
    the regions and the eager code between them must follow one another as the ops do. Eager tensors
    a region's ops made and eager code takes become that region's outputs, and those eager code made
    and a region's ops take become its inputs, each matched one to one (one tensor each way per
    boundary; more would need their identities at run time)."""

    def __init__(self, g, regions):
        self.ops = [o for o in g["ops"] if o.get("module") != "loss"]
        mods = [r[4].get("modules", set()) for r in regions]
        self.owner = []
        for op in self.ops:
            m = op.get("module", "")
            if not m:
                raise ExportError("--compile: op %s (%s) runs outside every module: with eager code between graph "
                                  "breaks each op is placed by its module" % (op["outputs"][0], op["op"]))
            inside = [k for k, ms in enumerate(mods) if m in ms or any(m.startswith(x + ".") for x in ms if x)]
            self.owner.append(inside[0] if inside else None)
        seen = [k for k in self.owner if k is not None]
        if seen != sorted(seen) or sorted(set(seen)) != list(range(len(regions))):
            raise ExportError("--compile: the compiled regions' modules do not follow the eager ops' order "
                              "(regions %s)" % seen)
        self.producer = {t: self.owner[i] for i, op in enumerate(self.ops) for t in op["outputs"]}
        self.rename, self.done = {}, 0

    def _crossing(self, src, dst):
        """Eager tensors made by owner |src| and taken by an op of owner |dst|, in order."""
        out = []
        for op, k in zip(self.ops, self.owner):
            for t in op.get("inputs", []):
                if k == dst and t in self.producer and self.producer[t] == src and t not in out:
                    out.append(t)
        return out

    def region_input(self, r, t):
        """The eager code's tensor that region |r| takes as |t|."""
        made = [x for x in self._crossing(None, r) if x not in self.rename.values()]
        if len(made) != 1:
            raise ExportError("--compile: compiled graph %d takes %d tensors of the eager code before it: one is "
                              "modelled yet" % (r, len(made)))
        return made[0]

    def ops_before(self, r, out_names, outs, regions):
        """The eager ops that run before region |r| (after the regions before it), their inputs
        renamed to the regions' outputs; maps region |r|'s outputs that eager code takes."""
        out = []
        while self.done < len(self.ops) and (self.owner[self.done] is None or self.owner[self.done] < r):
            op, k = self.ops[self.done], self.owner[self.done]
            self.done += 1
            if k is not None:
                continue
            op = dict(op, inputs=[self.rename.get(t, t) for t in op.get("inputs", [])])
            if "attrs" in op and "keep_alive" in op["attrs"]:
                attrs = dict(op["attrs"])
                attrs["keep_alive"] = [self.rename.get(t, t) for t in attrs["keep_alive"]
                                       if self.producer.get(t) is None or t in self.rename]
                op["attrs"] = attrs
            out.append(op)
        if r < len(regions):
            taken = self._crossing(r, None)
            later = {id(t) for p in regions[r + 1:] for t in p[0]}
            free = [n for n, t in zip(out_names, outs) if id(t) not in later and n not in self.rename.values()]
            if taken and len(taken) != len(free) or len(taken) > 1:
                raise ExportError("--compile: eager code takes %d tensors of compiled graph %d, which returns %d "
                                  "others: one is modelled yet" % (len(taken), r, len(free)))
            self.rename.update(zip(taken, free))
        return out
