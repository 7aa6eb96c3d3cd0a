"""Keyword arguments → the command line's options (docs/cli.md), parsed in C++ by the CLI's own
option spec (sim/options/options.h): same names with ``_`` for ``-``, same checks, same messages."""

# Keyword → CLI option, for the options every configuration command takes.
OPTIONS = {
    "batch": "--batch",
    "set": "--set",
    "optimizer": "--optimizer",
    "step": "--step",
    "profile": "--profile",
    "torch": "--torch",
    "inplace_activations": "--inplace-activations",
    "freeze": "--freeze",
    "freeze_params": "--freeze-params",
    "allocator": "--allocator",
    "alloc_conf": "--alloc-conf",
    "gpu": "--gpu",
    "capacity": "--capacity",
    "conv_workspace": "--conv-workspace",
    "cublas_workspace": "--cublas-workspace",
    "accumulate": "--accumulate",
    "clip_grad_norm": "--clip-grad-norm",
    "min_8bit_size": "--min-8bit-size",
    "checkpoint": "--checkpoint",
    "checkpoint_early_stop": "--checkpoint-early-stop",
    "dispatch_mode": "--dispatch-mode",
    "sac": "--sac",
    "save_on_cpu": "--save-on-cpu",
    "offload_activations": "--offload-activations",
    "optimizer_in_backward": "--optimizer-in-backward",
    "foreach": "--foreach",
    "ddp": "--ddp",
    "world": "--world",
    "zero": "--zero",
    "bucket_cap_mb": "--bucket-cap-mb",
    "zero_bucket_size": "--zero-bucket-size",
    "zero_overlap_comm": "--zero-overlap-comm",
    "zero_persistence_threshold": "--zero-persistence-threshold",
    "fsdp": "--fsdp",
    "wrap": "--wrap",
    "offload": "--offload",
    "fsdp_mixed_precision": "--fsdp-mixed-precision",
    "data_parallel": "--data-parallel",
    "amp": "--amp",
    "dtype": "--dtype",
    "grad_scaler": "--grad-scaler",
    "steps": "--steps",
    "loop_holds": "--loop-holds",
    "zero_grad": "--zero-grad",
    "amp_loss": "--amp-loss",
    "cpu_isa": "--cpu-isa",
    "lora": "--lora",
    "quantize_base": "--quantize-base",
    "fp8": "--fp8",
    "mesh": "--mesh",
    "init": "--init",
    "reshard_after_forward": "--reshard-after-forward",
    "fsdp2_mp": "--fsdp2-mp",
    "tp_plan": "--tp-plan",
    "sequence_parallel": "--sequence-parallel",
    "loss_parallel": "--loss-parallel",
    "moe_routing": "--moe-routing",
    "pp_schedule": "--pp-schedule",
    "microbatches": "--microbatches",
    "pp_split": "--pp-split",
    "pp_stages_per_rank": "--pp-stages-per-rank",
    "config": "--config",
}
# Options given once even in a sweep (a list is a bad value for them).
SCALAR = {"min_8bit_size", "gpu", "capacity", "conv_workspace", "cublas_workspace", "clip_grad_norm", "ddp", "bucket_cap_mb", "fsdp",
          "offload", "fsdp_mixed_precision", "data_parallel", "grad_scaler", "steps", "loop_holds", "zero_grad",
          "amp_loss", "cpu_isa", "dispatch_mode", "checkpoint_early_stop", "sac", "save_on_cpu", "offload_activations", "optimizer_in_backward", "lora",
          "quantize_base", "fp8", "mesh", "config", "zero_bucket_size", "zero_overlap_comm",
          "zero_persistence_threshold", "pp_schedule", "microbatches", "pp_split",
          "pp_stages_per_rank", "init", "reshard_after_forward", "fsdp2_mp", "tp_plan", "sequence_parallel", "loss_parallel",
          "moe_routing"}
# Options that repeat rather than vary (every glob applies).
REPEATED = {"freeze", "checkpoint", "wrap"}


def _value(name, v):
    if name == "reshard_after_forward" and isinstance(v, bool):  # fully_shard's own spelling: True, False or an int
        return "true" if v else "false"
    if isinstance(v, bool):
        # True would reach the CLI as "True"; say what the option wants instead.
        raise TypeError("%s=%r: expected %s" % (name, v, "a string" if name not in ("batch", "freeze_params", "accumulate", "steps", "min_8bit_size", "microbatches",
                                                                                     "pp_stages_per_rank")
                                                 else "an integer"))
    return str(v)


def _values(name, v, lists):
    """The option's values as strings: one, or (sweep) each of a list/tuple/range."""
    if isinstance(v, (list, tuple, range)):
        if not lists and name not in REPEATED:
            raise TypeError("%s=%r: one value per option here (memsim.sweep takes lists)" % (name, v))
        if name in SCALAR:
            raise TypeError("%s takes one value, not a list" % name)
        return [_value(name, x) for x in v]
    return [_value(name, v)]


def _set_args(symbols, lists):
    """set={"seq": 128} (sweep: {"seq": [128, 512]}) → ["--set=seq=128"]."""
    if not isinstance(symbols, dict):
        raise TypeError("set=%r: expected a dict of symbol values, e.g. set={'seq': 128}" % (symbols,))
    args = []
    for sym, v in symbols.items():
        args.append("--set=%s=%s" % (sym, ",".join(_values("set[%s]" % sym, v, lists))))
    return args


def running_torch_release():
    """The release memsim's rules follow for the torch this process runs (Note [Version
    profiles]): "1.13" under torch 1.x, "2.13" under 2.x and when torch is not installed."""
    try:
        import torch
    except ImportError:
        return "2.13"
    return "1.13" if torch.__version__.startswith("1.") else "2.13"


def to_args(options, lists, where):
    """The CLI arguments for |options| (a dict of keywords; None values are left out). Unknown
    keywords raise TypeError naming |where| and the known ones. torch= defaults to the release
    of the torch this process runs, as the exporter records it."""
    if options.get("torch") is None:
        options = dict(options, torch=running_torch_release())
    unknown = sorted(k for k in options if k not in OPTIONS)
    if unknown:
        raise TypeError("%s() got unexpected keyword argument(s) %s (options: %s)" % (
            where, ", ".join(unknown), ", ".join(sorted(OPTIONS))))
    args = []
    for name, v in options.items():
        if v is None:
            continue
        if name == "set":
            args += _set_args(v, lists)
            continue
        for s in _values(name, v, lists):
            # --opt=V (V may start with "-"); an empty V apart, or CLI11 reads the next argument
            args += ["%s=%s" % (OPTIONS[name], s)] if s else [OPTIONS[name], s]
    return args
