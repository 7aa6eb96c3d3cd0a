"""The per-rank section of docs/validation.md (called by tools/validate.py): memsim's
`--ddp WORLD` and `--zero 1 --world N` against real per-rank traces (tests/data/traces_ddp/,
recorded by the recording kit's trace_ddp.py: PyTorch 1.13.1, gloo, one process per rank).

Each trace set `NAME.rankR.trace` is one configuration; memsim runs it once
(`memsim run --profile cpu --step first --json --ddp W` or `--zero 1 --world W`, with the
trace's bucket settings) and every rank's figures come from the report's `ranks` entry standing
for that rank. Compared: the peak and each phase (setup = DDP construction, forward, backward,
step = optimizer.step() and zero_grad()).
"""
import json, os, subprocess

import validate

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_ddp")
# The PyTorch 2.13 sets (tests/oracle/record_2_13.sh), against the graphs exported under 2.13.
DATA_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_ddp_2_13")
GRAPHS_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_2_13", "graphs")
# FSDP2 (fully_shard) per rank under 2.13 (tests/oracle/record_fsdp2_2_13.sh).
DATA_FSDP2_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_fsdp2_2_13")
# Its graphs: the 2.13 ones, and the op models of the float8 traces (act_mlp_a, --fp8).
GRAPHS_FSDP2_2_13 = [os.path.join(os.path.dirname(HERE), "tests", "data", d, "graphs")
                     for d in ("traces_2_13", "traces_fp8_2_13")]
# Tensor parallel (tests/oracle/record_tp_2_13.sh): Hugging Face decoders, their 2.13 graphs.
DATA_TP_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_tp_2_13")
GRAPHS_TP_2_13 = [os.path.join(DATA_TP_2_13, "graphs"),
                  os.path.join(os.path.dirname(HERE), "tests", "data", "traces_hf_2_13", "graphs")]
# The 2-D mesh FSDP2 × TP (tests/oracle/record_fsdp2_tp_2_13.sh), on the TP traces' graphs.
DATA_FSDP2_TP_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_fsdp2_tp_2_13")
GRAPHS_FSDP2_TP_2_13 = [os.path.join(DATA_FSDP2_TP_2_13, "graphs")] + GRAPHS_TP_2_13
# Pipeline parallel (tests/oracle/record_pp_2_13.sh): one trace per stage rank.
DATA_PP_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_pp_2_13")
# Pipeline parallel × FSDP2 (tests/oracle/record_pp_fsdp2_2_13.sh): the 2-D mesh pp × dp_shard.
DATA_PP_FSDP2_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_pp_fsdp2_2_13")
PP_FSDP2_TITLE = "Pipeline parallel × FSDP2 (2-D mesh), per rank, PyTorch 2.13"
PP_FSDP2_INTRO = [
    "Every rank of each trace set in `tests/data/traces_pp_fsdp2_2_13/` (real PyTorch 2.13.0 CPU steps recorded by",
    "`tests/oracle/record_pp_fsdp2_2_13.sh`: the kit's `trace_ddp.py --mode pp_fsdp2`, gloo, one process per rank of",
    "the mesh (pp, dp_shard) made first, the stage of the rank's pp coordinate as `pipeline_llm` splits the model,",
    "then `fully_shard` on each of its blocks and on the stage module over `dp_shard` (torchtitan's `apply_fsdp`,",
    "traced as the `setup` phase), one `schedule.step()`), predicted by one `memsim run --profile cpu --torch 2.13",
    "--step first --mesh pp=P,dp_shard=D --pp-schedule S --microbatches M --wrap 'layers.*'",
    "--reshard-after-forward true|false`; memsim's `ranks` entry standing for that rank (Notes [FSDP2] and",
    "[Pipeline parallel] in `docs/parallel.md`). The `hf_llama_pp` sets are a Hugging Face Llama cut as in the",
    "PP × TP section (its graphs there; `--wrap 'model.layers.*'`, with `--mp bf16` its bf16 graph and",
    "`--fsdp2-mp param=bf16,reduce=fp32`); the split-backward schedules (ZBV, DualPipeV, InterleavedZeroBubble)",
    "run FSDP2's hooks in their input passes only. Same tolerance as the pipeline section."]
