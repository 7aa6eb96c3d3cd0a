#!/usr/bin/env python3
"""Generates docs/scenarios/multi_gpu.md: memsim's per-GPU answers for two multi-GPU questions.

1. The Multimodal BERT of user_scenarios.md §4 (TabAE + BERT-base + merge, seq 512, fp32, Adam) on
   8 × V100-16GB, global batch 64: `--data-parallel 8 --batch 64` (nn.DataParallel) and
   `--ddp 8 --batch 8` (DistributedDataParallel, 8 per rank), per distinct GPU, beside the user's
   hand estimate.
2. A 7B-class decoder (graphs/llama_8b.json) on 8 × A100-80GB under ZeRO-2, ZeRO-3 and ZeRO-3 with
   the optimizer offloaded, in DeepSpeed fp16 (--dtype fp16) and fp32, beside the ZeRO paper's
   per-GPU model-state formulas and DeepSpeed's estimates; the same decoder under FSDP, fp32 and
   with bf16 MixedPrecision.
Usage: multi_gpu.py [--memsim build/memsim] [--out docs/scenarios/multi_gpu.md] [--check]
"""
import argparse, json, os, subprocess, sys

import page  # the shared write / --check tail (tools/scenarios/page.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GB = 1e9
MIB = 1024.0 * 1024.0
CATS = ["parameter", "gradient", "optimizer_state", "activation", "temporary", "workspace", "input"]


def run(memsim, *args):
    cmd = [memsim, "run"] + list(args) + ["--json", "--top", "3"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + out.stderr.strip())
    return cmd, json.loads(out.stdout)


def ranks_label(r, word):
    rs = r["ranks"]
    if len(rs) == 1:
        return "%s %d" % (word, rs[0])
    return "%ss %d-%d" % (word, rs[0], rs[-1]) if rs == list(range(rs[0], rs[-1] + 1)) else word + "s " + ",".join(map(str, rs))


def mib(b):
    return "%.0f MiB" % (b / MIB)


def bert_section(memsim):
    graph = os.path.join(ROOT, "graphs", "multimodal_bert.json")
    common = ["--set", "seq=512", "--optimizer", "adam", "--gpu", "V100-16GB"]
    runs = [("`--data-parallel 8 --batch 64`", "device", run(memsim, graph, "--data-parallel", "8", "--batch", "64", *common)),
            ("`--ddp 8 --batch 8`", "rank", run(memsim, graph, "--ddp", "8", "--batch", "8", *common))]
    lines = ["## 1. Multimodal BERT on 8 × V100-16GB (user_scenarios.md §4)", "",
             "`graphs/multimodal_bert.json` (TabAE: BatchNorm1d(100) → Linear(100, 64); BERT-base text encoder,",
             "12 layers, hidden 768; Linear(768, 128) on token 0; the merge Linear(192, 2)), seq 512, fp32, Adam,",
             "first step (Adam's state is created in it), global batch 64. Commands:", ""]
    for label, _, (cmd, r) in runs:
        lines.append("- %s: `memsim %s`" % (label, " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c
                                                              for c in cmd[1:])))
    params = runs[0][2][1]["parameters"]
    lines += ["", "Parameters: %s (%s trainable), %s in fp32." % (format(params["count"], ","), format(params["trainable"], ","),
                                                              mib(params["bytes"])), "",
              "Per GPU, at that GPU's peak (requested bytes by category, then the caching allocator's peak",
              "reserved and the whole device as nvidia-smi would show it, CUDA context and NCCL buffers included, Note [NCCL buffers]):", "",
              "| GPU | " + " | ".join(CATS) + " | peak live | optimizer-phase peak | peak reserved | device used | fits? |",
              "|---|" + "---:|" * (len(CATS) + 5)]
    for label, word, (cmd, r) in runs:
        for e in r["ranks"]:
            bd = e["breakdown_at_peak"]
            used = e.get("peak_device_used_bytes", 0)
            cap = r["device"]["capacity_bytes"]
            lines.append("| %s, %s | %s | %s | %s | %s | %s | %s |" % (
                label, ranks_label(e, word), " | ".join(mib(bd[c]) for c in CATS), mib(e["peak_live_bytes"]),
                mib(e["phase_peaks"]["optimizer"]), mib(e["peak_reserved_bytes"]), mib(used),
                "yes" if used <= cap else "**no**"))
    lines += ["", "The user's hand estimate, per GPU: parameters 550 MB (÷ 8), gradients 550 MB, activations",
              "150 MB, batch 20 MB, graph 30 MB: ≈ 1.3 GB. Where memsim differs, and why:", "",
              "- Parameters and gradients are not divided by the GPU count under either scheme: every GPU runs a",
              "  whole replica (%s each). DataParallel re-broadcasts the replicas every step (the other" % mib(params["bytes"]),
              "  devices hold them only during the step); DDP keeps a full model and, in addition, its gradient",
              "  buckets (one more copy of the gradients' size) on every rank.",
              "- The optimizer state (Adam: two fp32 tensors per parameter, 2 × %s) exists on device 0 only" % mib(params["bytes"]),
              "  under DataParallel, on every rank under DDP; the hand estimate leaves it out.",
              "- Activations dominate: BERT at seq 512 keeps per layer the attention scores and probabilities",
              "  (batch × 12 heads × 512 × 512 fp32 each, plus the dropout noise) and several [batch, 512, 768] and",
              "  [batch, 512, 3072] tensors, far above 8 × 512 × 768 × 12 × 4 B.",
              "- Device 0 under DataParallel also holds the whole input batch, the outputs gathered from every",
              "  device and, at the end of backward, the flat reduce buffers of `reduce_add_coalesced` next to",
              "  its replica's grads, then `.grad` and Adam's state (Note [DataParallel]): its optimizer-phase",
              "  peak is the highest of all. At seq 512 all of that stays below the activations of the",
              "  backward pass, so every device's peak is there and the devices differ little (inputs are",
              "  token ids: the whole batch is 256 KiB).",
              "- The device total adds the CUDA context and library memory (`docs/device-memory.md`)."]
    return lines


