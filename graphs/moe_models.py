"""Mixture-of-experts models: torchtitan's MoE layer (torchtitan/models/moe.py: TokenChoiceTopKRouter,
TokenReorderer, GroupedExperts' for-loop path) on the CPU, used by the recording kit
(tests/oracle/kit/trace_step.py) and exported with tools/export_torch.py --trace run.

Differences from torchtitan, all for the CPU: the counts are torch.bincount(minlength=E) (the CPU
histc has no int64 kernel), the experts run the for-loop path (no grouped mm on the CPU), there is
no shared expert, load-balancing bias or padding to a multiple of 8/16, and the scores multiply the
experts' outputs (score_before_experts=False). How many tokens each expert receives depends on the
data (Note [Routed token counts] in docs/op-rules.md).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupedExperts(nn.Module):
    """E SwiGLU experts as three [E, ...] parameters; each runs on its own rows of the routed input."""

    def __init__(self, dim, hidden, experts):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(experts, hidden, dim) * 0.02)
        self.w2 = nn.Parameter(torch.randn(experts, dim, hidden) * 0.02)
        self.w3 = nn.Parameter(torch.randn(experts, hidden, dim) * 0.02)

    def forward(self, x, num_tokens_per_expert):
        # under expert parallel the weights are DTensors sharded on dim 0 (torchtitan's to_local())
        w1, w2, w3 = (w.to_local() if hasattr(w, "to_local") else w for w in (self.w1, self.w2, self.w3))
        counts = num_tokens_per_expert.tolist()
        outs = []
        for e, xe in enumerate(torch.split(x, counts, dim=0)):
            h = F.silu(torch.matmul(xe, w1[e].transpose(-2, -1)))
            h = h * torch.matmul(xe, w3[e].transpose(-2, -1))
            outs.append(torch.matmul(h, w2[e].transpose(-2, -1)))
        return torch.cat(outs, dim=0)


class MoE(nn.Module):
    """Router (softmax, top-k), tokens sorted by expert (argsort), gathered, the experts, the
    outputs scaled by their scores and scatter-added back to the tokens."""

    def __init__(self, dim, hidden, experts, top_k):
        super().__init__()
        self.experts_n, self.top_k = experts, top_k
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = GroupedExperts(dim, hidden, experts)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        scores = F.softmax(self.gate(x).to(torch.float32), dim=1)
        top_scores, selected = torch.topk(scores, k=self.top_k, dim=1)
        counts = torch.bincount(selected.view(-1), minlength=self.experts_n)
        order = torch.argsort(selected.view(-1), stable=True)
        top_scores = top_scores.view(-1)[order]
        token_idx = (order // self.top_k).reshape(-1, 1).expand(-1, x.shape[-1])
        routed = torch.gather(x, dim=0, index=token_idx)
        out = self.experts(routed, counts)
        out = (out.to(torch.float32) * top_scores.reshape(-1, 1)).to(x.dtype)
        out = torch.zeros_like(x).scatter_add(0, token_idx, out)
        return out.reshape(shape)


class MoEMLP(nn.Module):
    """Linear, ReLU, then `layers` residual MoE layers, a classifier head: tokens = batch rows."""

    def __init__(self, d_in=256, dim=128, hidden=256, experts=4, top_k=2, layers=1, classes=10):
        super().__init__()
        self.inp = nn.Linear(d_in, dim)
        self.moe = nn.ModuleList(MoE(dim, hidden, experts, top_k) for _ in range(layers))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        for m in self.moe:
            h = h + m(h)
        return self.head(h)


def moe_mlp():  # trace_step.py moe_mlp: 4 experts, top-2, one MoE layer
    return MoEMLP(), ["x=batch,256"]


def moe_mlp2():  # trace_step.py moe_mlp2: 8 experts, top-2, two MoE layers
    return MoEMLP(experts=8, layers=2), ["x=batch,256"]


# the recording kit's table: name -> (module, input shape, classes)
MODELS = {"moe_mlp": lambda: (MoEMLP(), (256,), 10),
          "moe_mlp2": lambda: (MoEMLP(experts=8, layers=2), (256,), 10)}