# Pipeline parallel × tensor parallel (× FSDP2) (tests/oracle/record_pp_tp_2_13.sh): a Hugging Face Llama.
DATA_PP_TP_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_pp_tp_2_13")
PP_TP_TITLE = "Pipeline parallel × tensor parallel (× FSDP2: the 3-D mesh), per rank, PyTorch 2.13"
PP_TP_INTRO = [
    "Every rank of each trace set in `tests/data/traces_pp_tp_2_13/` (real PyTorch 2.13.0 CPU steps recorded by",
    "`tests/oracle/record_pp_tp_2_13.sh`: the kit's `trace_ddp.py --mode pp_tp`, gloo, one process per rank of the",
    "mesh (pp, dp_shard, tp) made first, the stage of the rank's pp coordinate (a Hugging Face Llama of four layers",
    "cut as `pipeline_llm` cuts torchtitan's, each stage computing its rotary cos/sin), then `parallelize_module` on",
    "the stage's layers over `tp` and, with dp_shard, `fully_shard` on them and on the stage over `dp_shard`",
    "(torchtitan's `parallelize_llama` on each model part, traced as the `setup` phase), one `schedule.step()`),",
    "predicted by one `memsim run --profile cpu --torch 2.13 --step first --mesh pp=P[,dp_shard=D],tp=T --tp-plan",
    "layers --pp-schedule S --microbatches M` (+ `--wrap 'model.layers.*' --reshard-after-forward false` with",
    "dp_shard); memsim's `ranks` entry standing for that rank (Notes [Pipeline parallel] and [Tensor parallel] in",
    "`docs/parallel.md`). Same tolerance as the pipeline section."]
# Expert parallel (tests/oracle/record_ep_2_13.sh): the MoE models of graphs/moe_models.py, their 2.13 graphs.
DATA_EP_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_ep_2_13")
GRAPHS_EP_2_13 = [os.path.join(os.path.dirname(HERE), "tests", "data", "traces_moe_2_13", "graphs")]
EP_TITLE = "Expert parallel, per rank, PyTorch 2.13"
EP_INTRO = ["Every rank of each trace set in `tests/data/traces_ep_2_13/` (real PyTorch 2.13.0 CPU steps recorded by",
            "`tests/oracle/record_ep_2_13.sh`: the kit's `trace_ddp.py --mode ep`, gloo, one process per rank, torchtitan's",
            "`ExpertParallel` on the experts of `graphs/moe_models.py`, traced as the `setup` phase), predicted by one",
            "`memsim run --profile cpu --torch 2.13 --step first --mesh ep=W --moe-routing ranks=C0:C1:...` with every",
            "rank's tokens per expert from its CONFIG (`routed=`); memsim's `ranks` entry standing for that rank (Note",
            "[Expert parallel] in docs/parallel.md). The sets with `dp_shard` are torchtitan's EP borrowing dp_shard",
            "(`--mode ep --ep E`: FSDP2 over the world, each MoE layer's experts on the efsdp mesh of world / E ranks,",
            "`Shard(1)` when the world exceeds the experts, explicit prefetching), predicted with `--mesh",
            "dp_shard=W,ep=E --wrap moe.N ...`; the `_apart` sets wrap each layer's experts in a `fully_shard` of their",
            "own before the layer's (`--ep-flow apart`, torchtitan's flow on torch 2.11), predicted with their `--wrap`",
            "before the layer's. The sets with `pp` run it on each pipeline stage (`--mode pp_fsdp2 --ep E`:",
            "the meshes (pp, dp_shard) and (pp, efsdp, ep) made first, each of the rank's stage parts parallelized in turn,",
            "every microbatch the same tokens so that each routes as `routed=` says), predicted with `--mesh",
            "pp=P,dp_shard=D,ep=E --pp-schedule S --microbatches M`. Same tolerance."]
