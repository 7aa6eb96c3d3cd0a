"""Seed models of the memsim model zoo (graphs/*.json are exported from these by graphs/generate.sh).

mlp, mnist_cnn, TabAE, TextEncoder, BertCls and MultimodalBert are copied verbatim (same layers, same
parameter registration order) from the oracle's trace_step.py, the script that records the
real PyTorch allocation traces memsim is validated against.  gpt2_small is GPT-2 small (124 M
parameters) written in the nanoGPT / HF style with explicit masked attention.

Every builder returns ``(module, [input specs])`` for tools/export_torch.py (``--module
graphs/models.py:NAME``); the specs mirror the inputs trace_step.py feeds.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- verbatim from trace_step.py --------------------------------------------------------------

def _mlp():  # seed 002: 1000 -> 4x100 -> 10
    return nn.Sequential(nn.Linear(1000, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 100),
                         nn.ReLU(), nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 10))


def _mnist_cnn():  # seed 001 style
    return nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 4 * 4, 1024), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(1024, 10))


class TabAE(nn.Module):  # seed 003: BatchNorm1d -> Linear -> head
    def __init__(s, d_in=100, d_out=64):
        super().__init__(); s.bn = nn.BatchNorm1d(d_in); s.fc = nn.Linear(d_in, d_out)

    def forward(s, x): return torch.relu(s.fc(s.bn(x)))


class TextEncoder(nn.Module):  # BERT-style encoder (post-LN, GELU)
    def __init__(s, vocab=30522, d=768, layers=12, heads=12, ff=3072, seq=128):
        super().__init__()
        s.tok = nn.Embedding(vocab, d); s.pos = nn.Embedding(seq, d); s.ln = nn.LayerNorm(d); s.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, activation="gelu", batch_first=True)
        s.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(s, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        return s.enc(s.drop(s.ln(s.tok(ids) + s.pos(pos))))


class BertCls(nn.Module):
    def __init__(s, layers=12, d=768, heads=12, ff=3072, seq=128, classes=2):
        super().__init__(); s.text = TextEncoder(d=d, layers=layers, heads=heads, ff=ff, seq=seq); s.head = nn.Linear(d, classes)

    def forward(s, ids): return s.head(s.text(ids)[:, 0])


class MultimodalBert(nn.Module):  # seed 003: TabAE + TextBertBase + final merge
    def __init__(s, seq=128, tab=100, classes=2):
        super().__init__(); s.tab = TabAE(tab, 64); s.text = TextEncoder(seq=seq); s.text_head = nn.Linear(768, 128)
        s.merge = nn.Linear(64 + 128, classes)

    def forward(s, ids, x_tab):
        t = s.text_head(s.text(ids)[:, 0]); return s.merge(torch.cat([s.tab(x_tab), t], dim=1))


# ---- GPT-2 small ------------------------------------------------------------------------------

class GPT2Attention(nn.Module):
    """Causal self-attention, explicit: qkv projection, split, per-head views, QK^T, scale,
    masked_fill with a causal bool buffer, softmax, dropout, @V, merge heads, projection, dropout."""

    def __init__(s, d=768, heads=12, ctx=1024, pdrop=0.1):
        super().__init__()
        s.d, s.heads = d, heads
        s.c_attn = nn.Linear(d, 3 * d)
        s.c_proj = nn.Linear(d, d)
        s.attn_drop = nn.Dropout(pdrop)
        s.resid_drop = nn.Dropout(pdrop)
        # True above the diagonal = positions a token must not attend to
        s.register_buffer("mask", torch.triu(torch.ones(ctx, ctx, dtype=torch.bool), diagonal=1).view(1, 1, ctx, ctx),
                          persistent=False)

    def forward(s, x):
        B, T, C = x.size()
        q, k, v = s.c_attn(x).split(s.d, dim=2)
        q = q.view(B, T, s.heads, C // s.heads).transpose(1, 2)
        k = k.view(B, T, s.heads, C // s.heads).transpose(1, 2)
        v = v.view(B, T, s.heads, C // s.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // s.heads))
        att = att.masked_fill(s.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        att = s.attn_drop(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return s.resid_drop(s.c_proj(y))


class GPT2MLP(nn.Module):
    def __init__(s, d=768, pdrop=0.1):
        super().__init__()
        s.c_fc = nn.Linear(d, 4 * d); s.act = nn.GELU(approximate="tanh"); s.c_proj = nn.Linear(4 * d, d)
        s.drop = nn.Dropout(pdrop)

    def forward(s, x): return s.drop(s.c_proj(s.act(s.c_fc(x))))


class GPT2Block(nn.Module):  # pre-LN
    def __init__(s, d=768, heads=12, ctx=1024, pdrop=0.1):
        super().__init__()
        s.ln_1 = nn.LayerNorm(d); s.attn = GPT2Attention(d, heads, ctx, pdrop)
        s.ln_2 = nn.LayerNorm(d); s.mlp = GPT2MLP(d, pdrop)

    def forward(s, x):
        x = x + s.attn(s.ln_1(x))
        return x + s.mlp(s.ln_2(x))


class GPT2(nn.Module):
    """GPT-2: token + learned position embeddings, pre-LN blocks, final LayerNorm, LM head tied to wte."""

    def __init__(s, vocab=50257, ctx=1024, d=768, layers=12, heads=12, pdrop=0.1):
        super().__init__()
        s.wte = nn.Embedding(vocab, d); s.wpe = nn.Embedding(ctx, d); s.drop = nn.Dropout(pdrop)
        s.h = nn.ModuleList([GPT2Block(d, heads, ctx, pdrop) for _ in range(layers)])
        s.ln_f = nn.LayerNorm(d)
        s.lm_head = nn.Linear(d, vocab, bias=False)
        s.lm_head.weight = s.wte.weight  # weight tying: one parameter, listed once (as wte.weight)

    def forward(s, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = s.drop(s.wte(ids) + s.wpe(pos))
        for blk in s.h:
            x = blk(x)
        return s.lm_head(s.ln_f(x))


# ---- builders for tools/export_torch.py (module, input specs) ------------------------------------

IDS = "ids=int64:batch,128@0:30522"


def alexnet_classic():
    """AlexNet as in Krizhevsky et al. 2012 (single tower, no LRN): 227x227 input, 62,378,344 params."""
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Flatten(), nn.Dropout(0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
        nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, 1000))


def mlp():
    return _mlp(), ["batch,1000"]


def mnist_cnn():
    return _mnist_cnn(), ["batch,1,28,28"]


def rms_mlp():  # trace_step.py rms_mlp: nn.RMSNorm needs torch >= 2.4
    return nn.Sequential(nn.Linear(1000, 256), nn.RMSNorm(256), nn.ReLU(), nn.Linear(256, 10)), ["batch,1000"]


class BreakMLP(nn.Module):
    """trace_step.py break_mlp: the MLP with torch._dynamo.graph_break() between its halves (two
    compiled graphs under torch.compile; a no-op eager)."""

    def __init__(self):
        super().__init__()
        m = _mlp()
        self.a, self.b = nn.Sequential(*m[:4]), nn.Sequential(*m[4:])

    def forward(self, x):
        h = self.a(x)
        torch._dynamo.graph_break()
        return self.b(h)


def break_mlp():
    return BreakMLP(), ["batch,1000"]


def _eager(module, h):
    return module(h)


if hasattr(torch, "compiler"):  # torch 2.x: under torch.compile a graph break, the call run eagerly
    _eager = torch.compiler.disable(_eager)


class EagerMidMLP(nn.Module):
    """trace_step.py eager_mid_mlp: the MLP whose third Linear+ReLU runs under
    torch.compiler.disable: two compiled graphs with eager code between them (eager: the MLP)."""

    def __init__(self):
        super().__init__()
        m = _mlp()
        self.a, self.mid, self.b = nn.Sequential(*m[:4]), nn.Sequential(*m[4:6]), nn.Sequential(*m[6:])

    def forward(self, x):
        return self.b(_eager(self.mid, self.a(x)))


def eager_mid_mlp():
    return EagerMidMLP(), ["batch,1000"]


IDS_SEQ = "ids=int64:batch,seq@0:30522"


def bert_base(seq=128):
    """seq sizes the table of learned positions and the input: both symbolic in the zoo graph."""
    return BertCls(seq=seq), [IDS_SEQ]


def bert_small():
    return BertCls(layers=4, d=256, heads=4, ff=1024), [IDS]


def multimodal_bert(seq=128):
    return MultimodalBert(seq=seq), [IDS_SEQ, "x_tab=batch,100"]


def gpt2_small():
    return GPT2(), ["ids=int64:batch,1024@0:50257"]


def gpt2_tiny():  # for tests: same code, small sizes
    return GPT2(vocab=1000, ctx=64, d=64, layers=2, heads=4), ["ids=int64:batch,64@0:1000"]
