"""Builders of the language-model zoo (graphs/generate.sh), exported with --trace run: the models
run as written, on the meta device (no weight is allocated).

* GPT-2 small/medium/large/xl and the CS336 course transformer: graphs/llm_models.py, a verbatim
  copy of the oracle's model file (the CS336 course transformer and nanoGPT).
* A Llama-style decoder (RMSNorm, RoPE, SwiGLU, grouped-query attention), written here in the
  style of Hugging Face's LlamaForCausalLM (eager attention: matmul, causal mask, float32 softmax,
  matmul; k/v heads repeated by expand + reshape), at the Llama 3.2 1B and Llama 3 8B sizes.
* The CS336 transformer with the course's own cross entropy (the model returns its loss).
* Mixtral 8x7B's sizes in torchtitan's MoE form: the Llama-style decoder with SDPA attention and
  graphs/moe_models.py's MoE layer (router, top-k, for-loop experts) in place of the MLP.

Builders take the symbols their buffers depend on (``seq``), so RoPE caches and masks are symbolic.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import llm_models
import moe_models

GPT2_CONFIGS = {
    "small": dict(n_layer=12, n_head=12, n_embd=768),
    "medium": dict(n_layer=24, n_head=16, n_embd=1024),
    "large": dict(n_layer=36, n_head=20, n_embd=1280),
    "xl": dict(n_layer=48, n_head=25, n_embd=1600),
}


def gpt2(size):
    return llm_models.GPT(vocab_size=50304, block_size=1024, dropout=0.0, bias=False, **GPT2_CONFIGS[size])


def gpt2_small():
    return gpt2("small")


def _peft_lora(model, **config):
    """get_peft_model(model, LoraConfig(**config)) as a PEFT user writes it (needs peft; memsim's
    exporter traces the base model and writes the adapters as the graph's "lora" key)."""
    from peft import LoraConfig, get_peft_model
    return get_peft_model(model, LoraConfig(**config))


def gpt2_small_lora():
    """GPT-2 small with LoRA r=8, alpha=16 on c_attn, c_proj, c_fc (trace_step.py gpt2_small
    --lora r=8,alpha=16,targets=c_attn,c_proj,c_fc)."""
    return _peft_lora(gpt2("small"), r=8, lora_alpha=16, target_modules=["c_attn", "c_proj", "c_fc"])


def gpt2_small_lora_drop():
    """As gpt2_small_lora, with lora_dropout 0.05."""
    return _peft_lora(gpt2("small"), r=8, lora_alpha=16, target_modules=["c_attn", "c_proj", "c_fc"],
                      lora_dropout=0.05)


def gpt2_small_qlora_nf4dq():
    """GPT-2 small as a QLoRA user loads it: every Linear but lm_head a bitsandbytes Linear4bit (NF4,
    double quantization) and peft LoRA r=8, alpha=16 on c_attn, c_proj, c_fc (trace_step.py
    gpt2_small --quantize nf4,double_quant=on --lora r=8,alpha=16,targets=c_attn,c_proj,c_fc; needs
    bitsandbytes and peft; the exporter writes the "quantize_base" and "lora" keys)."""
    import bitsandbytes as bnb
    import torch.nn as nn
    model = gpt2("small")
    for mod in list(model.modules()):
        for child, lin in list(mod.named_children()):
            if type(lin) is nn.Linear and child != "lm_head":
                setattr(mod, child, bnb.nn.Linear4bit(lin.in_features, lin.out_features, lin.bias is not None,
                                                      compress_statistics=True, quant_type="nf4"))
    model.is_loaded_in_4bit = True  # what transformers' bnb quantizer sets; peft wraps the bnb layers
    return _peft_lora(model, r=8, lora_alpha=16, target_modules=["c_attn", "c_proj", "c_fc"])


def gpt2_medium():
    return gpt2("medium")


def gpt2_large():
    return gpt2("large")


def gpt2_xl():
    return gpt2("xl")


def cs336_small(seq):
    return llm_models.cs336_lm("small", seq)


def cs336_medium(seq):
    return llm_models.cs336_lm("medium", seq)


class WithCS336Loss(nn.Module):
    """The course's training step: logits → cs336_cross_entropy (the model returns its loss).
    keep_logits: also return the logits, which the caller holds until after backward (as a
    training loop's `out = model(x)` does)."""

    def __init__(self, lm, keep_logits=False):
        super().__init__()
        self.lm = lm
        self.keep_logits = keep_logits

    def forward(self, ids, targets):
        logits = self.lm(ids)
        loss = llm_models.cs336_cross_entropy(logits, targets)
        return (loss, logits) if self.keep_logits else loss


def cs336_small_loss(seq):
    return WithCS336Loss(llm_models.cs336_lm("small", seq))


def cs336_small_loss_held(seq):
    """trace_step.py --loss cs336: `out = model(ids); loss = cs336_cross_entropy(out, y)`."""
    return WithCS336Loss(llm_models.cs336_lm("small", seq), keep_logits=True)


# ---- Llama-style decoder -----------------------------------------------------------------------

class LlamaRMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)

    def _repeat_kv(self, x):
        b, h, t, hd = x.shape
        n = self.heads // self.kv_heads
        if n == 1:
            return x
        return x[:, :, None, :, :].expand(b, h, n, t, hd).reshape(b, h * n, t, hd)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self._repeat_kv(k), self._repeat_kv(v)
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        att = att + mask
        att = F.softmax(att, dim=-1, dtype=torch.float32)
        y = torch.matmul(att, v)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class LlamaMLP(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, ff):
        super().__init__()
        self.self_attn = LlamaAttention(d, heads, kv_heads)
        self.mlp = LlamaMLP(d, ff)
        self.input_layernorm = LlamaRMSNorm(d)
        self.post_attention_layernorm = LlamaRMSNorm(d)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab, d, layers, heads, kv_heads, ff, seq, theta=500000.0, tied=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaLayer(d, heads, kv_heads, ff) for _ in range(layers)])
        self.norm = LlamaRMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight
        hd = d // heads
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1), persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed_tokens(ids)
        cos, sin, mask = self.cos[:t], self.sin[:t], self.mask[:t, :t]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


