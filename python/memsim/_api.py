"""The entry points: export an nn.Module in-process, simulate a graph, sweep, fit, advise. Every
number comes from the C++ pipeline (memsim._core); this layer only maps Python arguments to the
command line's options and wraps the results."""
import contextlib
import json

from . import _core
from ._options import running_torch_release, to_args
from ._report import Report

def _amp_option(amp):
    """estimate(amp=...) → --amp: True (torch.autocast's CUDA default, float16), "fp16"/"float16"/
    torch.float16, "bf16"/"bfloat16"/torch.bfloat16, or "off"."""
    if amp is True:
        return "fp16"
    name = str(amp).replace("torch.", "")
    names = {"fp16": "fp16", "float16": "fp16", "half": "fp16", "bf16": "bf16", "bfloat16": "bf16", "off": "off"}
    if name not in names:
        raise _core.OptionError("amp=%r: expected True, 'fp16', 'bf16' (or torch.float16 / torch.bfloat16) "
                                "or None" % (amp,))
    return names[name]


def load_graph(path):
    """Reads a graph file (docs/graph-format.md). Raises GraphError naming the file and JSON pointer."""
    return _core.load_graph(str(path))


def _input_spec(x, name=None):
    """A spec string, an InputSpec, or an example tensor (first dimension = the symbol batch) →
    (spec for memsim_export, the batch the tensor has or None)."""
    import torch
    from memsim_export import InputSpec
    if isinstance(x, torch.Tensor):
        dims = ["batch"] + list(x.shape[1:]) if x.dim() > 0 else []
        dtype = str(x.dtype).replace("torch.", "")
        low = high = None
        if not (x.dtype.is_floating_point or x.dtype == torch.bool) and x.numel() > 0:
            low, high = int(x.min()), int(x.max()) + 1  # embeddings need indices below their size
        return InputSpec(dims, dtype, name=name, low=low, high=high), (x.shape[0] if x.dim() > 0 else None)
    if isinstance(x, str) and name is not None:
        return "%s=%s" % (name, x), None
    if isinstance(x, InputSpec) and name is not None:
        x.name = name
    return x, None


def _input_specs(inputs):
    """The forward's inputs: one or a list of specs/tensors, or a dict name → spec/tensor."""
    if isinstance(inputs, dict):
        pairs = list(inputs.items())
    elif isinstance(inputs, (list, tuple)):
        pairs = [(None, x) for x in inputs]
    else:
        pairs = [(None, inputs)]
    specs, batches = [], []
    for name, x in pairs:
        spec, batch = _input_spec(x, name)
        specs.append(spec)
        if batch is not None:
            batches.append(batch)
    if len(set(batches)) > 1:
        raise _core.OptionError("the example tensors disagree on the batch (first dimension): %s" % batches)
    return specs, (batches[0] if batches else None)


def export(model, inputs, loss="cross_entropy", name=None, symbols=None):
    """Exports |model| in-process with tools/memsim_export (torch.fx, docs/exporter.md) and parses
    the graph. |inputs|: spec strings ("batch,3,224,224", "ids=int64:batch,128@0:30522"), InputSpecs
    or example tensors (their first dimension becomes the symbol batch, its size the default).
    Raises ExportError with the exporter's message (every unsupported op listed). The modules'
    train/eval modes are restored afterwards."""
    return _export(model, inputs, loss, name, symbols)[0]


def _export(model, inputs, loss, name, symbols):
    """export(), and the batch of the example tensors (None: spec strings only)."""
    import memsim_export
    specs, batch = _input_specs(inputs)
    symbols = dict(symbols or {})
    if batch is not None:
        symbols.setdefault("batch", batch)
    name = name or type(model).__name__
    _materialize_lazy(model, inputs)
    modes = [(m, m.training) for m in model.modules()]
    provenance = "memsim.export(%s)" % type(model).__name__
    try:
        try:
            g = memsim_export.export_model(model, specs, loss=loss, symbols=symbols, name=name, provenance=provenance)
        except memsim_export.ExportError as e:
            # as the CLI's --trace auto: untraceable code, or an op with no rule (measured: Note [Recorded rules])
            if not (str(e).startswith("cannot trace") or isinstance(e, memsim_export.UnsupportedError)):
                raise
            g = _export_by_execution(model, specs, loss, symbols, name, provenance, e)
    except memsim_export.ExportError as e:
        err = _core.ExportError(str(e))
        err.unsupported = getattr(e, "kinds", [])
        raise err from e
    finally:
        for m, training in modes:
            m.training = training
    return _core.parse_graph(memsim_export.graph_to_json(g), "<%s>" % name), batch


