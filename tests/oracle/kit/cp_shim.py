"""A CPU shim for context parallelism's ring attention (torch 2.13; Note [Context parallel] in docs/parallel.md).

torch.distributed.tensor.experimental.context_parallel's ring handlers (_context_parallel/_attention.py)
intercept `aten._scaled_dot_product_flash_attention` (and its backward) on DTensors and call it again on
each step's local q, k, v chunks. That op has CUDA kernels only, and on the CPU
F.scaled_dot_product_attention picks `_scaled_dot_product_flash_attention_for_cpu`, which CP does not
intercept. install() makes a CPU process run CP's ring code unchanged around the CPU flash kernel:

1. F.scaled_dot_product_attention is replaced (before context_parallel patches it) by what CUDA's
   scaled_dot_product_attention does when it picks flash (aten/src/ATen/native/transformers/
   attention.cpp): `aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, False,
   scale=scale)[0]` (no head-dim padding: the kit's models have head dims that are multiples of 8;
   enable_gqa is dropped: flash takes fewer k/v heads natively, and so does the CPU kernel).
2. A CPU kernel of `aten._scaled_dot_product_flash_attention`: the CPU flash kernel
   `_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, scale=scale)` ->
   (output, logsumexp), returned in the CUDA op's signature: cum_seq_q, cum_seq_k, rng_state, unused and
   debug_attn_mask are zero-element tensors (no allocation; CUDA's flash returns undefined cum_seq
   tensors and mask, a 16-byte rng_state and an 8-byte unused scalar), max_q/max_k the sequence lengths.
3. A CPU kernel of `aten._scaled_dot_product_flash_attention_backward`: the CPU flash backward
   `_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, logsumexp, dropout_p,
   is_causal, scale=scale)`.

Everything else (DTensor wrapping, the rotater's all-gather / all-to-all buffers, the merger's
temporaries, the backward's accumulators) is CP's own code running on real CPU tensors.
"""
import torch
import torch.nn.functional as F

_LIB = None


def _flash_fwd(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal,
                                                                          scale=scale)
    # None: an undefined tensor, as CUDA's flash returns cum_seq_q, cum_seq_k and debug_attn_mask
    return (out, lse, None, None, query.size(2), key.size(2), torch.empty(0, dtype=torch.int64), None, None)


def _flash_bwd(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
               philox_seed, philox_offset, *, scale=None):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, scale=scale)


def _sdpa_as_cuda_flash(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                        enable_gqa=False):
    if attn_mask is not None:
        raise NotImplementedError("cp_shim: flash takes no attn_mask (context parallel needs is_causal)")
    return torch.ops.aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                              scale=scale)[0]


def install():
    """Registers the CPU kernels and reroutes F.scaled_dot_product_attention (call before context_parallel)."""
    global _LIB
    if _LIB is not None:
        return
    _LIB = torch.library.Library("aten", "IMPL")
    _LIB.impl("_scaled_dot_product_flash_attention", _flash_fwd, "CPU")
    _LIB.impl("_scaled_dot_product_flash_attention_backward", _flash_bwd, "CPU")
    # context_parallel patches `F.<fn.__name__>` (_distribute_function): keep the public name
    _sdpa_as_cuda_flash.__name__ = "scaled_dot_product_attention"
    F.scaled_dot_product_attention = _sdpa_as_cuda_flash
