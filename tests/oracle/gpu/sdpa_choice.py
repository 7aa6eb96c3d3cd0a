#!/usr/bin/env python3
"""Which SDPA backend PyTorch picks on this GPU, per call pattern, each in a fresh process.

The recordings of record_gpu.py showed nanoGPT's bf16 attention on cuDNN in a process that had run
other kernels first and on flash in a fresh one; this runs each pattern in a process of its own and
prints the ATen op the profiler saw (and the SDPA priority order before and after the call).
Usage: python3 tests/oracle/gpu/sdpa_choice.py OUT.json
"""
import json, subprocess, sys

PATTERNS = {
    "nanogpt_views_fresh": "",
    "nanogpt_views_after_small_sdpa": "pre_sdpa",
    "nanogpt_views_after_conv": "pre_conv",
    "nanogpt_views_after_mm": "pre_mm",
    "contiguous_bhtd_fresh": "contig",
    "hf_transposed_gqa_fresh": "gqa",
}

CHILD = r'''
import json, sys, torch
import torch.nn.functional as F
mode = sys.argv[1]
dev = "cuda"
order = lambda: [int(x) for x in torch._C._get_sdp_priority_order()] if hasattr(torch._C, "_get_sdp_priority_order") else None
before = order()
if mode == "pre_sdpa":
    q = torch.randn(2, 8, 256, 64, device=dev, dtype=torch.bfloat16); F.scaled_dot_product_attention(q, q, q, is_causal=True)
if mode == "pre_conv":
    torch.nn.Conv2d(3, 8, 3).cuda()(torch.randn(2, 3, 32, 32, device=dev))
if mode == "pre_mm":
    a = torch.randn(64, 64, device=dev); a @ a
B, T, H, D = 4, 1024, 12, 64
if mode == "contig":
    q, k, v = (torch.randn(B, H, T, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
elif mode == "gqa":
    q = torch.randn(B, T, 16, D, device=dev, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
    k = torch.randn(B, T, 4, D, device=dev, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
    v = torch.randn(B, T, 4, D, device=dev, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
else:
    x = torch.randn(B, T, 3 * H * D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in x.split(H * D, dim=2))
kw = {"enable_gqa": True} if mode == "gqa" else {}
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)
    y.sum().backward()
ops = sorted({e.name for e in prof.events() if "attention" in e.name})
print(json.dumps({"ops": ops, "order_before": before, "order_after": order(), "out_strides": list(y.stride())}))
'''


def main():
    out = {}
    for name, mode in PATTERNS.items():
        r = subprocess.run([sys.executable, "-c", CHILD, mode or "plain"], capture_output=True, text=True)
        try:
            out[name] = json.loads(r.stdout.strip().splitlines()[-1])
        except Exception:
            out[name] = {"error": (r.stderr or r.stdout)[-2000:]}
        print(name, out[name], flush=True)
    out["torch"] = __import__("torch").__version__
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