# Context parallel (tests/oracle/record_cp_2_13.sh): Hugging Face decoders, the TP traces' graphs.
DATA_CP_2_13 = os.path.join(os.path.dirname(HERE), "tests", "data", "traces_cp_2_13")
CP_TITLE = "Context parallel (ring attention through the kit's CPU shim), per rank, PyTorch 2.13"
CP_INTRO = ["Every rank of each trace set in `tests/data/traces_cp_2_13/` (real PyTorch 2.13.0 CPU steps recorded by",
            "`tests/oracle/record_cp_2_13.sh`: the kit's `trace_ddp.py --mode cp`, gloo, one process per rank,",
            "`context_parallel(mesh, buffers=[input_ids, labels])` around forward, loss and backward; the ring's flash",
            "kernels run on the CPU through the kit's `cp_shim.py`, Note [Context parallel] in docs/parallel.md),",
            "predicted by one `memsim run --profile cpu --torch 2.13 --step first --mesh cp=W --set seq=S` (the whole",
            "sequence) with the trace's batch and optimizer; memsim's `ranks` entry standing for that rank. Same tolerance."]
TP_TITLE = "Tensor parallel, per rank, PyTorch 2.13"
TP_INTRO = ["Every rank of each trace set in `tests/data/traces_tp_2_13/` (real PyTorch 2.13.0 CPU steps recorded by",
            "the recording kit's `trace_ddp.py --mode tp`: gloo, one process per rank, `parallelize_module` traced as",
            "the `setup` phase), predicted by one `memsim run --profile cpu --torch 2.13 --step first --mesh tp=W",
            "--tp-plan PLAN` with the trace's batch, sequence and optimizer; memsim's `ranks` entry standing for that",
            "rank (Note [Tensor parallel] in docs/parallel.md). Same tolerance."]
# Phases whose measured figure depends on thread timing, not on a rule (listed as notes,
# outside the tolerance): on the broadcast's source rank, gloo's work object may still hold the
# flat copy of the module states when the Reducer's bucket is allocated (re-recording the same
# configuration gives the deterministic order memsim follows, 8,996,432 B for this one).
TIMING = {("mnist_cnn_b32_adam_zero1", 0, "setup"): "gloo broadcast timing on the source rank"}


def trace_sets(d):
    sets = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".trace") and ".rank" in n:
            name, rank = n[:-6].rsplit(".rank", 1)
            sets.setdefault(name, {})[int(rank)] = os.path.join(d, n)
    return sets


def fsdp2_args(cfg):
    """--reshard-after-forward, --wrap and --fsdp2-mp of an FSDP2 trace's config."""
    out = ["--reshard-after-forward", cfg.get("reshard", "true").lower()]
    for w in filter(None, cfg.get("wrap", "").split(",")):
        out += ["--wrap", w]
    if cfg.get("mp", "none") != "none":
        out += ["--fsdp2-mp", "param=%s,reduce=fp32" % cfg["mp"]]
    if cfg.get("fp8"):  # trace_ddp.py --fp8: torchao float8 with the float8 all-gather (Note [FP8 training])
        out += ["--fp8", cfg["fp8"] + ",fsdp_float8_all_gather"]
    return out


def ac_args(cfg):
    """--checkpoint of a pipeline trace's `ac=full`: every decoder layer (a Hugging Face model's under model.)."""
    if cfg.get("ac") != "full":
        return []
    return ["--checkpoint", "model.layers.*" if cfg["model"].startswith("hf_") else "layers.*"]