def largest_layer(graph):
    """DeepSpeed's largest_layer_params: the most parameters one module holds itself."""
    per = {}
    for p in json.load(open(graph))["parameters"]:
        n = 1
        for d in p["shape"]:
            n *= d
        owner = p["name"].rsplit(".", 1)[0]
        per[owner] = per.get(owner, 0) + n
    return max(per.values())


def zero_rows(results, formulas):
    rows = []
    for name, (cmd, r) in results:
        e = r["ranks"][0]
        bd = e["breakdown_at_peak"]
        states = bd["parameter"] + bd["gradient"] + bd["optimizer_state"]
        used = e.get("peak_device_used_bytes", 0)
        rows.append("| %s | %.1f GB | %.1f GB | %.1f GB | %.1f GB | %.1f GB | %.1f GB | %s | %.1f GB | %.1f GB | %s |" % (
            name, bd["parameter"] / GB, bd["gradient"] / GB, bd["optimizer_state"] / GB, bd["activation"] / GB,
            e["peak_live_bytes"] / GB, used / GB, "yes" if used <= r["device"]["capacity_bytes"] else "**no**",
            e["host_bytes"] / GB, states / GB, " | ".join("%.1f GB" % (f[name] / GB) for f in formulas)))
    return rows


def zero_section(memsim):
    graph = os.path.join(ROOT, "graphs", "llama_8b.json")
    common = ["--batch", "1", "--set", "seq=2048", "--optimizer", "adam", "--gpu", "A100-80GB", "--world", "8",
              "--checkpoint", "layers.*"]
    cases = [("ZeRO-2", ["--zero", "2"]), ("ZeRO-3", ["--zero", "3"]),
             ("ZeRO-3 + optimizer offload", ["--zero", "3", "--offload", "optimizer"])]
    mixed = [(name, run(memsim, graph, *common, *extra, "--dtype", "fp16")) for name, extra in cases]
    results = [(name, run(memsim, graph, *common, *extra)) for name, extra in cases]
    psi = results[0][1][1]["parameters"]["count"]
    n, k = 8, 12
    big = largest_layer(graph)
    paper = {"ZeRO-2": (2 + (2 + k) / n) * psi, "ZeRO-3": (2 + 2 + k) / n * psi,
             "ZeRO-3 + optimizer offload": (2 + 2) / n * psi}
    deepspeed = {"ZeRO-2": 2 * psi + 18 * psi / n, "ZeRO-3": 4 * big + 18 * psi / n,
                 "ZeRO-3 + optimizer offload": 4 * big + 2 * psi / n}
    fp32 = {"ZeRO-2": (4 + (4 + k + 4) / n) * psi, "ZeRO-3": (4 + 4 + k + 4) / n * psi,
            "ZeRO-3 + optimizer offload": (4 + 4) / n * psi}
    head = "| setup | params | grads | optimizer state | activations | peak live | device used | fits? | host | model states, memsim |"
    lines = ["", "## 2. A 7B-class decoder on 8 × A100-80GB under ZeRO", "",
             "`graphs/llama_8b.json` (Ψ = %s parameters), batch 1 per GPU, seq 2048, Adam, first step," % format(psi, ","),
             "8 ranks, activation checkpointing of every decoder layer (as the paper's runs; without it the",
             "eager-attention activations alone take over 40 GB), DeepSpeed semantics (Note [ZeRO]).", "",
             "### Mixed precision (DeepSpeed fp16), simulated", "",
             "Commands: `memsim run graphs/llama_8b.json %s --zero 2|3 [--offload optimizer] --dtype fp16 --json`:" % " ".join(common),
             "DeepSpeed's `\"fp16\": {\"enabled\": true}` (the module in fp16, fp32 master partition and",
             "Adam state; Note [ZeRO mixed precision]). Per GPU, at its peak:", "",
             head + " paper's formula (K = 12) | DeepSpeed's estimate |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    lines += zero_rows(mixed, [paper, deepspeed])
    lines += ["", "The paper (Rajbhandari et al., ZeRO, 2019, §5) counts per GPU fp16 parameters (2Ψ) and",
              "gradients (2Ψ) and K = 12 bytes of optimizer state per parameter (fp32 master copy, momentum,",
              "variance): ZeRO-2 (P_os+g) 2Ψ + (2 + K)Ψ/N, ZeRO-3 (P_os+g+p) (2 + 2 + K)Ψ/N; with the optimizer",
              "offloaded (ZeRO-Offload) only the fp16 parts stay on the GPU. DeepSpeed's",
              "`estimate_zero2_model_states_mem_needs` (2Ψ + 18Ψ/N) adds the step's fp32 gradient partition",
              "(4Ψ/N); `estimate_zero3_model_states_mem_needs` (4·L + 18Ψ/N, and 4·L + 2Ψ/N offloaded) adds",
              "the largest layer gathered in fp16 with its fp16 grad (L = %s: the embedding)." % format(big, ","),
              "memsim's model states are the parameter, gradient and optimizer-state bytes alive at the",
              "peak, where:", "",
              "- ZeRO-2: the whole fp16 parameters (2Ψ), DeepSpeed's 5e8-element fp16 reduce bucket (1 GB,",
              "  whatever the model's size: the formulas leave it out) while the backward runs, the fp16",
              "  gradient partition, the fp32 master partition and Adam's two states (12Ψ/N), created in",
              "  DeepSpeed's constructor; and the fp16 gradients AccumulateGrad has made but the hook has not",
              "  yet copied into the bucket (memsim copies each at once; what is left is the largest",
              "  parameters' grads in flight). The peak is in the step: `flatten(...).to(fp32)` holds the fp16",
              "  gradient partition (2Ψ/N), its flat fp16 copy (2Ψ/N) and the fp32 grad (4Ψ/N) at once, 2Ψ/N",
              "  above DeepSpeed's estimate, which counts the fp16 grads and the fp32 grad only.",
              "- ZeRO-3: the fp16 shards (2Ψ/N), the bucket and the fp16 gradient partitions from the start;",
              "  each module's fp16 parameters are gathered for its forward and backward only (with",
              "  checkpointing, again for the recomputation); parameters of at most 1e5 elements stay whole.",
              "  memsim gathers each module (the embedding, 1.05 GB in fp16, is the largest) where the",
              "  estimate reserves 4·L. The peak is again the step's (bucket 1 GB + fp16 partition + flat",
              "  copy + fp32 grad: 1 GB + 8Ψ/N of gradients), when no module is gathered.",
              "- With the optimizer offloaded, the fp32 partition, Adam's state, the fp32 grad and the fp16",
              "  gradient partition are host memory (the `host` column, per rank); the bucket stays on the GPU.",
              "", "### fp32, simulated", "",
              "The same runs without `--dtype fp16`; the fp32 analogue of the paper's formula replaces 2-byte",
              "parameters and gradients with 4-byte ones and keeps DeepSpeed's fp32 copy of the partition next",
              "to Adam's two states (4 + 8 bytes) and the fp32 gradient partition (4 bytes).", "",
              head + " paper's formula, fp32 analogue |",
              "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    lines += zero_rows(results, [fp32])
    return lines


def fsdp_section(memsim):
    graph = os.path.join(ROOT, "graphs", "llama_8b.json")
    common = ["--batch", "1", "--set", "seq=2048", "--optimizer", "adam", "--gpu", "A100-80GB", "--world", "8",
              "--checkpoint", "layers.*", "--fsdp", "full", "--wrap", "layers.?", "--wrap", "layers.??"]
    cmd, r = run(memsim, graph, *common)
    wrapped = run(memsim, graph, *common, "--wrap", "embed_tokens", "--wrap", "lm_head")[1]["ranks"][0]
    mp = run(memsim, graph, *common, "--fsdp-mixed-precision", "bf16")[1]["ranks"][0]
    e = r["ranks"][0]
    bd = e["breakdown_at_peak"]
    psi = r["parameters"]["count"]
    tops = ", ".join("`%s` %.1f GB" % (t["name"], t["bytes"] / GB) for t in r["top_tensors_at_peak"][:3])
    pp = e["phase_peaks"]
    return ["", "## 3. The same decoder under FSDP (worked example)", "",
            "`memsim run graphs/llama_8b.json %s`: PyTorch FSDP FULL_SHARD, one FlatParameter per decoder" % " ".join(common),
            "layer (`layers.0` ... `layers.31`), the root unit holding the rest (the embedding, the final norm",
            "and the LM head), BACKWARD_PRE prefetch, Adam over the shards (Note [FSDP]), first step.", "",
            "| | per GPU |", "|---|---:|",
            "| peak live | %.1f GB (in %s) |" % (e["peak_live_bytes"] / GB, max(pp, key=pp.get)),
            "| forward / backward / optimizer peaks | %.1f / %.1f / %.1f GB |" % (pp["forward"] / GB, pp["backward"] / GB,
                                                                            pp["optimizer"] / GB),
            "| parameters at the peak (shards + unsharded units) | %.1f GB |" % (bd["parameter"] / GB),
            "| gradients at the peak | %.1f GB |" % (bd["gradient"] / GB),
            "| device used | %.1f GB |" % (e.get("peak_device_used_bytes", 0) / GB),
            "| sharded model states, 16·Ψ/N (fp32 shard, sharded grad, Adam's two states) | %.1f GB |" % (16 * psi / 8 / GB), "",
            "The largest tensors at the peak: %s. The root unit is never resharded after forward," % tops,
            "so its whole FlatParameter stays gathered on every GPU from the first op to the end of backward,",
            "and when its gradients are ready they are concatenated into one unsharded flat grad next to the",
            "per-parameter grads before the reduce-scatter: wrapping the embedding and the LM head in units of",
            "their own lowers this peak (`--wrap embed_tokens --wrap lm_head`: %.1f GB instead of %.1f GB)." % (
                wrapped["peak_live_bytes"] / GB, e["peak_live_bytes"] / GB), "",
            "With `--fsdp-mixed-precision bf16` (MixedPrecision(param_dtype, reduce_dtype, buffer_dtype) all",
            "bf16; Note [FSDP mixed precision]) the shards, sharded grads and Adam's state stay fp32",
            "(16·Ψ/N as above) while the gathered units, their grads and the activations are bf16: peak live",
            "%.1f GB in %s (parameters at the peak %.1f GB, gradients %.1f GB, activations %.1f GB), device used %.1f GB." % (
                mp["peak_live_bytes"] / GB, max(mp["phase_peaks"], key=mp["phase_peaks"].get), mp["breakdown_at_peak"]["parameter"] / GB,
                mp["breakdown_at_peak"]["gradient"] / GB, mp["breakdown_at_peak"]["activation"] / GB,
                mp.get("peak_device_used_bytes", 0) / GB)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memsim", default=os.path.join(ROOT, "build", "memsim"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "scenarios", "multi_gpu.md"))
    ap.add_argument("--check", action="store_true", help="fail if --out differs from what would be generated")
    a = ap.parse_args()
    lines = ["# Several GPUs: what each GPU holds", "",
             "Generated by `tools/scenarios/multi_gpu.py`; do not edit by hand. Every figure is one `memsim run`",
             "(cuda profile, PyTorch 2.x), per distinct rank or device; see docs/cli.md (`--data-parallel`,",
             "`--ddp`, `--zero`, `--offload`, `--dtype`, `--fsdp-mixed-precision`) and the Notes [DataParallel], [DDP],",
             "[ZeRO], [ZeRO mixed precision], [FSDP], [FSDP mixed precision] in docs/op-rules.md.", ""]
    lines += bert_section(a.memsim)
    lines += zero_section(a.memsim)
    lines += fsdp_section(a.memsim)
    return page.write_or_check("multi_gpu.py", lines, a.out, a.check)


if __name__ == "__main__":
    sys.exit(main())
