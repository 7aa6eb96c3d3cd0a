"""Command line: export a PyTorch model to a memsim graph (see docs/exporter.md)."""
import argparse
import contextlib
import importlib
import importlib.util
import os
import sys

from .eager import symbol_params
from .errors import ExportError, UnsupportedError
from .symbols import numel_at

USAGE_EXAMPLES = """examples:
  export_torch.py torchvision:resnet50 --input "batch,3,224,224" -o graphs/resnet50.json
  export_torch.py --module my_model.py:build --input "int64:batch,128@0:30522" --loss cross_entropy -o m.json
  export_torch.py hf:llama:hidden_size=128,num_hidden_layers=4 --set batch=2 --set seq=64 -o llama.json
  export_torch.py graphs/models.py:bert_small --input "ids=int64:batch,128@0:30522" -o graphs/bert_small.json
"""


LOSSES = ["cross_entropy", "mse", "bce_logits", "bce", "smooth_l1", "huber", "l1", "output", "none"]


def load_loss(a):
    """--loss NAME, or FILE.py:FUNC → the user's function (and --trace run, --target as the last input)."""
    if a.loss in LOSSES:
        if a.target:
            raise ExportError("--target applies with --loss FILE.py:FUNC")
        return a.loss
    if ":" not in a.loss:
        raise ExportError("--loss %s: expected one of %s or FILE.py:FUNCTION" % (a.loss, ", ".join(LOSSES)))
    if not a.target:
        raise ExportError("--loss %s needs --target SPEC (the target's shape, e.g. \"int64:batch@0:10\")" % a.loss)
    fn, _ = load_builder(a.loss)
    if not callable(fn):
        raise ExportError("--loss %s: not a function" % a.loss)
    a.trace = "run"  # the loss is recorded as it runs, after the model
    return fn


def load_builder(spec):
    """'torchvision:NAME', 'hf:FAMILY[:KEY=V,...]', 'path/to/file.py:fn' or 'package.module:fn' →
    (callable, default name)."""
    if ":" not in spec:
        raise ExportError("model spec %r: expected torchvision:NAME, hf:FAMILY, FILE.py:FUNCTION or MODULE:FUNCTION"
                          % spec)
    if spec.startswith("hf:"):  # a Hugging Face decoder from its config class (hf_models.py)
        from . import hf_models
        return hf_models.builder(spec[3:])
    where, fn = spec.rsplit(":", 1)
    if where == "torchvision":
        import torchvision
        builder = getattr(torchvision.models, fn, None)
        for sub in ("detection", "segmentation", "video", "optical_flow"):  # not re-exported at the top
            builder = builder or getattr(getattr(torchvision.models, sub, None), fn, None)
        if builder is None or not callable(builder):
            raise ExportError("torchvision.models has no model %r" % fn)
        from . import detection
        if detection.is_detection(builder):  # images in, summed losses out (synthetic targets)
            return (lambda: detection.build(builder)), fn
        return (lambda: build_torchvision(builder)), fn
    if where.endswith(".py"):
        if not os.path.exists(where):
            raise ExportError("no such file: %s" % where)
        name = "memsim_user_" + os.path.splitext(os.path.basename(where))[0]
        mspec = importlib.util.spec_from_file_location(name, where)
        mod = importlib.util.module_from_spec(mspec)
        sys.modules[name] = mod
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        try:
            mspec.loader.exec_module(mod)
        finally:
            sys.path.pop(0)
    else:
        try:
            mod = importlib.import_module(where)
        except ImportError as e:
            raise ExportError("cannot import %s: %s" % (where, e))
    builder = getattr(mod, fn, None)
    if builder is None:
        raise ExportError("%s has no attribute %r" % (where, fn))
    return builder, fn


def build_torchvision(builder):
    """Random-init torchvision model (weights=None; pretrained=False on very old torchvision)."""
    try:
        return builder(weights=None)
    except TypeError:
        return builder(pretrained=False)


