"""Record a selective-activation-checkpointing policy as `memsim run --sac FILE.json` reads it.

A user's SAC policy is code: a ``policy_fn(ctx, func, *args, **kwargs)`` handed to
``torch.utils.checkpoint.create_selective_checkpoint_contexts`` (or a ``context_fn`` that builds
those contexts, as torchtitan's does). :func:`record_sac_policy` runs the model's forward once with
the chosen modules checkpointed exactly that way and notes, per module call, which calls of which
ATen op the policy saved (Note [Selective activation checkpointing] in docs/op-rules.md)::

    {"recorded": {"layers.0": [{"mm": [true, false, true, false], ...}], ...}, "policy": "..."}

Ops the policy never saves in a call are left out of it (memsim recomputes them).
"""
import fnmatch
import functools
import inspect
import json

from .errors import ExportError


def _outermost(model, globs):
    """The qualified names of the modules matching a glob (fnmatch, as --checkpoint), outermost only."""
    globs = [globs] if isinstance(globs, str) else list(globs)
    names = [n for n, _ in model.named_modules() if n and any(fnmatch.fnmatchcase(n, g) for g in globs)]
    return [n for n in names if not any(n.startswith(o + ".") for o in names)]


def _context_fn(policy):
    """A zero-argument context_fn as torch.utils.checkpoint.checkpoint takes it."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts
    try:
        params = inspect.signature(policy).parameters
    except (TypeError, ValueError):
        params = {"ctx": None}
    if len(params) == 0:
        return policy
    return functools.partial(create_selective_checkpoint_contexts, policy)


def _saved(decision):
    from torch.utils.checkpoint import CheckpointPolicy
    if isinstance(decision, bool):
        return decision
    return decision in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE)


def record_sac_policy(model, inputs, policy, checkpoint, path=None):
    """Runs ``model(*inputs)`` (``model(**inputs)`` for a dict) once with every module whose qualified name matches |checkpoint| (a
    glob or a list of globs, as memsim's --checkpoint) wrapped in
    ``checkpoint(..., use_reentrant=False, context_fn=...)`` under |policy| (a policy_fn, or a
    context_fn returning create_selective_checkpoint_contexts' pair), records what the policy
    saved, and returns the policy as a dict (written as JSON to |path| if given)."""
    import torch
    import torch.utils.checkpoint as tuc
    modules = _outermost(model, checkpoint)
    if not modules:
        raise ExportError("record_sac_policy: checkpoint=%r matches no module of the model" % (checkpoint,))
    make_contexts = _context_fn(policy)
    recorded = {name: [] for name in modules}

    def recording_context_fn(call):
        def context_fn():
            fwd, recompute = make_contexts()
            if not hasattr(fwd, "policy_fn"):
                raise ExportError("record_sac_policy: the context_fn did not return "
                                  "create_selective_checkpoint_contexts' pair")
            inner = fwd.policy_fn

            def note(ctx, func, *args, **kwargs):
                decision = inner(ctx, func, *args, **kwargs)
                bits = call.setdefault(func.overloadpacket.__name__, [])
                bits.append(_saved(decision))
                return decision
            fwd.policy_fn = note
            return fwd, recompute
        return context_fn

    originals = {}
    named = dict(model.named_modules())
    try:
        for name in modules:
            mod = named[name]
            originals[name] = mod.forward

            def fwd(*args, _inner=mod.forward, _name=name, **kw):
                call = {}
                recorded[_name].append(call)
                return tuc.checkpoint(_inner, *args, use_reentrant=False,
                                      context_fn=recording_context_fn(call), **kw)
            mod.forward = fwd
        with torch.enable_grad():
            if isinstance(inputs, dict):
                model(**inputs)
            else:
                model(*(inputs if isinstance(inputs, (tuple, list)) else (inputs,)))
    finally:
        for name, f in originals.items():
            named[name].forward = f
    out = {"recorded": {name: [{op: bits for op, bits in sorted(call.items()) if any(bits)} for call in calls]
                        for name, calls in recorded.items()},
           "policy": getattr(policy, "__qualname__", repr(policy))}
    if path is not None:
        with open(path, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
            f.write("\n")
    return out
