#!/usr/bin/env python3
"""Generates docs/scenarios/llm_parallel.md: what each GPU holds when an LLM is trained with FSDP2,
tensor and context parallelism, beside measurements and the published figures and formulas.

1. Llama 3.1 8B on 8 x H100-80GB as torchtitan trains it (tests/data/configs/torchtitan_llama3_8b.toml:
   FSDP2 over 8 ranks, batch 1, seq 8192, selective op checkpointing), and the variants users weigh
   (full checkpointing, none, FSDP2 x TP 2), per distinct rank; beside rank 0 of the same steps
   recorded on one H200 through a fake process group (tests/data/gpu/h200_2_11_ranks), torchtitan's
   published 47.65 GiB (pytorch/torchtitan PR #808) and Megatron-LM's formula
   (megatron/training/theoretical_memory_usage.py).
2. A 128k-token context with context parallelism 8 (ring attention) x FSDP2 2 on 16 GPUs.
3. Llama 3.1 70B on 64 x H100-80GB with torchtitan's 3-D mesh (PP 4 x FSDP2 2 x TP 8) under 1F1B and
   Interleaved1F1B, every stage, beside Megatron-LM's formula.
4. Mixtral 8x7B with expert parallelism 8 borrowing FSDP2's ranks (torchtitan's MoE recipe) on 8, 16, 32
   and 64 GPUs, balanced and imbalanced routing, beside Megatron-LM's formula.
5. What this page does not show yet, and why.
Usage: llm_parallel.py [--memsim build/memsim] [--out docs/scenarios/llm_parallel.md] [--check]
"""
import argparse, json, os, sys, tempfile

import page  # the shared write / --check tail (tools/scenarios/page.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import validate_gpu_ranks as vr  # noqa: E402  (fsdp2_mp_graph, the recorded rank-0 steps)

GIB = float(1 << 30)
GRAPH = os.path.join(ROOT, "graphs", "llama3_8b.json")
GRAPH_70B = os.path.join(ROOT, "graphs", "llama3_70b.json")
GRAPH_MIXTRAL = os.path.join(ROOT, "graphs", "mixtral_8x7b.json")
TOML = "tests/data/configs/torchtitan_llama3_8b.toml"
EXPANDABLE = ["--alloc-conf", "expandable_segments:True"]


def run(memsim, graph, args):
    return page.memsim_json([memsim, "run", graph] + args + ["--json", "--top", "3"], ROOT)


def gib(b):
    return "%.2f GiB" % (b / GIB)


shown = page.quoted


def megatron(params_per_gpu_fraction, dp, tp, s, b, h, ffn, layers, vocab, n_params):
    """Megatron-LM's theoretical_memory_usage.py for one GPU (its assumptions: the distributed
    optimizer, selective recomputation, sequence parallelism; no FSDP, no CP term), in bytes:
    weights and optimizer = parameters on the GPU x (6 + 12 / dp); activations (Korthikanti et
    al. 2022, Table 2) = s·b·h·(18 + 4·ffn/h) per layer + the embedding's input and dropout
    (8·s·b + s·b·h) + the output layer and loss 4·s·b·h·(1 + vocab/h), all / tp."""
    weights = n_params * params_per_gpu_fraction * (6 + 12.0 / dp)
    act = s * b * h * (18 + 4.0 * ffn / h) * layers + 8 * s * b + s * b * h + 4 * s * b * h * (1 + vocab / h)
    return weights, act / tp


def megatron_pp(h, ffn, heads, groups, layers, vocab, s, b, tp, pp, dp, m, v=None):
    """megatron/training/theoretical_memory_usage.py for the first pipeline stage (its "most loaded
    shard"), the sequence-parallel + selective-recompute branch, with the distributed optimizer,
    RMSNorm, SwiGLU, grouped-query attention and untied embeddings: (weights and optimizer,
    activations) in bytes. |v|: virtual stages per rank (interleaved), else None."""
    attn = 2 * h * h * (1 + groups / heads)
    layer = 2 * h * (ffn * 1.5 + 1) + attn
    block = layer * layers + h
    shard = (block / pp + h * vocab) / tp
    weights = shard * (6 + 12.0 / dp)
    act = s * b * h * (18 + 4.0 * ffn / h) * layers + 8 * s * b * pp + s * b * h * pp
    if v:
        act *= 1 + (pp - 1) / (pp * v)
    else:
        act *= min(1, m / pp)
    return weights, act / tp