class SdpaAttention(LlamaAttention):
    """torchtitan's attention: k/v heads repeated, F.scaled_dot_product_attention(is_causal=True).
    Its projections repeat LlamaAttention.forward's lines on purpose: an exported graph records the
    Python code's tensor lifetimes, so moving them into a shared helper changes the zoo's graphs."""

    def forward(self, x, cos, sin, mask=None):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self._repeat_kv(k), self._repeat_kv(v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class MoeLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, ff, experts, top_k):
        super().__init__()
        self.self_attn = SdpaAttention(d, heads, kv_heads)
        self.moe = moe_models.MoE(d, ff, experts, top_k)
        self.input_layernorm = LlamaRMSNorm(d)
        self.post_attention_layernorm = LlamaRMSNorm(d)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.moe(self.post_attention_layernorm(x))


class MoeDecoder(nn.Module):
    """A Llama-style decoder whose MLPs are mixtures of experts (torchtitan's MoE form)."""

    def __init__(self, vocab, d, layers, heads, kv_heads, ff, experts, top_k, seq, theta):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([MoeLayer(d, heads, kv_heads, ff, experts, top_k) for _ in range(layers)])
        self.norm = LlamaRMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed_tokens(ids)
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def mixtral_8x7b(seq):
    """Mixtral 8x7B sizes: d 4096, 32 layers, 32 heads, 8 kv heads, 8 experts of ff 14336, top 2,
    vocab 32000, rope theta 1e6; in bf16 (as loaded with torch_dtype=torch.bfloat16)."""
    return MoeDecoder(32000, 4096, 32, 32, 8, 14336, 8, 2, seq, 1e6).to(torch.bfloat16)


def moe_decoder_tiny(seq):
    """For tests: the same code at toy sizes (4 experts, top 2)."""
    return MoeDecoder(1000, 64, 2, 4, 2, 128, 4, 2, seq, 1e6)


def moe_decoder_tiny_bf16(seq):
    """moe_decoder_tiny in bf16: the graph FSDP2's MixedPrecisionPolicy(param_dtype=bf16) computes."""
    return moe_decoder_tiny(seq).to(torch.bfloat16)


def llama_1b(seq):
    """Llama 3.2 1B sizes: d 2048, 16 layers, 32 heads, 8 kv heads, ff 8192, vocab 128256, tied."""
    return Llama(128256, 2048, 16, 32, 8, 8192, seq, tied=True)


def llama_8b(seq):
    """Llama 3 8B sizes: d 4096, 32 layers, 32 heads, 8 kv heads, ff 14336, vocab 128256."""
    return Llama(128256, 4096, 32, 32, 8, 14336, seq)


def llama_tiny(seq):
    """For tests: the same code at toy sizes."""
    return Llama(1000, 64, 2, 4, 2, 128, seq)