def _materialize_lazy(model, inputs):
    """memsim_export.materialize_lazy on the example tensors (the CLI makes zeros of the specs)."""
    import torch
    import memsim_export

    def examples():
        args = list(inputs.values()) if isinstance(inputs, dict) else list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if not all(isinstance(x, torch.Tensor) for x in args):
            raise _core.OptionError("the model has lazy modules (their shapes come from a first forward): pass example "
                                    "tensors as inputs, or run one forward before estimate()")
        return ([], dict(inputs)) if isinstance(inputs, dict) else (args, {})
    memsim_export.materialize_lazy(model, examples)


def _meta_copy(model):
    """A copy of |model| whose parameters and buffers are meta tensors (no data copied; tied
    weights stay tied), for recording it as it runs without touching the user's model."""
    import copy
    import torch
    memo = {}
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in memo:
            continue
        meta = torch.empty_like(t, device="meta")
        memo[id(t)] = torch.nn.Parameter(meta, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else meta
    return copy.deepcopy(model, memo)


def _export_by_execution(model, specs, loss, symbols, name, provenance, fx_error):
    """What the CLI's --trace auto does when torch.fx cannot trace the model (data-dependent
    Python, asserts on sizes) or meets an op with no rule: record its ATen ops as it runs on meta tensors
    (docs/exporter.md, Export by execution)."""
    import memsim_export
    from memsim_export.eager import export_eager
    try:
        return export_eager(lambda binding: _meta_copy(model), specs, loss=loss, symbols=symbols, name=name,
                            provenance=provenance)
    except memsim_export.UnsupportedError:
        raise
    except memsim_export.ExportError as e:
        raise memsim_export.ExportError("%s\nrecording it as it runs failed too: %s" % (fx_error, e)) from e


def _graph(graph_or_path):
    if isinstance(graph_or_path, _core.Graph):
        return graph_or_path
    if isinstance(graph_or_path, str) or hasattr(graph_or_path, "__fspath__"):
        return load_graph(graph_or_path)
    raise TypeError("expected a memsim.Graph or a graph file path, got %s" % type(graph_or_path).__name__)


def simulate(graph, batch=None, *, explain=True, top=10, **options):
    """Simulates one training step of |graph| (a Graph or a graph file path), as `memsim run`:
    the options are the command line's (docs/cli.md) with ``_`` for ``-``: optimizer="sgd",
    step, profile, inplace_activations, freeze, freeze_params, allocator, alloc_conf, gpu,
    capacity, conv_workspace, cublas_workspace, set={"seq": 512}. Returns a Report."""
    g = _graph(graph)
    args = to_args(dict(options, batch=batch), lists=False, where="simulate")
    return Report(_core.run(g, args, explain=explain, top=top))


def estimate(model, inputs, loss="cross_entropy", optimizer="adam", gpu="A100-40GB", amp=None, checkpoint=None,
             *, batch=None, name=None, symbols=None, explain=True, top=10, **options):
    """One call from an nn.Module to a Report: exports |model| in-process (see export), then
    simulates one training step (see simulate; every option of `memsim run` is accepted).
    With example tensors and no batch=, the batch is theirs. checkpoint= is a module-path glob
    or a list of them (--checkpoint). amp= is torch.autocast around forward and loss (--amp; True
    is float16, with a GradScaler). sac= is a --sac policy, or a policy_fn / context_fn of
    torch.utils.checkpoint.create_selective_checkpoint_contexts, recorded on the example tensors
    (memsim_export.record_sac_policy) for the modules of checkpoint=."""
    if amp is not None and amp is not False:
        options["amp"] = _amp_option(amp)
    if checkpoint is not None and checkpoint is not False:
        options["checkpoint"] = checkpoint
    graph, example_batch = _export(model, inputs, loss, name, symbols)
    with _sac_policy_file(model, inputs, options, checkpoint):
        return simulate(graph, batch=batch if batch is not None else example_batch, explain=explain, top=top,
                        optimizer=optimizer, gpu=gpu, **options)


@contextlib.contextmanager
def _sac_policy_file(model, inputs, options, checkpoint):
    """estimate(sac=policy_fn): options["sac"] becomes a temporary file of the policy recorded on
    the example tensors (memsim_export.record_sac_policy) while the block runs; any other sac=
    is left as it is."""
    if not callable(options.get("sac")):
        yield
        return
    import os
    import tempfile
    fd, path = tempfile.mkstemp(prefix="memsim_sac_", suffix=".json")
    os.close(fd)
    try:
        _record_sac(model, inputs, options["sac"], checkpoint, path)
        options["sac"] = path
        yield
    finally:
        os.remove(path)


def _record_sac(model, inputs, policy_fn, checkpoint, path):
    """The policy recorded on the example tensors, written to |path|."""
    import torch
    import memsim_export
    if checkpoint is None or checkpoint is False:
        raise _core.OptionError("sac=policy_fn selects ops inside checkpointed modules: add checkpoint='GLOB'")
    args = list(inputs.values()) if isinstance(inputs, dict) else list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not all(isinstance(x, torch.Tensor) for x in args):
        raise _core.OptionError("sac=policy_fn runs the forward to record the policy: pass example tensors as inputs")
    modes = [(m, m.training) for m in model.modules()]
    try:
        memsim_export.record_sac_policy(model, inputs if isinstance(inputs, dict) else args, policy_fn, checkpoint, path)
    except memsim_export.ExportError as e:
        raise _core.OptionError(str(e)) from e
    finally:
        for m, training in modes:
            m.training = training


def _graph_of(graph_or_model, inputs, loss):
    """A Graph, a path, or an nn.Module with its inputs (exported)."""
    if inputs is not None:
        return export(graph_or_model, inputs, loss=loss)
    return _graph(graph_or_model)


def sweep(graph_or_model, inputs=None, *, loss="cross_entropy", threads=0, **options):
    """Every combination of the given option lists (batch=[8, 16], optimizer=["sgd", "adam"],
    set={"seq": [128, 512]}, ...), simulated in parallel by the C++ oneTBB sweep with the GIL
    released, as `memsim sweep`. Returns a pandas DataFrame with one row per configuration (every
    axis, then the figures of `memsim run --json` under the same names: peak_live_bytes, peak_phase,
    peak_allocated_bytes, peak_reserved_bytes, peak_device_used_bytes, capacity_bytes, oom, oom_op,
    oom_phase, verdict, oom_message;
    error for an invalid configuration); attrs["csv"] and attrs["json"] hold the CLI's
    `--csv` and `--json` output."""
    import pandas as pd
    g = _graph_of(graph_or_model, inputs, loss)
    out = _core.sweep(g, to_args(options, lists=True, where="sweep"), threads=threads)
    df = pd.DataFrame(json.loads(out["json"])["configurations"])
    df.attrs.update(model=g.name, csv=out["csv"], json=out["json"], text=out["text"])
    return df


def fit(graph_or_model, inputs=None, *, loss="cross_entropy", max_batch=65536, search="batch", at_top=False,
        **options):
    """The largest batch (or value of the symbol `search`, e.g. "seq") that fits the device
    (gpu= or capacity=), as `memsim fit [--search seq]`: an int (0: not even 1 fits). It fits on
    the point estimate of device used (simulate() there says fits, one more does not); with
    at_top=True, the largest that fits at the top of the uncertainty range (verdict "fits")."""
    g = _graph_of(graph_or_model, inputs, loss)
    out = _core.fit(g, to_args(options, lists=False, where="fit"), max_batch=max_batch, search=search)
    return out["max_batch_at_top"] if at_top else out["max_batch"]


def advise(graph_or_model, inputs=None, *, loss="cross_entropy", threads=0, max_batch=65536, **options):
    """Single changes ranked by the reserved memory they save, as `memsim advise --json`: a dict."""
    g = _graph_of(graph_or_model, inputs, loss)
    return json.loads(_core.advise(g, to_args(options, lists=False, where="advise"), threads=threads,
                                   max_batch=max_batch)["json"])


def plan(graph_or_model, inputs=None, *, gpus, global_batch, loss="cross_entropy", seq=None, world_max=None,
         objective="time", optimizer="adamw", torch=None, threads=0, front_span=None, framework=None,
         precision=None, sharding=None, checkpoints=None, micro_batch=None, tp=None):
    """The cheapest training plan that fits, as `memsim plan --json` (docs/plan.md): a dict with the
    Pareto front, the chosen plan (its `args` are `memsim run` flags), the search's counts; with
    framework= ("pytorch", "torchtitan", "deepspeed", "hf") also "snippet", the chosen plan's setup.
    gpus="8xH100-80GB"; the axis keywords (precision=, sharding=, checkpoints=, micro_batch=) take
    lists that restrict the space (tp=: the tensor-parallel degrees)."""
    g = _graph_of(graph_or_model, inputs, loss)
    if torch is None:
        torch = running_torch_release()
    args = ["--gpus=%s" % gpus, "--global-batch=%d" % global_batch, "--objective=%s" % objective,
            "--optimizer=%s" % optimizer, "--torch=%s" % torch, "--threads=%d" % threads]
    for flag, v in (("--seq", seq), ("--world-max", world_max), ("--front-span", front_span)):
        if v is not None:
            args.append("%s=%s" % (flag, v))
    for flag, v in (("--precision", precision), ("--sharding", sharding), ("--checkpoints", checkpoints),
                    ("--micro-batch", micro_batch), ("--tp", tp)):
        if v is not None:
            args.append("%s=%s" % (flag, ",".join(str(x) for x in (v if isinstance(v, (list, tuple)) else [v]))))
    out = _core.plan(g, args, framework=framework or "")
    result = json.loads(out["json"])
    result["text"] = out["text"]
    result["html"] = out["html"]
    if framework:
        result["snippet"] = out["snippet"]
    return result