def split_built(obj):
    """A builder may return a module or (module, input spec(s)[, ...])."""
    import torch.nn as nn
    if isinstance(obj, nn.Module):
        return obj, None
    if isinstance(obj, (tuple, list)) and obj and isinstance(obj[0], nn.Module):
        specs = obj[1] if len(obj) > 1 else None
        if isinstance(specs, str):
            specs = [specs]
        if specs is not None and not (isinstance(specs, (list, tuple)) and all(isinstance(s, str) for s in specs)):
            specs = None  # e.g. trace_step.py's (model, shape tuple, classes): not an input spec
        return obj[0], specs
    raise ExportError("the builder returned %s, not an nn.Module" % type(obj).__name__)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="export_torch.py", description=__doc__, epilog=USAGE_EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="torchvision:NAME | hf:ARCH|ConfigClass|CONFIG.json[:KEY=V,...] | FILE.py:FUNCTION | "
                    "MODULE:FUNCTION")
    ap.add_argument("--module", dest="module_spec", help="FILE.py:FUNCTION returning an nn.Module "
                    "(or (module, input spec list))")
    ap.add_argument("--input", action="append", default=[], metavar="SPEC",
                    help='[name=][dtype:]d0,d1,...[@low:high], e.g. "batch,3,224,224" or "int64:batch,128@0:30522"; '
                         "repeat for several inputs (forward argument order)")
    ap.add_argument("--loss", default="cross_entropy", metavar="LOSS",
                    help="loss appended to the output: %s (output: the model returns its own scalar loss; "
                         "also detected when the output is a scalar), or FILE.py:FUNC, your loss_fn(output, target) "
                         "(with --target; recorded as the model runs)" % "|".join(LOSSES))
    ap.add_argument("--target", metavar="SPEC", help="with --loss FILE.py:FUNC: the target's input spec, e.g. "
                    "\"int64:batch@0:10\" (the loop holds the output across the step)")
    ap.add_argument("--trace", default="auto", choices=["auto", "fx", "run"],
                    help="fx: torch.fx symbolic tracing; run: record the model as it runs (meta tensors, "
                         "ATen ops below composite functions; an op with no rule is measured: a recorded op); auto: fx, or run "
                         "when fx cannot trace the model or meets an op with no rule, "
                         "or the builder takes symbol arguments (default)")
    ap.add_argument("--no-recorded", action="store_true",
                    help="list ops with no memsim rule as unsupported (exit 2) instead of measuring them into "
                         "recorded ops (Note [Recorded rules])")
    ap.add_argument("--set", action="append", default=[], metavar="SYM=V", help="default value of a symbol")
    ap.add_argument("--name", help="graph name (default: the model/function name)")
    ap.add_argument("--provenance", help="provenance text stored in the graph")
    ap.add_argument("--device", default="auto", choices=["auto", "meta", "cpu"],
                    help="where shape propagation and export by execution run (auto: meta tensors; CPU tensors when that fails or the model needs values, e.g. detection proposals: Note [Data-dependent sizes])")
    ap.add_argument("--probe-batch", default="2,3", help="two batch sizes used to detect batch-dependent sizes")
    ap.add_argument("--optimizer", metavar="FILE.py:CLASS[:KWARGS]",
                    help="record this torch.optim.Optimizer subclass (KWARGS: a dict literal, e.g. "
                         "\"{'lr': 1e-3}\") into the graph; `memsim run --optimizer recorded` replays it")
    ap.add_argument("--graph", metavar="GRAPH.json",
                    help="with --optimizer and no model: add the recorded optimizer to this graph file")
    ap.add_argument("--compile", action="store_true",
                    help="the model as torch.compile(model) runs it (default Inductor): one compiled region "
                         "whose buffer programs are read from Inductor's wrappers (Note [Compiled regions])")
    ap.add_argument("--memory-budget", default="1", metavar="F[,F...]",
                    help="with --compile: torch._functorch.config.activation_memory_budget (default 1); a list "
                         "records one partitioner program per budget, the first the default (memsim run "
                         "--memory-budget F selects another)")
    ap.add_argument("--amp", default="none", choices=["none", "bf16"],
                    help="with --compile: the compiled forward runs under torch.autocast(\"cpu\", bfloat16), as a "
                         "training loop's autocast region around the model does (simulate with memsim run --amp bf16)")
    ap.add_argument("-o", "--output", default="-", help="output file (default stdout)")
    a = ap.parse_args(argv)
    try:
        budgets = [float(b) for b in a.memory_budget.split(",")]
        assert budgets and all(0 <= b <= 1 for b in budgets) and len(set(budgets)) == len(budgets)
    except (ValueError, AssertionError):
        ap.error("--memory-budget expects distinct numbers from 0 to 1, e.g. 1,0.5,0")
    if budgets != [1.0] and not a.compile:
        ap.error("--memory-budget applies with --compile")
    if a.amp != "none" and not a.compile:
        ap.error("--amp applies with --compile (an eager graph takes autocast at run time: memsim run --amp bf16)")
    spec = a.module_spec or a.model
    if a.graph:
        if spec or not a.optimizer:
            ap.error("--graph adds --optimizer to an existing graph: give --optimizer and no model")
        return _add_optimizer(a.graph, a.optimizer, a.output)
    if not spec:
        ap.error("give a model (torchvision:NAME, FILE.py:FUNCTION) or --module")
    if spec.startswith("hf:") and a.trace == "auto":
        a.trace = "run"  # transformers decoders are not fx-traceable (Note [Hugging Face decoders])
    try:
        from .exporter import write_graph
        loss = load_loss(a)
        builder, default_name = load_builder(spec)
        symbols = _parse_set(a.set)
        takes = {} if spec.startswith("torchvision:") else symbol_params(builder)
        for p, default in takes.items():  # `def build(seq=128)`: 128 unless --set seq=N
            if default is not None:
                symbols.setdefault(p, default)
        takes = list(takes)
        missing = [p for p in takes if p not in symbols]
        if missing:
            raise ExportError("the builder takes %s: give each a default with --set %s=N"
                              % (", ".join(missing), missing[0]))
        model = built_specs = None
        if a.trace != "run" or not a.input:  # --trace run builds on the meta device only
            from .eager import meta_device
            with meta_device() if a.trace == "run" else contextlib.nullcontext():
                model, built_specs = split_built(builder(**{k: symbols[k] for k in takes}))
        inputs = a.input or built_specs
        if not inputs:
            if spec.startswith("torchvision:"):
                inputs = ["batch,3,224,224"]
            else:
                raise ExportError("no --input given and the builder returned no input spec")
        # nn.LazyLinear & co.: their shapes come from a first forward (LazyModuleMixin)
        model = _materialize_lazy(model, inputs, symbols)
        builder = _lazy_builder(builder, inputs, symbols)
        if callable(loss):
            inputs = list(inputs) + ["target=" + a.target]
        try:
            pb = tuple(int(x) for x in a.probe_batch.split(","))
            assert len(pb) == 2 and pb[0] != pb[1] and min(pb) >= 2
        except (ValueError, AssertionError):
            raise ExportError("--probe-batch expects two different integers >= 2, e.g. 2,3")
        prov = a.provenance
        if prov is None:
            prov = "tools/export_torch.py %s %s --loss %s" % (
                spec, " ".join("--input %s" % s for s in inputs), a.loss)
        opts = dict(loss=loss, symbols=symbols, name=a.name or default_name, provenance=prov, probe_batch=pb)
        captured = _compile(symbols, builder, takes, inputs, budgets, a.amp) if a.compile else None
        g = _export(a, model, builder, takes, inputs, opts)
        if captured:
            from .compiled import compile_graph
            if any(g.get("symbols", {}).get(k) != v for k, v in captured[-1].items()):
                raise ExportError("--compile: the graph's symbols %s differ from the compile's %s: give each with --set"
                                  % (g.get("symbols"), captured[-1]))
            g = compile_graph(g, captured[:-1])
        if a.optimizer:
            from .optimizer_record import record_optimizer
            g["optimizer"] = record_optimizer(a.optimizer)
        write_graph(g, a.output)
    except UnsupportedError as e:
        sys.stderr.write("export_torch.py: %s\n" % e)
        return 2
    except ExportError as e:
        sys.stderr.write("export_torch.py: %s\n" % e)
        return 2
    if a.output not in (None, "-"):
        n_params = sum(numel_at(p["shape"], g.get("symbols", {})) for p in g["parameters"])
        sys.stderr.write("wrote %s: %d ops, %d parameter tensors (%d elements)\n" % (
            a.output, len(g["ops"]), len(g["parameters"]), n_params))
    return 0


