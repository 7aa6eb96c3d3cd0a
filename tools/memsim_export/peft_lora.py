"""PEFT LoRA models: the base model to trace and the adapters as the graph's "lora" key.

memsim writes the adapters' ops itself (ApplyLora in lib/ir/lora.h, Note [LoRA] in docs/op-rules.md),
so the exporter traces the base model with each peft LoraLayer put back to its base_layer and records
the configuration: one source of truth for the adapter's op sequence, shared with `memsim run --lora`.
"""
import math

import torch

from .errors import ExportError


def _is_lora_layer(m):
    return type(m).__module__.startswith("peft.") and hasattr(m, "lora_A") and hasattr(m, "base_layer")


def _user_targets(model, base, adapted):
    """The peft config's target_modules, sorted, when they are names that select exactly the adapted
    modules by PEFT's rule (a name matches a module path's end), as memsim's targets do; else None."""
    config = getattr(model, "peft_config", {}).get("default")
    names = getattr(config, "target_modules", None)
    if not isinstance(names, (list, set, tuple)) or not all(isinstance(n, str) for n in names):
        return None
    names = sorted(names)
    def hit(path):
        return any(path == n or path.endswith("." + n) for n in names)
    linear = [n for n, m in base.named_modules() if type(m).__name__ == "Linear" or _is_lora_layer(m)]
    return names if [n for n in linear if hit(n)] == list(adapted) else None


def strip(model):
    """(base model, lora dict or None, restore()): |model| (a PeftModel, or a model with peft LoRA
    layers in it) with every LoraLayer replaced by its base_layer; restore() puts them back."""
    base = model.get_base_model() if hasattr(model, "get_base_model") and hasattr(model, "peft_config") else model
    layers = [(n, m) for n, m in base.named_modules() if _is_lora_layer(m)]
    for n, m in base.named_modules():
        if type(m).__name__ == "ModulesToSaveWrapper":
            raise ExportError("peft modules_to_save (%s) is not supported by memsim's LoRA (Note [LoRA])" % n)
    if not layers:
        return base, None, lambda: None
    configs, targets = set(), []
    for n, m in layers:
        names = [a for a in m.lora_A.keys()]
        if len(names) != 1:
            raise ExportError("%s has %d LoRA adapters (%s); memsim models one" % (n, len(names), ", ".join(names)))
        a = names[0]
        if type(m.base_layer).__name__ not in ("Linear", "Linear4bit", "Linear8bitLt"):  # bnb: bnb_base.strip
            raise ExportError("%s: LoRA on %s is not supported (nn.Linear only)" % (n, type(m.base_layer).__name__))
        if getattr(m, "fan_in_fan_out", False) or m.lora_B[a].bias is not None:
            raise ExportError("%s: fan_in_fan_out / lora_bias are not supported" % n)
        drop = m.lora_dropout[a]
        p = float(drop.p) if hasattr(drop, "p") else 0.0
        r, alpha, scaling = int(m.r[a]), float(m.lora_alpha[a]), float(m.scaling[a])
        rslora = not math.isclose(scaling, alpha / r) and math.isclose(scaling, alpha / math.sqrt(r))
        # get_peft_model(autocast_adapter_dtype=True), peft's default, makes the adapters float32 on a
        # 16-bit base (cast_adapter_dtype); only then does the key matter. (Adapters made on the meta
        # device stay float32 either way: _move_adapter_to_device_of_base_layer skips them, so a model
        # built there reads as the default.)
        base_dtype = m.base_layer.weight.dtype
        upcast = (m.lora_A[a].weight.dtype == torch.float32) if base_dtype in (torch.float16, torch.bfloat16) else None
        configs.add((r, alpha, p, bool(m.use_dora.get(a, False)), rslora, upcast))
        targets.append(n)
    if len(configs) != 1:
        raise ExportError("the LoRA layers differ in rank, alpha, dropout or adapter dtype (rank_pattern / alpha_pattern); "
                          "memsim models one configuration: %s" % sorted(configs))
    r, alpha, p, dora, rslora, upcast = configs.pop()
    lora = {"r": r, "alpha": alpha, "dropout": p, "dora": dora, "rslora": rslora,
            "targets": _user_targets(model, base, targets) or targets}
    if upcast is not None:
        lora["autocast_adapter_dtype"] = upcast
    parents = []
    for n, m in layers:
        parent_name, _, leaf = n.rpartition(".")
        parent = base.get_submodule(parent_name) if parent_name else base
        parents.append((parent, leaf, m))
        setattr(parent, leaf, m.base_layer)

    def restore():
        for parent, leaf, m in parents:
            setattr(parent, leaf, m)
    return base, lora, restore


def annotate(graph, lora):
    """|graph| with the "lora" key (after the loss), when the model had adapters."""
    if lora:
        graph["lora"] = lora
    return graph
