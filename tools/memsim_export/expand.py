"""Expansions of torch.nn modules whose forward is functional code that fx does not trace into.

Each expansion mirrors, op by op, the code path the installed torch takes in TRAINING mode
(the inference fast paths ``_transformer_encoder_layer_fwd`` / ``_native_multi_head_attention``
are never taken while gradients are required):

* torch 1.13  ``nn.MultiheadAttention.forward`` → ``F.multi_head_attention_forward`` with
  ``_in_projection_packed`` = ``linear(q, w, b).chunk(3, dim=-1)``, per-head reshape
  ``q.contiguous().view(L, N*H, hd).transpose(0, 1)``, ``q / sqrt(hd)``, ``bmm`` (``baddbmm`` with a
  float mask), ``softmax``, ``dropout``, ``bmm``, ``transpose(0,1).contiguous().view(L*N, E)``,
  out-projection ``linear`` and ``view(L, N, E)``.
* torch 2.x  the packed projection is ``linear → unflatten(-1,(3,E)) → unsqueeze(0) → transpose(0,-2)
  → squeeze(-2) → contiguous → select`` and, with ``need_weights=False``, attention is
  ``scaled_dot_product_attention`` followed by ``permute(2,0,1,3).contiguous().view(N*L, E)``
  (written from the 2.x sources; only 1.13 is tested here).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import (MODULE_HANDLERS, TRef, Unsupported, T, module, norm_dim)

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def _emit_view(cx, x, shape, module, hint):
    return cx.emit("view", [x], {"shape": list(shape)}, shape=tuple(shape), module=module, hint=hint)


def _transpose(cx, x, d0, d1, module, hint):
    s = list(x.shape)
    a, b = norm_dim(d0, x.ndim), norm_dim(d1, x.ndim)
    s[a], s[b] = s[b], s[a]
    return cx.emit("transpose", [x], {"dim0": d0, "dim1": d1}, shape=tuple(s), module=module, hint=hint)


@module(nn.MultiheadAttention)
def m_mha(cx, mod, path, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
          average_attn_weights=True, is_causal=False):
    return mha_forward(cx, mod, path, query, key, value, key_padding_mask, need_weights, attn_mask,
                       average_attn_weights, is_causal)


def mha_forward(cx, mod, path, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False, hp=""):
    query, key, value = T(query), T(key), T(value)
    if query.ndim != 3:
        raise Unsupported("nn.MultiheadAttention with unbatched (2-D) input")
    if not mod._qkv_same_embed_dim:
        raise Unsupported("nn.MultiheadAttention with kdim/vdim != embed_dim")
    if mod.bias_k is not None or mod.add_zero_attn:
        raise Unsupported("nn.MultiheadAttention with add_bias_kv/add_zero_attn")
    if key_padding_mask is not None:
        raise Unsupported("nn.MultiheadAttention with key_padding_mask")
    if attn_mask is not None and (not isinstance(attn_mask, TRef) or attn_mask.dtype == torch.bool):
        raise Unsupported("nn.MultiheadAttention with a boolean attn_mask")
    if is_causal and attn_mask is None:
        raise Unsupported("nn.MultiheadAttention(is_causal=True) without attn_mask")
    args_in = [query, key, value, attn_mask]
    H = mod.num_heads
    E = mod.embed_dim
    hd = E // H
    P = path
    h = (hp + ".") if hp else ""
    same_qkv = query is key and key is value
    kv_same = key is value
    # MultiheadAttention.forward: batch_first → (L, N, E)
    if mod.batch_first:
        if same_qkv:
            query = key = value = _transpose(cx, query, 1, 0, P, h + "in_t")
        elif kv_same:
            query = _transpose(cx, query, 1, 0, P, h + "q_t")
            key = value = _transpose(cx, key, 1, 0, P, h + "k_t")
        else:
            query = _transpose(cx, query, 1, 0, P, h + "q_t")
            key = _transpose(cx, key, 1, 0, P, h + "k_t")
            value = _transpose(cx, value, 1, 0, P, h + "v_t")
    L, N, _ = query.shape
    S = key.shape[0]
    W = cx.param(mod.in_proj_weight)
    B = cx.param(mod.in_proj_bias)
    # ---- in-projection -----------------------------------------------------------------------
    if same_qkv:
        proj = cx.emit("linear", [query, W, B], shape=(L, N, 3 * E), module=P, hint=h + "qkv")
        if TORCH2:
            u = _emit_view(cx, proj, (L, N, 3, E), P, h + "qkv_unflat")
            u = cx.emit("unsqueeze", [u], {"dim": 0}, shape=(1, L, N, 3, E), module=P, hint=h + "qkv_unsq")
            u = _transpose(cx, u, 0, -2, P, h + "qkv_t")
            u = cx.emit("squeeze", [u], {"dim": -2}, shape=(3, L, N, E), module=P, hint=h + "qkv_sq")
            u = cx.emit("contiguous", [u], shape=(3, L, N, E), module=P, hint=h + "qkv_c")
            q, k, v = [cx.emit("select", [u], {"dim": 0, "index": i}, shape=(L, N, E), module=P, hint=h + n)
                       for i, n in enumerate("qkv")]
        else:
            q, k, v = cx.emit("chunk", [proj], {"chunks": 3, "dim": -1}, shapes=[(L, N, E)] * 3, module=P,
                              hint=h + "qkv_chunk")
    elif kv_same:
        wq, wkv = cx.emit("split", [W], {"sections": [E, 2 * E], "dim": 0}, shapes=[(E, E), (2 * E, E)], module=P,
                          hint=h + "w_split")
        bq = bkv = None
        if B is not None:
            bq, bkv = cx.emit("split", [B], {"sections": [E, 2 * E], "dim": 0}, shapes=[(E,), (2 * E,)], module=P,
                              hint=h + "b_split")
        q = cx.emit("linear", [query, wq, bq], shape=(L, N, E), module=P, hint=h + "q_proj")
        kv = cx.emit("linear", [key, wkv, bkv], shape=(S, N, 2 * E), module=P, hint=h + "kv_proj")
        if TORCH2:  # _in_projection_packed: unflatten(-1, (2, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
            u = _emit_view(cx, kv, (S, N, 2, E), P, h + "kv_unflat")
            u = cx.emit("unsqueeze", [u], {"dim": 0}, shape=(1, S, N, 2, E), module=P, hint=h + "kv_unsq")
            u = _transpose(cx, u, 0, -2, P, h + "kv_t")
            u = cx.emit("squeeze", [u], {"dim": -2}, shape=(2, S, N, E), module=P, hint=h + "kv_sq")
            u = cx.emit("contiguous", [u], shape=(2, S, N, E), module=P, hint=h + "kv_c")
            k, v = [cx.emit("select", [u], {"dim": 0, "index": i}, shape=(S, N, E), module=P, hint=h + n)
                    for i, n in enumerate("kv")]
        else:
            k, v = cx.emit("chunk", [kv], {"chunks": 2, "dim": -1}, shapes=[(S, N, E)] * 2, module=P,
                           hint=h + "kv_chunk")
    else:
        ws = cx.emit("chunk", [W], {"chunks": 3, "dim": 0}, shapes=[(E, E)] * 3, module=P, hint=h + "w_chunk")
        bs = [None] * 3
        if B is not None:
            bs = cx.emit("chunk", [B], {"chunks": 3, "dim": 0}, shapes=[(E,)] * 3, module=P, hint=h + "b_chunk")
        q = cx.emit("linear", [query, ws[0], bs[0]], shape=(L, N, E), module=P, hint=h + "q_proj")
        k = cx.emit("linear", [key, ws[1], bs[1]], shape=(S, N, E), module=P, hint=h + "k_proj")
        v = cx.emit("linear", [value, ws[2], bs[2]], shape=(S, N, E), module=P, hint=h + "v_proj")
    # ---- mask --------------------------------------------------------------------------------
    if attn_mask is not None and attn_mask.ndim == 2:
        attn_mask = cx.emit("unsqueeze", [attn_mask], {"dim": 0}, shape=(1,) + attn_mask.shape, module=P,
                            hint=h + "mask")
    dropout_p = float(mod.dropout) if mod.training else 0.0
    # ---- heads -------------------------------------------------------------------------------
    heads = []
    for t, n, ln in ((q, "q", L), (k, "k", S), (v, "v", S)):
        if not TORCH2:
            t = cx.emit("contiguous", [t], shape=t.shape, module=P, hint=h + n + "_c")
        t = _emit_view(cx, t, (ln, N * H, hd), P, h + n + "_v")
        t = _transpose(cx, t, 0, 1, P, h + n + "_h")
        heads.append(t)
    q, k, v = heads
    weights = None
    locals_mhaf = [query, key, value, q, k, v, attn_mask]
    if TORCH2 and not need_weights:
        if attn_mask is not None:
            if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
                attn_mask = cx.emit("unsqueeze", [attn_mask], {"dim": 0}, shape=(1,) + attn_mask.shape, module=P,
                                    hint=h + "mask4")
            else:
                attn_mask = _emit_view(cx, attn_mask, (N, H, -1, S), P, h + "mask4")
        q = _emit_view(cx, q, (N, H, L, hd), P, h + "q4")
        k = _emit_view(cx, k, (N, H, S, hd), P, h + "k4")
        v = _emit_view(cx, v, (N, H, S, hd), P, h + "v4")
        locals_mhaf += [q, k, v]
        o = cx.emit("scaled_dot_product_attention", [q, k, v, attn_mask],
                    {"dropout_p": dropout_p, "is_causal": bool(is_causal)}, shape=(N, H, L, hd), module=P,
                    hint=h + "sdpa")
        o = cx.emit("permute", [o], {"dims": [2, 0, 1, 3]}, shape=(L, N, H, hd), module=P, hint=h + "o_perm")
        o = cx.emit("contiguous", [o], shape=(L, N, H, hd), module=P, hint=h + "o_c")
        o = _emit_view(cx, o, (N * L, E), P, h + "o_flat")
    else:
        if TORCH2:
            qs = cx.emit("mul", [q], {"scalar": math.sqrt(1.0 / float(hd)), "inplace": False}, shape=q.shape,
                         module=P, hint=h + "q_scaled")
        else:
            qs = cx.emit("div", [q], {"scalar": math.sqrt(hd), "inplace": False}, shape=q.shape, module=P,
                         hint=h + "q_scaled")
        kt = _transpose(cx, k, -2, -1, P, h + "k_t2")
        if attn_mask is not None:
            w = cx.emit("baddbmm", [attn_mask, qs, kt], {"beta": 1, "alpha": 1}, shape=(N * H, L, S), module=P,
                        hint=h + "scores")
        else:
            w = cx.emit("bmm", [qs, kt], shape=(N * H, L, S), module=P, hint=h + "scores")
        locals_mhaf.append(qs)
        w = cx.emit("softmax", [w], {"dim": -1}, shape=w.shape, module=P, hint=h + "probs")
        if dropout_p > 0.0:
            w = cx.emit("dropout", [w], {"p": dropout_p, "inplace": False, "training": True}, shape=w.shape, module=P,
                        hint=h + "probs_drop")
        locals_mhaf.append(w)
        o = cx.emit("bmm", [w, v], shape=(N * H, L, hd), module=P, hint=h + "ctx")
        o = _transpose(cx, o, 0, 1, P, h + "ctx_t")
        o = cx.emit("contiguous", [o], shape=o.shape, module=P, hint=h + "ctx_c")
        o = _emit_view(cx, o, (L * N, E), P, h + "ctx_flat")
        if need_weights:
            weights = _emit_view(cx, w, (N, H, L, S), P, h + "attn_w")
            if average_attn_weights and TORCH2:
                weights = cx.emit("mean", [weights], {"dim": 1, "keepdim": False}, shape=(N, L, S), module=P,
                                  hint=h + "attn_w_avg")
            elif average_attn_weights:
                weights = cx.emit("sum", [weights], {"dim": 1, "keepdim": False}, shape=(N, L, S), module=P,
                                  hint=h + "attn_w_sum")
                weights = cx.emit("div", [weights], {"scalar": H, "inplace": False}, shape=(N, L, S), module=P,
                                  hint=h + "attn_w_avg")
    op_path = P + ".out_proj" if P else "out_proj"
    o = cx.emit("linear", [o, cx.param(mod.out_proj.weight), cx.param(mod.out_proj.bias)], shape=(o.shape[0], E),
                module=op_path, hint=h + "out")
    o = _emit_view(cx, o, (L, N, E), P, h + "out_v")
    # multi_head_attention_forward returns here: its locals (query/key/value, the per-head q, k, v —
    # q keeps its contiguous copy alive —, q_scaled, the attention weights, the mask) die now
    cx.keep_alive(locals_mhaf)
    if mod.batch_first:
        o = _transpose(cx, o, 1, 0, P, h + "out_t")
    cx.keep_alive(args_in)  # MultiheadAttention.forward's arguments and locals
    return (o, weights)


def _activation(cx, layer, path, x, hint):
    act = layer.activation
    if isinstance(act, nn.Module):
        return cx.call_submodule(act, path + ".activation", x)
    if act is F.relu:
        return cx.emit("relu", [x], {"inplace": False}, shape=x.shape, module=path, hint=hint)
    if act is F.gelu:
        return cx.emit("gelu", [x], {"inplace": False, "approximate": "none"}, shape=x.shape, module=path, hint=hint)
    raise Unsupported("TransformerEncoderLayer activation %r" % (act,))


def _sub(path, name):
    return path + "." + name if path else name


@module(nn.TransformerEncoderLayer)
def m_encoder_layer(cx, mod, path, src, src_mask=None, src_key_padding_mask=None, is_causal=False, hp=""):
    x = T(src)
    h = (hp + ".") if hp else ""
    if src_key_padding_mask is not None:
        raise Unsupported("TransformerEncoderLayer with src_key_padding_mask")

    def sa(y):
        a, _ = mha_forward(cx, mod.self_attn, _sub(path, "self_attn"), y, y, y, attn_mask=src_mask,
                           need_weights=False, is_causal=is_causal, hp=h + "sa")
        r = cx.call_submodule(mod.dropout1, _sub(path, "dropout1"), a)
        cx.keep_alive([y])  # _sa_block's argument, held by the caller until it returns
        return r

    def ff(y0):
        y = cx.call_submodule(mod.linear1, _sub(path, "linear1"), y0)
        y = _activation(cx, mod, path, y, h + "act")
        y = cx.call_submodule(mod.dropout, _sub(path, "dropout"), y)
        y = cx.call_submodule(mod.linear2, _sub(path, "linear2"), y)
        r = cx.call_submodule(mod.dropout2, _sub(path, "dropout2"), y)
        cx.keep_alive([y0])  # _ff_block's argument
        return r

    def add(a, b, hint):
        return cx.emit("add", [a, b], {"inplace": False}, shape=a.shape, module=path, hint=h + hint)

    if mod.norm_first:
        x = add(x, sa(cx.call_submodule(mod.norm1, _sub(path, "norm1"), x)), "res1")
        x = add(x, ff(cx.call_submodule(mod.norm2, _sub(path, "norm2"), x)), "res2")
    else:
        # `x = self.norm2(x + self._ff_block(x))`: the name x is rebound only when the norm returns,
        # so the old x lives through it
        y = cx.call_submodule(mod.norm1, _sub(path, "norm1"), add(x, sa(x), "res1"))
        cx.keep_alive([x])
        x = y
        y = cx.call_submodule(mod.norm2, _sub(path, "norm2"), add(x, ff(x), "res2"))
        cx.keep_alive([x])
        x = y
    cx.keep_alive([src, src_mask])  # forward's `src` holds the layer input until it returns
    return x


@module(nn.TransformerEncoder)
def m_encoder(cx, mod, path, src, mask=None, src_key_padding_mask=None, is_causal=None):
    x = T(src)
    if src_key_padding_mask is not None:
        raise Unsupported("TransformerEncoder with src_key_padding_mask")
    for i, layer in enumerate(mod.layers):
        lp = _sub(path, "layers.%d" % i)
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise Unsupported("TransformerEncoder with a %s layer" % type(layer).__name__)
        saved = cx.module_path
        cx.module_path = lp
        try:
            x = m_encoder_layer(cx, layer, lp, x, mask, None, bool(is_causal), hp="l%d" % i)
        finally:
            cx.module_path = saved
    if mod.norm is not None:
        x = cx.call_submodule(mod.norm, _sub(path, "norm"), x)
    cx.keep_alive([src, mask])  # forward's `src` holds the encoder input until it returns
    return x


_ = MODULE_HANDLERS, F