def _compile(symbols, builder, takes, inputs, budgets, amp="none"):
    """--compile: the model built, compiled and run for real at the symbols' values (batch 32 unless
    set), once per budget, before the eager export (compiled.capture_region): [captures..., binding]."""
    import torch
    from .compiled import capture_region
    from .exporter import _make_input, parse_input_spec
    specs = [parse_input_spec(s) for s in inputs]
    binding = dict(symbols)
    binding.setdefault("batch", 32)
    used = {d for sp in specs for d in sp.dims if isinstance(d, str)} | set(takes)
    missing = sorted(d for d in used if d not in binding)
    if missing:
        raise ExportError("--compile: give %s with --set (the compile runs at those sizes)" % ", ".join(missing))
    torch.manual_seed(0)
    model = split_built(builder(**{k: binding[k] for k in takes if k in binding}))[0]
    model.train()
    xs = [_make_input(sp, binding, "cpu") for sp in specs]
    return [capture_region(model, xs, b, amp) for b in budgets] + [{k: binding[k] for k in sorted(used)}]


def _add_optimizer(graph, spec, output):
    """export_torch.py --optimizer SPEC --graph GRAPH.json -o OUT.json"""
    import json
    from .exporter import write_graph
    from .optimizer_record import record_optimizer
    try:
        with open(graph) as f:
            g = json.load(f)
        g["optimizer"] = record_optimizer(spec)
        write_graph(g, output)
    except (OSError, ValueError) as e:
        sys.stderr.write("export_torch.py: %s: %s\n" % (graph, e))
        return 2
    except ExportError as e:
        sys.stderr.write("export_torch.py: %s\n" % e)
        return 2
    return 0