def mesh_of(cfg):
    """The --mesh of a per-rank trace's config (modes tp, cp, ep, pp and those with FSDP2), its
    dimensions in torchtitan's order; the size-one ones left out."""
    mode, world, r = cfg["mode"], int(cfg["world"]), int(cfg.get("hsdp", "1"))
    whole = {"tp": "tp", "cp": "cp", "pp": "pp"}.get(mode) or ("ep" if mode == "ep" and "ep" not in cfg else None)
    if whole:  # the one dimension is the world
        return "%s=%d" % (whole, world)
    pp = int(cfg["pp"]) if mode.startswith("pp_") else 1
    tp = int(cfg["tp"]) if mode in ("fsdp2_tp", "pp_tp") else 1
    dims = [("pp", pp), ("dp_replicate", r), ("dp_shard", world // (pp * r * tp)), ("tp", tp), ("ep", int(cfg.get("ep", "1")))]
    return ",".join("%s=%d" % kv for kv in dims if kv[1] > 1)


def memsim_cmd(memsim, graph, cfg):
    cmd = [memsim, "run", graph, "--profile", "cpu", "--torch", validate.trace_release(cfg), "--step", "first",
           "--json", "--batch", cfg["batch"],
           "--optimizer", validate.OPT[cfg.get("opt", "sgd")], "--inplace-activations", "off",
           "--bucket-cap-mb", cfg.get("bucket_mb", "25")]
    if cfg.get("mode") == "fsdp2_tp":  # the 2-D mesh: TP on the "tp" dim, then FSDP2 on "dp_shard" (HSDP: 3-D)
        return cmd[:-2] + ["--mesh", mesh_of(cfg), "--tp-plan", cfg.get("tp_plan", "layers"),
                           "--sequence-parallel", "on" if cfg.get("sp") == "1" else "off", "--set", "seq=" + cfg["seq"]] + fsdp2_args(cfg)
    if cfg.get("mode") == "tp":
        cmd = cmd[:-2] + ["--mesh", mesh_of(cfg), "--tp-plan", cfg.get("tp_plan", "layers"),
                          "--sequence-parallel", "on" if cfg.get("sp") == "1" else "off",
                          "--loss-parallel", "on" if cfg.get("loss_parallel") == "1" else "off", "--set", "seq=" + cfg["seq"]]
        return cmd
    if cfg.get("mode") == "ep":  # every rank's tokens per expert: the rows each rank receives
        if "ep" in cfg:  # ep borrowing dp_shard: FSDP2 over the world, the experts' over efsdp (HSDP: per replica)
            return cmd[:-2] + ["--mesh", mesh_of(cfg),
                               "--moe-routing", "ranks=" + cfg["routed_ranks"]] + fsdp2_args(cfg) + \
                   (["--set", "seq=" + cfg["seq"]] if "seq" in cfg else [])
        return cmd[:-2] + ["--mesh", mesh_of(cfg), "--moe-routing", "ranks=" + cfg["routed_ranks"]]
    if cfg.get("mode") == "cp":  # the whole sequence; each rank runs seq/cp of it
        return cmd[:-2] + ["--mesh", mesh_of(cfg), "--set", "seq=" + cfg["seq"]]
    if cfg.get("mode") == "pp_fsdp2":  # the 2-D mesh: the stage of the pp coordinate, FSDP2 (HSDP) over dp
        return cmd[:-2] + ["--mesh", mesh_of(cfg), "--pp-schedule", cfg["schedule"],
                           "--pp-stages-per-rank", cfg.get("stages_per_rank", "1"),
                           "--microbatches", cfg["microbatches"], "--set", "seq=" + cfg["seq"]] + fsdp2_args(cfg) + \
                          (["--moe-routing", "ranks=" + cfg["routed_ranks"]] if "ep" in cfg else []) + ac_args(cfg)
    if cfg.get("mode") == "pp_tp":  # the stage of the pp coordinate, TP over tp (and FSDP2 over dp_shard)
        dp = int(cfg["world"]) // (int(cfg["pp"]) * int(cfg["tp"]))
        return cmd[:-2] + ["--mesh", mesh_of(cfg),
                           "--tp-plan", cfg.get("tp_plan", "layers"), "--pp-schedule", cfg["schedule"],
                           "--sequence-parallel", "on" if cfg.get("sp") == "1" else "off",
                           "--pp-stages-per-rank", cfg.get("stages_per_rank", "1"),
                           "--microbatches", cfg["microbatches"], "--set", "seq=" + cfg["seq"]] + (fsdp2_args(cfg) if dp > 1 else []) + \
                          ac_args(cfg) + \
                          (["--init", "meta"] if cfg.get("init") == "meta" else [])
    if cfg.get("mode") == "pp":  # the rank's stages, the schedule over the microbatches
        return cmd[:-2] + ["--mesh", mesh_of(cfg), "--pp-schedule", cfg["schedule"],
                           "--pp-stages-per-rank", cfg.get("stages_per_rank", "1"),
                           "--microbatches", cfg["microbatches"], "--set", "seq=" + cfg["seq"]] + \
                          ac_args(cfg)
    if cfg.get("mode") == "zero1":
        cmd += ["--zero", "1", "--world", cfg["world"]]
    elif cfg.get("mode") == "fsdp2":  # fully_shard on the wrapped modules, then the root
        cmd += ["--mesh", mesh_of(cfg)] + fsdp2_args(cfg)  # HSDP: dp_replicate × dp_shard
        if "seq" in json.load(open(graph)).get("symbols", []):  # language models
            cmd += ["--set", "seq=" + cfg["seq"]]
        return cmd
    else:
        cmd += ["--ddp", cfg["world"]]
    if cfg.get("bucket_view") == "True":
        cmd.append("--gradient-as-bucket-view")
    return cmd


FSDP2_INTRO = [
    "Every rank of each trace set in `tests/data/traces_fsdp2_2_13/` (real PyTorch 2.13.0 CPU steps recorded by",
    "`tests/oracle/record_fsdp2_2_13.sh`: the kit's `trace_ddp.py --mode fsdp2`, gloo, one process per rank,",
    "`fully_shard` on each block then on the root, traced as the `setup` phase), predicted by one `memsim run",
    "--profile cpu --torch 2.13 --step first --mesh dp_shard=W --wrap ... --reshard-after-forward true|false`",
    "(+ `--fsdp2-mp param=bf16,reduce=fp32` for `MixedPrecisionPolicy(bfloat16, float32)`; `--fp8",
    "tensorwise,fsdp_float8_all_gather` for torchao float8 with its float8 all-gather, `trace_ddp.py --fp8`);",
    "memsim's `ranks` entry standing for that rank (Notes [FSDP2] in `docs/parallel.md` and [FP8 training] in `docs/op-rules.md`). Same tolerance."]


FSDP2_TP_TITLE = "FSDP2 × tensor parallel (2-D mesh), per rank, PyTorch 2.13"
FSDP2_TP_INTRO = [
    "Every rank of each trace set in `tests/data/traces_fsdp2_tp_2_13/` (real PyTorch 2.13.0 CPU steps recorded by",
    "`tests/oracle/record_fsdp2_tp_2_13.sh`: the kit's `trace_ddp.py --mode fsdp2_tp`, gloo, one process per rank,",
    "one mesh (dp_shard, tp), `parallelize_module` on its `tp` dimension then `fully_shard` on each decoder layer and",
    "the root on its `dp_shard` dimension, torchtitan's order, traced as the `setup` phase), predicted by one",
    "`memsim run --profile cpu --torch 2.13 --step first --mesh dp_shard=S,tp=T --tp-plan layers --wrap ...",
    "--reshard-after-forward true|false` (+ `--fsdp2-mp param=bf16,reduce=fp32` on the graph exported in bf16",
    "whose parameters and buffers are marked fp32, `graphs/hf_llama_tp_bf16.json`); memsim's `ranks` entry standing for that rank",
    "(Notes [FSDP2] and [Tensor parallel] in `docs/parallel.md`). Same tolerance."]


def section(memsim, graphs, d=DATA, release="1.13", title=None, intro=None, max_err=None, max_median=None):
    """(Markdown lines, failures, absolute peak errors) of every per-rank trace set in |d|."""
    if not os.path.isdir(d):
        raise FileNotFoundError("validate: missing per-rank traces %s (part of the repository)" % d)
    rows, failures, peak_errs = [], [], []
    ranks_of = trace_sets(d)
    for name, ranks in ranks_of.items():
        cfg = validate.summarize(ranks[min(ranks)])[0]
        if "routed" in cfg:  # expert parallel: each rank routes its own batch (CONFIG routed=)
            cfg["routed_ranks"] = ":".join(validate.summarize(ranks[r])[0]["routed"] for r in sorted(ranks))
        stem = validate.GRAPH_FOR_MODEL.get(cfg["model"], cfg["model"])
        dirs = graphs if isinstance(graphs, (list, tuple)) else [graphs]  # the first that has the graph
        # MixedPrecisionPolicy: the graph exported in param_dtype (MODEL_bf16.json), where there is one
        stems = ([stem + "_" + cfg["mp"] + ".json"] if cfg.get("mp", "none") != "none" else []) + [stem + ".json"]
        graph = next((os.path.join(g, s) for s in stems for g in dirs if os.path.exists(os.path.join(g, s))),
                     os.path.join(dirs[0], stems[-1]))
        cmd = memsim_cmd(memsim, graph, cfg)
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            failures.append("%s: %s: %s" % (name, " ".join(cmd), out.stderr.strip()))
            continue
        report = json.loads(out.stdout)
        for rank, path in sorted(ranks.items()):
            _, base, peak, phases = validate.summarize(path)
            entry = next((e for e in report["ranks"] if rank in e["ranks"]), None)
            if entry is None:
                failures.append("%s: memsim reports no rank %d" % (name, rank))
                continue
            pp = entry["phase_peaks"]
            cells = [("peak", entry["peak_live_bytes"], peak), ("setup", pp["setup"], phases.get("setup", 0)),
                     ("forward", pp["forward"], phases.get("forward", 0)),
                     ("backward", pp["backward"], phases.get("backward", 0)),
                     ("step", pp["optimizer"], max(phases.get("step", 0), phases.get("zero_grad", 0)))]
            for label, pred, real in cells:
                e = validate.err(pred, real)
                note = TIMING.get((name, rank, label))
                if note:
                    continue
                if label == "peak":
                    peak_errs.append(abs(e))
                if abs(e) > (max_err if max_err is not None else validate.MAX_ERR):
                    failures.append("%s rank %d: %s error %.3f %% (predicted %d, measured %d)" % (name, rank, label, e, pred, real))
            rows.append((name, rank, cfg, entry["ranks"], cells))
    head = title or "Several ranks: DDP and ZeroRedundancyOptimizer, per rank" + ("" if release == "1.13" else ", PyTorch " + release)
    lines = ["", "## " + head, ""] + (intro or [
             "Every rank of each trace set in `tests/data/%s/` (real PyTorch %s CPU steps recorded by" % (
                 os.path.basename(os.path.normpath(d)), "1.13.1" if release == "1.13" else "2.13.0"),
             "the recording kit's `trace_ddp.py`: gloo, one process per rank, DDP construction traced as a `setup`",
             "phase; `mode zero1` = DDP + `ZeroRedundancyOptimizer`), predicted by one `memsim run --profile cpu --torch %s" % release,
             "--step first --ddp W` (or `--zero 1 --world W`) with the trace's batch, optimizer, `--bucket-cap-mb`",
             "and `--gradient-as-bucket-view`; memsim's `ranks` entry standing for that rank. Same tolerance."]) + ["",
             "| trace | rank | memsim ranks | config | phase | measured | predicted | error |",
             "|---|---:|---|---|---|---:|---:|---:|"]
    for name, rank, cfg, mranks, cells in rows:
        if cfg.get("mode") == "fsdp2_tp":
            c = "batch %s, seq %s, %s, dp_shard=%d, tp=%s, reshard %s%s" % (
                cfg["batch"], cfg["seq"], cfg.get("opt"), int(cfg["world"]) // int(cfg["tp"]) // int(cfg.get("hsdp", "1")),
                cfg["tp"], cfg.get("reshard"),
                ", mp %s" % cfg["mp"] if cfg.get("mp", "none") != "none" else "") + (
                ", plan torchtitan" if cfg.get("tp_plan") == "torchtitan" else "") + (
                ", sequence parallel" if cfg.get("sp") == "1" else "") + (
                ", HSDP dp_replicate=%s" % cfg["hsdp"] if "hsdp" in cfg else "")
        elif cfg.get("mode") == "fsdp2":
            c = "batch %s, %s, world %s, reshard %s%s%s%s" % (cfg["batch"], cfg.get("opt"), cfg["world"], cfg.get("reshard"),
                                                           ", mp %s" % cfg["mp"] if cfg.get("mp", "none") != "none" else "",
                                                           ", fp8 %s (float8 all-gather)" % cfg["fp8"] if cfg.get("fp8") else "",
                                                           ", HSDP %s×%d" % (cfg["hsdp"], int(cfg["world"]) // int(cfg["hsdp"]))
                                                           if "hsdp" in cfg else "")
        elif cfg.get("mode") == "pp_fsdp2":
            r = int(cfg.get("hsdp", "1"))
            c = "batch %s, seq %s, %s, pp=%s, %sdp_shard=%d, %s%s, %s microbatches, reshard %s%s" % (
                cfg["batch"], cfg["seq"], cfg.get("opt"), cfg["pp"], "dp_replicate=%d, " % r if r > 1 else "",
                int(cfg["world"]) // (int(cfg["pp"]) * r), cfg["schedule"],
                " (%s stages per rank)" % cfg["stages_per_rank"] if "stages_per_rank" in cfg else "",
                cfg["microbatches"], cfg.get("reshard"), ", mp %s" % cfg["mp"] if cfg.get("mp", "none") != "none" else "") + (
                ", ep=%s, routed %s" % (cfg["ep"], validate.summarize(ranks_of[name][rank])[0]["routed"]) if "ep" in cfg else "") + (
                ", full AC" if cfg.get("ac") == "full" else "")
        elif cfg.get("mode") == "pp_tp":
            dp = int(cfg["world"]) // (int(cfg["pp"]) * int(cfg["tp"]))
            c = "batch %s, seq %s, %s, pp=%s, %stp=%s, %s%s, %s microbatches%s" % (
                cfg["batch"], cfg["seq"], cfg.get("opt"), cfg["pp"], "dp_shard=%d, " % dp if dp > 1 else "", cfg["tp"],
                cfg["schedule"], " (%s stages per rank)" % cfg["stages_per_rank"] if "stages_per_rank" in cfg else "",
                cfg["microbatches"], ", reshard %s" % cfg.get("reshard") if dp > 1 else "") + (
                ", plan torchtitan" if cfg.get("tp_plan") == "torchtitan" else "") + (
                ", sequence parallel" if cfg.get("sp") == "1" else "") + (
                ", full AC" if cfg.get("ac") == "full" else "") + (
                ", mp %s" % cfg["mp"] if cfg.get("mp", "none") != "none" else "") + (
                ", meta init" if cfg.get("init") == "meta" else "")
        elif cfg.get("mode") == "pp":
            c = "batch %s, seq %s, %s, pp=%s, %s%s, %s microbatches%s" % (
                cfg["batch"], cfg["seq"], cfg.get("opt"), cfg["world"], cfg["schedule"],
                " (%s stages per rank)" % cfg["stages_per_rank"] if "stages_per_rank" in cfg else "", cfg["microbatches"],
                ", full AC" if cfg.get("ac") == "full" else "")
        elif cfg.get("mode") == "ep":
            c = "batch %s, %s, %s, routed %s" % (
                cfg["batch"], cfg.get("opt"),
                ("dp_replicate=%s, " % cfg["hsdp"] if "hsdp" in cfg else "") + "dp_shard=%d, ep=%s" % (
                    int(cfg["world"]) // int(cfg.get("hsdp", "1")), cfg["ep"]) if "ep" in cfg else "ep=%s" % cfg["world"],
                validate.summarize(ranks_of[name][rank])[0]["routed"])
        elif cfg.get("mode") == "cp":
            c = "batch %s, seq %s, %s, cp=%s, %s rotater" % (cfg["batch"], cfg["seq"], cfg.get("opt"), cfg["cp"],
                                                            cfg.get("rotate", "allgather"))
        elif cfg.get("mode") == "tp":
            c = "batch %s, seq %s, %s, tp=%s, plan %s%s%s" % (cfg["batch"], cfg["seq"], cfg.get("opt"), cfg["world"],
                                                           cfg.get("tp_plan"), ", sequence parallel" if cfg.get("sp") == "1" else "",
                                                           ", loss parallel" if cfg.get("loss_parallel") == "1" else "")
        else:
            c = "batch %s, %s, %s%s, bucket %s MB" % (cfg["batch"], cfg.get("opt"), cfg.get("mode"),
                                                      ", bucket view" if cfg.get("bucket_view") == "True" else "",
                                                      cfg.get("bucket_mb"))
        for i, (label, pred, real) in enumerate(cells):
            note = TIMING.get((name, rank, label))
            lines.append("| %s | %s | %s | %s | %s | %d | %d | %+.3f %% |" % (
                name if i == 0 else "", rank if i == 0 else "", ",".join(map(str, mranks)) if i == 0 else "",
                c if i == 0 else "", label + (" (note: %s)" % note if note else ""), real, pred,
                validate.err(pred, real)))
    med = sorted(peak_errs)[len(peak_errs) // 2] if peak_errs else 0.0
    if peak_errs:
        import statistics
        med = statistics.median(peak_errs)
        lines += ["", "Median absolute per-rank peak error: **%.3f %%** over %d ranks; largest: **%.3f %%**." %
                  (med, len(peak_errs), max(peak_errs))]
    limit = max_median if max_median is not None else validate.MAX_MEDIAN
    if med > limit:
        failures.append("per-rank median peak error %.3f %% exceeds %.2f %%" % (med, limit))
    return lines, failures, peak_errs