def llama70_plans():
    base = ["--mesh", "pp=4,dp_shard=2,tp=8", "--tp-plan", "torchtitan", "--sequence-parallel", "on", "--loss-parallel", "on",
            "--wrap", "model.layers.*", "--fsdp2-mp", "param=bf16,reduce=fp32", "--reshard-after-forward", "false",
            "--init", "meta", "--set", "seq=8192", "--batch", "8", "--microbatches", "8", "--optimizer", "adamw",
            "--loop-holds", "loss", "--torch", "2.13", "--gpu", "H100-80GB", "--steps", "2"] + EXPANDABLE
    full = ["--checkpoint", "model.layers.*"]
    return [("1F1B, every layer checkpointed", base + ["--pp-schedule", "1f1b"] + full, None),
            ("Interleaved1F1B (2 stages per rank), every layer checkpointed",
             base + ["--pp-schedule", "interleaved1f1b", "--pp-stages-per-rank", "2"] + full, 2),
            ("1F1B, no checkpointing", base + ["--pp-schedule", "1f1b"], None)]


def llama70_section(memsim, tmp):
    graph = vr.fsdp2_mp_graph(GRAPH_70B, os.path.join(tmp, "llama3_70b_fp32.json"))
    plans = llama70_plans()
    lines = ["## 3. Llama 3.1 70B on 64 × H100-80GB: PP 4 × FSDP2 2 × TP 8", "",
             "`graphs/llama3_70b.json` (transformers' `LlamaForCausalLM`, Llama 3.1 70B's configuration: 80 layers, d 8192,",
             "64 heads, 8 kv heads, d_ff 28672), its parameters marked fp32, in torchtitan's 3-D flow: the world mesh",
             "(pp, dp_shard, tp), `pipeline_llm` cutting the meta model into stages (the embedding and the norm + head each",
             "weigh one layer: %s layers over 4 stages, or 8 stages of %s" % (" + ".join(map(str, torchtitan_split(80, 4))),
                                                                         " + ".join(map(str, torchtitan_split(80, 8)))),
             "interleaved two per rank), then on each stage's part tensor and sequence parallelism over 8 ranks (torchtitan's",
             "`apply_tp`: the embedding and the head sharded on the vocabulary, the residual stream on the sequence, the",
             "loss in `loss_parallel()`; Note [Tensor parallel]), every layer checkpointed, `fully_shard`",
             "over 2 ranks with `MixedPrecisionPolicy(bf16, fp32)` (`reshard_after_forward=False`, torchtitan's default",
             "with PP), the shards materialized (`--init meta`), AdamW, a local batch of 8 sequences of 8192 tokens in 8",
             "microbatches of 1. Every distinct rank is one row.", "",
             "Common flags: `%s`." % shown(plans[0][1]).replace(" --pp-schedule 1f1b --checkpoint 'model.layers.*'", ""), "",
             "| plan | stage ranks | steady step: peak allocated | peak reserved | device used | fits 80 GB? | at the peak: activations | Megatron-LM's formula (first stage) |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    first = None
    for label, args, v in plans:
        r = run(memsim, graph, args)
        first = first or r
        w, a = megatron_pp(8192, 28672, 64, 8, 80, 128256, 8192, 1, 8, 4, 2, 8, v)
        lines += rank_rows(label, r, w + a)
    w, a = megatron_pp(8192, 28672, 64, 8, 80, 128256, 8192, 1, 8, 4, 2, 8)
    lines += measured_70b(memsim, graph)
    top = max(first["ranks"], key=lambda e: e["peak_allocated_bytes"])
    lines += ["", "Under 1F1B with every layer checkpointed the highest peak allocated is ranks %s's (%s). The first stage keeps" % (
                  page_ranks(top["ranks"]), gib(top["peak_allocated_bytes"])),
              "up to 4 microbatches' checkpointed layer inputs in flight (the last one) and the embedding's weight grad: a",
              "Replicate DTensor holding the whole `[128256, 8192]` table (Note [Tensor parallel]), which FSDP2 upcasts to",
              "fp32 to accumulate it over the microbatches (4.2 GB; Note [FSDP2]); the last stage holds each",
              "microbatch's logits sharded on the vocabulary (`[1, 8192, 16032]`) and loss_parallel's cross entropy on them. With",
              "`reshard_after_forward=False`",
              "every stage keeps its layers unsharded from microbatch 0's forward to `perform_reduce_grad`, their grads",
              "accumulated unsharded in fp32 (`unsharded_accumulated_grad`, Note [FSDP2]); Interleaved1F1B holds more",
              "microbatches in flight per rank.",
              "Megatron-LM's `theoretical_memory_usage.py` for the first stage (weights and optimizer %s with its" % gib(w),
              "distributed optimizer over dp 2; activations %s) assumes Megatron's own plan: sequence parallelism and" % gib(a),
              "selective recomputation, the weights kept whole across the data-parallel ranks (no FSDP), and no",
              "all-gather, reduce-scatter or accumulation buffers.", ""]
    return lines


def measured_70b(memsim, graph):
    """The plans against each pp rank recorded on one H200 (tools/validate_gpu_pp.py)."""
    import validate_gpu_pp as vp
    s, rs = vp.rows(memsim, graph)
    worst = {}
    for c, label, (alloc, _), (salloc, _) in rs:
        e = vp.err(salloc, alloc)
        if abs(e) > abs(worst.get(label, 0.0)):
            worst[label] = e
    return ["", "**Measured** (docs/validation.md, \"the pipeline ranks of Llama 3.1 70B\"): each pp rank of these plans ran",
            "on one %s (PyTorch %s) through the fake process group, every buffer allocated as on the real rank;" % (
                s["device"], s["torch"].split("+")[0]),
            "memsim's peak allocated on the H200 is within %s of the recording on every rank." % "; ".join(
                "%+.2f %% (%s)" % (e, label) for label, e in worst.items())]


def megatron_moe(h, ffn, experts, heads, groups, layers, vocab, s, b, world, ep):
    """megatron/training/theoretical_memory_usage.py for a MoE decoder without TP or PP (RMSNorm,
    SwiGLU, grouped-query attention, untied embeddings, a router without bias), the distributed
    optimizer: (weights and optimizer, activations) in bytes. The experts' 6 + 12 / edp bytes per
    parameter over the expert-data-parallel ranks (world / ep), the rest 6 + 12 / dp; activations by
    its branch without sequence parallelism (compute_activation_memory_without_sp: every layer
    s·b·h·(10 + 24), dense and without recomputation, + 5 %)."""
    attn = 2 * h * h * (1 + groups / heads)
    routed = 2 * h * ffn * experts * 1.5
    replicated = (2 * h + h * experts) * layers + h
    dense = attn * layers + 2 * h * vocab  # the embedding and the untied output layer
    weights = (dense + replicated) * (6 + 12.0 / world) + routed * layers / ep * (6 + 12.0 / (world // ep))
    act = s * b * h * 34 * layers + 8 * s * b + s * b * h + (s * b * vocab + s * b * h) * 2
    return weights, act * 1.05


def mixtral_plans():
    base = ["--wrap", "layers.*", "--fsdp2-mp", "param=bf16,reduce=fp32", "--init", "meta", "--set", "seq=8192",
            "--batch", "1", "--optimizer", "adamw", "--foreach", "fused", "--loop-holds", "loss", "--torch", "2.13",
            "--gpu", "H100-80GB", "--steps", "2"] + EXPANDABLE
    full = ["--checkpoint", "layers.*"]
    return [("8 GPUs: FSDP2 8, EP 8 (efsdp 1), every layer checkpointed", 8, ["--mesh", "dp_shard=8,ep=8"] + base + full),
            ("16 GPUs: FSDP2 16, EP 8 (efsdp 2, Shard(1)), every layer checkpointed", 16,
             ["--mesh", "dp_shard=16,ep=8"] + base + full),
            ("16 GPUs, no checkpointing", 16, ["--mesh", "dp_shard=16,ep=8"] + base),
            ("16 GPUs, every layer checkpointed, imbalanced routing (`--moe-routing hot=2`)", 16,
             ["--mesh", "dp_shard=16,ep=8", "--moe-routing", "hot=2"] + base + full),
            ("32 GPUs: FSDP2 32, EP 8 (efsdp 4), every layer checkpointed", 32, ["--mesh", "dp_shard=32,ep=8"] + base + full),
            ("64 GPUs: FSDP2 64, EP 8 (efsdp 8), every layer checkpointed", 64, ["--mesh", "dp_shard=64,ep=8"] + base + full)]


def mixtral_section(memsim, tmp):
    graph = vr.fsdp2_mp_graph(GRAPH_MIXTRAL, os.path.join(tmp, "mixtral_8x7b_fp32.json"))
    plans = mixtral_plans()
    lines = ["## 4. Mixtral 8x7B with expert parallelism 8 (torchtitan's MoE recipe)", "",
             "`graphs/mixtral_8x7b.json`: Mixtral 8x7B's sizes (32 layers, d 4096, 32 heads, 8 kv heads, 8 experts of d_ff",
             "14336, top 2, vocab 32000; 46.7 B parameters) in torchtitan's MoE form (`graphs/llm_zoo.py` `mixtral_8x7b`: SDPA",
             "attention, a softmax top-2 router, the experts as `[E, ...]` weights run by the routed split, Note [Routed token",
             "counts]), its parameters marked fp32. torchtitan's flow for MoE models: expert parallelism over 8 ranks",
             "borrowing FSDP2's (`ExpertParallel` on each layer's experts, their all-to-all dispatch and combine), then",
             "`fully_shard` on each layer with the experts on the efsdp mesh (dp_shard / 8 ranks; `Shard(1)` once it",
             "exceeds the 8 experts) and the rest on all dp_shard ranks, explicit prefetching, `MixedPrecisionPolicy(bf16,",
             "fp32)`, the shards materialized (`--init meta`), fused AdamW (torchtitan's default), batch 1 × 8192 tokens per rank (Note [Expert",
             "parallel]). Routing is balanced (every expert receives the same tokens) unless said; `hot=2` gives expert 0",
             "twice the mean from every rank, so its ep rank (0, 8, ...) receives the most rows. Every distinct rank is",
             "one row.", "",
             "Common flags: `%s`." % shown(plans[1][2][2:]).replace(" --checkpoint 'layers.*'", ""), "",
             "| plan | ranks | steady step: peak allocated | peak reserved | device used | fits 80 GB? | at the peak: activations | Megatron-LM's formula |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    results = {}
    for label, world, args in plans:
        r = run(memsim, graph, args)
        results[label] = r
        w, a = megatron_moe(4096, 14336, 8, 32, 8, 32, 32000, 8192, 1, world, 8)
        lines += rank_rows(label, r, w + a)
    b16 = results[plans[1][0]]["ranks"][0]["breakdown_at_peak"]
    hot = [e["peak_allocated_bytes"] for e in results[plans[3][0]]["ranks"]]
    hot_top, hot_low = max(hot), min(hot)
    w8, _ = megatron_moe(4096, 14336, 8, 32, 8, 32, 32000, 8192, 1, 8, 8)
    w16, a16 = megatron_moe(4096, 14336, 8, 32, 8, 32, 32000, 8192, 1, 16, 8)
    experts = 2 * 4096 * 14336 * 8 * 1.5 * 32
    lines += ["", "On 8 GPUs each rank keeps one whole expert per layer (%s of the %s expert parameters): its fp32" % (
                  "%.2f B" % (experts / 8 / 1e9), "%.1f B" % (experts / 1e9)),
              "weights, grads and AdamW's two states alone are %s, so no plan of 8 × 80 GB fits without offloading." % gib(
                  experts / 8 * 16),
              "On 16 GPUs efsdp shards each expert over 2 ranks on its hidden dim (`Shard(1)`: 16 ranks > 8 experts; a",
              "dim-0 shard of the rank's single expert would be padding), which halves that. The peak is then in the",
              "backward: %s of parameters (the fp32 shards and the layer's gathered bf16 weights), %s of grads, %s of" % (
                  gib(b16["parameter"]), gib(b16["gradient"]), gib(b16["optimizer_state"])),
              "AdamW state and %s of activations (every layer's checkpointed input and one layer's recomputed ones)." % gib(
                  b16["activation"]),
              "Under `hot=2` the ranks holding expert 0 (ep rank 0 of each group: 0 and 8) receive twice the mean rows in",
              "every layer, and their peak is %s above the others'." % gib(hot_top - hot_low),
              "Megatron-LM's `theoretical_memory_usage.py` (re-implemented above from its source) prices the same model",
              "differently: its distributed optimizer keeps bf16 weights and fp32 grads whole on every rank of a group and",
              "shards only the fp32 master weights and Adam states (6 + 12/dp bytes per parameter; the experts over the",
              "world / ep expert-data-parallel ranks), %s of weights and optimizer on 8 GPUs and %s on 16, where" % (
                  gib(w8), gib(w16)),
              "FSDP2 shards the weights and grads too. Its activation term without sequence parallelism (%s at seq 8192)" % gib(a16),
              "counts every layer as dense, whatever the routing (top 2 of 8 experts) and without recomputation; it has",
              "no term for the dispatch's all-to-all buffers or a routing imbalance.", ""]
    return lines + measured_mixtral(memsim, graph)


def measured_mixtral(memsim, graph):
    """The plans against the ep ranks recorded on one H200 (tools/validate_gpu_ep.py)."""
    import validate_gpu_ep as ve
    s, rs = ve.rows(memsim, graph, ve.DATA)
    worst = {}
    for c, label, _, rec, sim in rs:
        e = ve.err(sim["peak_allocated_bytes"], rec[1][0])
        key = label.split(":")[0]
        if abs(e) > abs(worst.get(key, 0.0)):
            worst[key] = e
    return ["**Measured** (docs/validation.md, \"the expert-parallel ranks of Mixtral 8x7B\"): ranks of these plans ran on",
            "one %s (PyTorch %s) through the fake process group, the routing forced balanced; PyTorch 2.11 has no" % (
                s["device"], s["torch"].split("+")[0]),
            "per-parameter FSDP2 mesh, so the recording wraps each layer's experts apart (torchtitan's flow before it),",
            "which memsim simulates with `--wrap 'layers.*.moe.experts'` first. memsim's peak allocated is within",
            "%s of the recording on every rank." % "; ".join("%+.2f %% (%s)" % (e, k) for k, e in sorted(worst.items())), ""]


def rank_rows(label, r, formula):
    """One table row per distinct rank of a run: its steady-step figures, fit, activations at the
    peak, and (first row) the formula's figure."""
    rows = []
    for i, e in enumerate(r["ranks"]):
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label if i == 0 else "", page_ranks(e["ranks"]), gib(e["peak_allocated_bytes"]),
            gib(e["peak_reserved_bytes"]), gib(e["peak_device_used_bytes"]),
            "yes" if e["verdict"] == "fits" else "**%s**" % e["verdict"],
            gib(e["breakdown_at_peak"].get("activation", 0)), gib(formula) if i == 0 else ""))
    return rows


def torchtitan_split(blocks, stages):
    """torchtitan's generate_llm_fqn_per_model_part(stages, blocks, input_weight=1, output_weight=1):
    the layers per stage (memsim's TorchtitanSplit, lib/autodiff/setups/pipeline.cc)."""
    per, extra = divmod(blocks + 2, stages)
    out = []
    for k in range(stages):
        n = per + (1 if k < extra else 0) - (1 if k == 0 else 0)
        out.append(blocks - sum(out) if k == stages - 1 else n)
    return out


def page_ranks(ranks):
    """0-15 for a run of consecutive ranks."""
    out, start = [], ranks[0]
    for a, b in zip(ranks, ranks[1:] + [None]):
        if b != a + 1:
            out.append(str(start) if start == a else "%d-%d" % (start, a))
            start = b
    return ",".join(out)


def llama_plans():
    base = ["--wrap", "model.layers.*", "--fsdp2-mp", "param=bf16,reduce=fp32", "--init", "meta", "--set", "seq=8192",
            "--batch", "1", "--optimizer", "adamw", "--loop-holds", "loss", "--torch", "2.13", "--gpu", "H100-80GB",
            "--steps", "2"] + EXPANDABLE
    sel = ["--checkpoint", "model.layers.*", "--sac", "torchtitan"]
    full = ["--checkpoint", "model.layers.*"]
    return [("FSDP2 8, selective (op) checkpointing (torchtitan's policy)", "dp_shard=8", ["--mesh", "dp_shard=8"] + base + sel,
             ("dp_shard=8", "torchtitan", False)),
            ("FSDP2 8, every layer checkpointed", "dp_shard=8", ["--mesh", "dp_shard=8"] + base + full, ("dp_shard=8", None, False)),
            ("FSDP2 8, no checkpointing", "dp_shard=8", ["--mesh", "dp_shard=8"] + base, None),
            ("FSDP2 4 × TP 2, every layer checkpointed", "dp_shard=4,tp=2", ["--mesh", "dp_shard=4,tp=2"] + base + full,
             ("dp_shard=4,tp=2", None, False)),
            ("FSDP2 4 × TP 2, selective (op) checkpointing", "dp_shard=4,tp=2",
             ["--mesh", "dp_shard=4,tp=2"] + base + sel, None),
            ("FSDP2 4 × TP 2 as torchtitan's `apply_tp` (embedding and head sharded, sequence parallel, "
             "loss_parallel), every layer checkpointed", "dp_shard=4,tp=2",
             ["--mesh", "dp_shard=4,tp=2", "--tp-plan", "torchtitan", "--sequence-parallel", "on", "--loss-parallel", "on"]
             + base + full, None)]


def measured():
    """(mesh, sac) -> (step-2 max allocated, max reserved) of the expandable-segments recordings."""
    with open(os.path.join(vr.DATA, "summary.json")) as f:
        s = json.load(f)
    out = {}
    for c in s["cases"]:
        if "steps" in c and c["alloc_conf"] == "expandable_segments:True":
            alloc = max(c["steps"][-1][p]["max_memory_allocated"] for p in vr.PHASES)
            res = max(st[p]["max_memory_reserved"] for st in c["steps"] for p in vr.PHASES)
            out[(c["mesh"], c["sac"], bool(c.get("clip_grad_norm")))] = (alloc, res)
    return s, out


def llama_section(memsim, graph, tmp):
    rec, meas = measured()
    lines = ["## 1. Llama 3.1 8B on 8 × H100-80GB (torchtitan's recipe)", "",
             "`graphs/llama3_8b.json` (transformers' `LlamaForCausalLM`, Llama 3.1 8B's configuration, SDPA), its",
             "parameters marked float32 (torchtitan builds the model in fp32; FSDP2's `MixedPrecisionPolicy(param_dtype=bf16,",
             "reduce_dtype=fp32)` computes in bf16: `tools/validate_gpu_ranks.py` `fsdp2_mp_graph`). torchtitan's flow: the",
             "model built on the meta device and only each rank's shards materialized (`--init meta`), `fully_shard` on every",
             "decoder layer then the root (`--wrap 'model.layers.*'`), AdamW, `loss = loss_fn(model(x), y)` with the output",
             "deleted before backward (`--loop-holds loss`), batch 1 per rank, seq 8192, and torchtitan's launcher's",
             "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`. Two steps: the first creates AdamW's state, the second is",
             "the steady step. The first row is torchtitan's own TOML read by `memsim run --config %s --world 8`" % TOML,
             "(the options above, plus fused AdamW and `--clip-grad-norm 1.0`) on the graph with torchtitan's loss",
             "(`cross_entropy(pred.flatten(0, 1).float(), ...)`: the logits upcast to fp32, `validate_gpu_ranks.torchtitan_loss_graph`);",
             "the others use the graph's own loss (cross entropy on the bf16 logits).", "",
             "Common flags: `%s`." % shown(llama_plans()[0][2][2:]).replace(" --checkpoint 'model.layers.*' --sac torchtitan", ""), "",
             "Per rank (FSDP2 ranks are identical; with TP the ranks of a TP group differ only by the scatter source of",
             "the setup). Measured: rank 0 of the same step recorded on one %s through PyTorch's fake process group" % rec["device"],
             "(PyTorch %s; `docs/validation.md`, \"Per rank on CUDA\"). The recorded TP rows use the decoder layers'" % rec["torch"],
             "plan (`--tp-plan layers`); the last row is torchtitan's whole `apply_tp` (Note [Tensor parallel]), not recorded.", "",
             "| plan | first step: peak allocated | steady step: peak allocated | measured (rank 0) | peak reserved | measured | device used | fits 80 GB? |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    results = {}
    tt = vr.torchtitan_loss_graph(graph, os.path.join(tmp, "llama3_8b_torchtitan_loss.json"))
    toml = ("torchtitan's llama3_8b.toml as given (`--config`)", "dp_shard=8",
            ["--config", TOML, "--world", "8", "--gpu", "H100-80GB", "--steps", "2", "--torch", "2.13"] + EXPANDABLE,
            ("dp_shard=8", "torchtitan", True))
    for label, mesh, args, key in [toml] + llama_plans():
        r = run(memsim, tt if key and key[2] else graph, args)
        results[label] = r
        m = meas.get(key) if key else None
        steps = r["steps"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, gib(steps[0]["peak_live_bytes"]), gib(steps[-1]["peak_live_bytes"]), gib(m[0]) if m else "—",
            gib(r["peak_reserved_bytes"]), gib(m[1]) if m else "—", gib(r["peak_device_used_bytes"]),
            "yes" if r["verdict"] == "fits" else "**%s**" % r["verdict"]))
    nccl = results[llama_plans()[0][0]]["device"]
    lines += ["", "Device used = peak reserved + the CUDA context and libraries (%s) + NCCL's buffers (%s: %s), Note [NCCL buffers]." % (
        gib(nccl["context_bytes"]), gib(nccl["nccl_bytes"]), ", ".join(
            "%s %s" % (c.get("dimension", c.get("name", "")), gib(c.get("bytes", 0))) for c in nccl.get("nccl_communicators", [])) or "one"), ""]
    lines += torchtitan_published(results[llama_plans()[0][0]], results[toml[0]])
    return lines


def torchtitan_published(sel, r):
    w, a = megatron(1.0, 8, 1, 8192, 1, 4096, 14336, 32, 128256, 8030261248)
    pub = 47.65 * GIB
    b = sel["breakdown_at_peak"]
    lines = ["### Beside torchtitan's published figure and Megatron-LM's formula", "",
             "torchtitan PR #808 reports **47.65 GiB** (its `max_reserved` memory metric) for this recipe in bf16 on 8 × H100",
             "with `torch.compile`. memsim, per rank:", "",
             "| what | peak allocated | peak reserved | beside 47.65 GiB |", "|---|---:|---:|---:|",
             "| the recipe above (the kit's loss: cross entropy on the bf16 logits) | %s | %s | %+.1f %% |" % (
                 gib(sel["peak_allocated_bytes"]), gib(sel["peak_reserved_bytes"]), 100 * (sel["peak_reserved_bytes"] - pub) / pub),
             "| torchtitan's TOML as given (its loss upcasts the logits to fp32) | %s | %s | %+.1f %% |" % (
                 gib(r["peak_allocated_bytes"]), gib(r["peak_reserved_bytes"]), 100 * (r["peak_reserved_bytes"] - pub) / pub), "",
             "The loss separates the two rows: an fp32 copy of the 8192 × 128256 logits (%s) and the fp32" % gib(8192 * 128256 * 4),
             "log-softmax the cross entropy saves live at the loss (both rows match rank 0 measured on the H200, table above).",
             "What is left between memsim's eager step and the published",
             "compiled run is `torch.compile`'s: its regions save and free other tensors than the eager ops (memsim models",
             "compiled regions from a program recorded on the CPU, Note [Compiled regions], not Inductor on a GPU).", "",
             "Megatron-LM's `theoretical_memory_usage.py` for the same model and batch gives weights and optimizer %s," % gib(w),
             "activations %s, total **%s** per GPU, against memsim's %s allocated at the peak (parameters %s," % (
                 gib(a), gib(w + a), gib(sel["peak_allocated_bytes"]), gib(b["parameter"])),
             "gradients %s, optimizer state %s, activations %s). The formula has no FSDP term: it keeps every GPU's" % (
                 gib(b["gradient"]), gib(b["optimizer_state"]), gib(b["activation"])),
             "bf16 weights and fp32 grads whole and shards only the optimizer (its distributed optimizer: 6 + 12/8 bytes per",
             "parameter, where FSDP2 keeps a 16/8-byte shard plus the layers gathered in flight); its activation term",
             "assumes Megatron's selective recomputation and sequence parallelism, not torchtitan's op-level policy, and",
             "counts neither the all-gather nor the reduce-scatter buffers.", ""]
    return lines


def cp_section(memsim, graph):
    args = ["--mesh", "dp_shard=2,cp=8", "--wrap", "model.layers.*", "--fsdp2-mp", "param=bf16,reduce=fp32", "--init", "meta",
            "--checkpoint", "model.layers.*", "--set", "seq=131072", "--batch", "1", "--optimizer", "adamw",
            "--loop-holds", "loss", "--torch", "2.13", "--gpu", "H100-80GB", "--steps", "2"] + EXPANDABLE
    r = run(memsim, graph, args)
    m = measured()[1].get(("dp_shard=2,cp=8", None, False))
    w, a = megatron(1.0, 16, 1, 131072, 1, 4096, 14336, 32, 128256, 8030261248)
    return ["## 2. A 128k-token context: context parallel 8 × FSDP2 2 (16 × H100-80GB)", "",
            "The same model at seq 131072, ring attention over 8 ranks (each holds 16384 tokens of every sequence), FSDP2",
            "sharding over the 16 ranks of dp_shard × cp as torchtitan's `dp_shard_cp` mesh does, every layer checkpointed:",
            "`memsim run graphs/llama3_8b.json %s`; measured: rank 0 of the same step on the H200 through" % shown(args),
            "the fake process group (torch's `context_parallel`, all-gather rotation; docs/validation.md).", "",
            "| steady step: peak allocated | measured (rank 0) | peak reserved | measured | device used | fits 80 GB? | Megatron-LM's formula (no CP term) |",
            "|---:|---:|---:|---:|---:|---|---:|",
            "| %s | %s | %s | %s | %s | %s | %s |" % (
                gib(r["steps"][-1]["peak_live_bytes"]), gib(m[0]) if m else "—", gib(r["peak_reserved_bytes"]),
                gib(m[1]) if m else "—", gib(r["peak_device_used_bytes"]),
                "yes" if r["verdict"] == "fits" else "**%s**" % r["verdict"], gib(w + a)), "",
            "Megatron's formula has no context-parallel term: it prices the whole 131072-token sequence on every GPU.", ""]


def not_yet():
    return ["## 5. Not on this page yet", "",
            "- **Hugging Face's Mixtral**: transformers' `MixtralForCausalLM` exports (on the meta device), but its experts",
            "  (one `grouped_mm` over `[E, ...]` weights) are not recognised as a routed split, so `--mesh ep=N` takes",
            "  torchtitan's MoE form.",
            "- **A recording of the per-parameter-mesh flow** (one `fully_shard` per layer, torch ≥ 2.12) on a GPU: the",
            "  measured ranks above ran torch 2.11's flow; the page's plans are checked on CPU traces of both flows.", ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memsim", default=os.path.join(ROOT, "build", "memsim"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "scenarios", "llm_parallel.md"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        graph = vr.fsdp2_mp_graph(GRAPH, os.path.join(tmp, "llama3_8b_fp32.json"))
        lines = ["# LLM parallelism per GPU: FSDP2, tensor, context, pipeline and expert parallel", "",
                 "Generated by `tools/scenarios/llm_parallel.py`; do not edit by hand. Every memsim figure is one `memsim run`",
                 "(cuda profile, PyTorch 2.13 rules) of one rank; see docs/parallel.md (Notes [FSDP2], [Tensor parallel],",
                 "[Context parallel], [Meta-device init], [Side streams]) and docs/cli.md (`--mesh`).", ""]
        lines += llama_section(a.memsim, graph, tmp)
        lines += cp_section(a.memsim, graph)
        lines += llama70_section(a.memsim, tmp)
        lines += mixtral_section(a.memsim, tmp)
        lines += not_yet()
    return page.write_or_check("llm_parallel.py", lines, a.out, a.check)


if __name__ == "__main__":
    sys.exit(main())