def _parse_set(items):
    symbols = {}
    for kv in items:
        if "=" not in kv:
            raise ExportError("--set expects SYM=VALUE, got %r" % kv)
        k, v = kv.split("=", 1)
        try:
            symbols[k.strip()] = int(v)
        except ValueError:
            raise ExportError("--set %s: %r is not an integer" % (k, v))
    return symbols


def _export(a, model, builder, takes, inputs, opts):
    """fx tracing, or recording the model as it runs (--trace run, or auto when fx cannot trace or meets an op
    with no rule)."""
    from .exporter import export_model

    def build(binding):
        return split_built(builder(**{k: binding[k] for k in takes if k in binding}))[0]
    from . import convert, record
    record.RECORD = not a.no_recorded
    convert.RECORD_UNSUPPORTED = a.trace == "fx" and not a.no_recorded
    if a.trace == "run":
        return _export_run(a, build, inputs, takes, opts)
    try:
        return export_model(model, inputs, device=a.device, rebuild=build if takes else None, **opts)
    except ExportError as e:
        # auto: code fx cannot trace, a traced graph that does not run (a helper fx recorded as one
        # call but cannot give values: shape propagation), or an op with no rule (recorded as it
        # runs: Note [Recorded rules])
        if a.trace == "fx" or not (str(e).startswith(("cannot trace", "shape propagation failed")) or
                                   (isinstance(e, UnsupportedError) and not a.no_recorded)):
            raise
        fx_error = e
    try:
        return _export_run(a, build, inputs, takes, opts)
    except UnsupportedError:
        raise
    except ExportError as e:
        raise ExportError("%s\nrecording it as it runs failed too: %s" % (fx_error, e)) from e


# --device auto runs a model that needs values on CPU tensors only when its weights take at most
# this much (a real forward at the exported sizes follows); --device cpu asks for any size.
CPU_FALLBACK_BYTES = 4 << 30


def _materialize_lazy(model, inputs, symbols):
    """materialize_lazy with zeros of the input specs (every symbol at its value, batch 2) on the
    model's device."""
    import torch
    from torch.nn.parameter import UninitializedParameter
    from .exporter import materialize_lazy, parse_input_spec

    def zeros():
        values = {"batch": 2, **dict(symbols or {})}
        device = next((t.device for t in model.parameters() if not isinstance(t, UninitializedParameter)),
                      torch.device("meta") if any(t.is_meta for t in model.parameters()) else torch.device("cpu"))
        args = []
        for text in inputs:
            sp = parse_input_spec(text)
            if any(isinstance(d, str) and d not in values for d in sp.dims):
                raise ExportError("a lazy module's first forward needs a value for every symbol of %s: give --set" % text)
            shape = [values[d] if isinstance(d, str) else d for d in sp.dims]
            args.append(torch.zeros(shape, dtype=getattr(torch, sp.dtype), device=device))
        return args, {}
    return materialize_lazy(model, zeros)


def _lazy_builder(builder, inputs, symbols):
    """|builder|, whose models get their lazy parameters' shapes at once (_materialize_lazy)."""
    def build(*args, **kw):
        out = builder(*args, **kw)
        model, _ = split_built(out)
        _materialize_lazy(model, inputs, symbols)
        return out
    for attr in ("__name__", "__doc__", "__wrapped__"):
        if hasattr(builder, attr):
            setattr(build, attr, getattr(builder, attr))
    build.__signature__ = __import__("inspect").signature(builder)
    return build


def _export_run(a, build, inputs, takes, opts):
    """Export by execution on meta tensors; on CPU tensors with --device cpu, or with --device auto
    when the model needs values (Note [Data-dependent sizes])."""
    from .eager import DataDependentError, export_eager
    if a.device == "cpu":
        return export_eager(build, inputs, builder_symbols=takes, device="cpu", **opts)
    try:
        return export_eager(build, inputs, builder_symbols=takes, **opts)
    except DataDependentError as e:
        if a.device == "meta":
            raise
        if e.param_bytes > CPU_FALLBACK_BYTES:
            raise ExportError("%s\n--device cpu runs it on CPU tensors instead (its weights alone take %.1f GiB)"
                              % (e, e.param_bytes / 2 ** 30)) from e
        # the graph's sizes are those of this run: say so, as `memsim run --batch` cannot change them
        sets = dict(opts.get("symbols") or {})
        sizes = ", ".join("%s=%s" % kv for kv in sorted({"batch": 32, **sets}.items()))
        print("note: %s\nnote: exported by running on CPU tensors at %s: the graph's sizes are fixed "
              "(Note [Data-dependent sizes]); give --set NAME=N for others" % (str(e).splitlines()[0], sizes),
              file=sys.stderr)
    return export_eager(build, inputs, builder_symbols=takes, device="cpu", **opts)
