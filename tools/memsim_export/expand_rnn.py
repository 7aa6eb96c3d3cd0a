"""nn.RNN / nn.LSTM / nn.GRU and their cells, expanded into the ATen ops the CPU runs (Note [Recurrent layers]).

On the CPU, ``_VF.lstm`` / ``_VF.gru`` / ``_VF.rnn_tanh`` / ``_VF.rnn_relu`` run ATen's composite of
aten/src/ATen/native/RNN.cpp (1.13 and 2.x alike; the fused ``_thnn_fused_*_cell`` kernels are CUDA
only), so autograd records one node per ATen op and memsim's rules for those ops apply:

* ``_rnn_impl``: ``input.transpose(0, 1)`` when batch_first; the initial states ``hx.unbind(0)``.
* ``apply_layer_stack``: per layer the layer, then ``dropout(layer_input, p)`` between layers.
* ``FullLayer`` (CPU): ``inputs_w = params.linear_ih(inputs)`` over the whole sequence (a 3-D
  ``linear``), ``inputs_w.unbind(0)``, one cell per step (``pre_compute_input``), the step outputs
  kept in a vector until ``at::stack``; ``inputs_w`` lives until the layer returns.
  ``ReversedFullLayer`` walks the steps backwards and reverses the outputs before the stack.
* ``FullBidirectionalLayer`` (CPU): forward projection and layer, stack; the reverse projection
  replaces ``input_w`` (the forward one dies then), reverse layer, stack, ``at::cat`` on the last dim.
* Cells (``pre_compute_input``): ``LSTMCell``: ``gates = linear_hh(hx).add_(x_t)``,
  ``unsafe_chunk(4, 1)``, ``sigmoid_ / sigmoid_ / tanh_ / sigmoid_``, ``cy = (f * cx).add_(i * g)``,
  ``hy = o * cy.tanh()`` (+ ``hy = matmul(hy, w_hr.t())`` with proj_size). ``GRUCell``: ``x_t`` and
  ``linear_hh(hx)`` chunked in 3, ``r = hg[0].add_(xg[0]).sigmoid_()``, ``z = hg[1].add_(xg[1]).sigmoid_()``,
  ``n = xg[2].add(hg[2].mul_(r)).tanh_()``, ``hy = (hx - n).mul_(z).add_(n)``. ``SimpleCell``:
  ``tanh / relu(linear_hh(hx).add_(x_t))`` out of place.
* ``lstm_cell`` / ``gru_cell`` / ``rnn_*_cell`` (the Cell modules): the same cells without
  ``pre_compute_input``: ``linear_ih(x)`` per call.

torch 2.x runs nn.LSTM on the CPU through oneDNN when ``use_mkldnn`` holds (mkldnn enabled,
float32 / bf16 input) and it has no proj_size: ``lstm_mkldnn`` (aten/src/ATen/native/mkldnn/RNN.cpp
``mkldnn_rnn``) makes the input contiguous (a copy when batch_first), selects each layer-direction's
``hx[index]`` / ``cx[index]``, passes ``at::zeros`` of the weights' sizes for the biases when there
are none, and calls ``mkldnn_rnn_layer`` once per layer and direction (Note [oneDNN LSTM]); between
layers ``at::cat`` of the directions and ``dropout``; then ``at::stack`` of the final h and c. The
expansion emits those ops, one ``mkldnn_rnn_layer`` op per layer and direction, whose rule sizes
oneDNN's workspace, scratchpad and weight reorders. Only float32 is modelled: a bf16 LSTM (oneDNN's
brgemm implementation on AVX512-BF16 hosts) is refused.
"""
import torch
import torch.nn as nn

from .registry import Unsupported, T, dtype_name, module

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def _lstm_uses_onednn(mod, x):
    """RNN.cpp (2.x) ``use_mkldnn`` and ``!has_projections``: the CPU LSTM then calls mkldnn_rnn_layer."""
    if not TORCH2 or getattr(mod, "proj_size", 0) > 0:
        return False
    return torch._C._get_mkldnn_enabled() and x.dtype in (torch.float32, torch.bfloat16)


class _Emit:
    """Emits the ops of one recurrent module under its module path."""

    def __init__(self, cx, path):
        self.cx, self.path = cx, path

    def op(self, kind, ins, attrs=None, shape=None, shapes=None, hint=None, dtype=None):
        return self.cx.emit(kind, ins, attrs or {}, shape=shape, shapes=shapes, dtype=dtype, module=self.path, hint=hint)

    def linear(self, x, w, b, hint):
        return self.op("linear", [x, w, b], shape=tuple(x.shape[:-1]) + (w.shape[0],), hint=hint)

    def inplace(self, kind, a, b=None, hint=None):
        return self.op(kind, [a] + ([b] if b is not None else []), {"inplace": True, "inplace_fixed": True},
                       shape=a.shape, hint=hint)

    def pointwise(self, kind, a, b=None, hint=None):
        return self.op(kind, [a] + ([b] if b is not None else []), {"inplace": False}, shape=a.shape, hint=hint)

    def chunk(self, x, n, hint):
        s = (x.shape[0], x.shape[1] // n)
        return self.op("chunk", [x], {"chunks": n, "dim": 1}, shapes=[s] * n, hint=hint)


def _lstm_cell(e, x_t, hidden, p, h):
    """RNN.cpp LSTMCell::operator() on the CPU. |x_t| makes the input gates (linear_ih, evaluated after
    linear_hh: the object of ``linear_hh(hx).add_(linear_ih(input))`` is sequenced first)."""
    hx, cx_ = hidden
    gates = e.linear(hx, p["w_hh"], p["b_hh"], h + "hh")
    gates = e.inplace("add", gates, x_t(), h + "gates")
    i, f, g, o = e.chunk(gates, 4, h + "gates_chunk")
    i = e.inplace("sigmoid", i, hint=h + "in")
    f = e.inplace("sigmoid", f, hint=h + "forget")
    g = e.inplace("tanh", g, hint=h + "cell")
    o = e.inplace("sigmoid", o, hint=h + "out")
    cy = e.pointwise("mul", f, cx_, h + "f_cx")
    cy = e.inplace("add", cy, e.pointwise("mul", i, g, h + "i_g"), h + "cy")
    hy = e.pointwise("mul", o, e.pointwise("tanh", cy, hint=h + "cy_tanh"), h + "hy")
    if p.get("w_hr") is not None:  # LSTMCell with projections: params.matmul_hr(hy)
        wt = e.op("transpose", [p["w_hr"]], {"dim0": 0, "dim1": 1}, shape=p["w_hr"].shape[::-1], hint=h + "w_hr_t")
        hy = e.op("matmul", [hy, wt], shape=(hy.shape[0], wt.shape[1]), hint=h + "hr")
    return hy, cy


def _gru_cell(e, x_t, hx, p, h):
    """RNN.cpp GRUCell::operator() on the CPU."""
    xg = e.chunk(x_t(), 3, h + "igates_chunk")
    hg = e.chunk(e.linear(hx, p["w_hh"], p["b_hh"], h + "hh"), 3, h + "hgates_chunk")
    r = e.inplace("sigmoid", e.inplace("add", hg[0], xg[0], h + "r_pre"), hint=h + "reset")
    z = e.inplace("sigmoid", e.inplace("add", hg[1], xg[1], h + "z_pre"), hint=h + "input")
    n = e.pointwise("add", xg[2], e.inplace("mul", hg[2], r, h + "hn_r"), h + "n_pre")
    n = e.inplace("tanh", n, hint=h + "new")
    hy = e.inplace("mul", e.pointwise("sub", hx, n, h + "h_n"), z, h + "h_n_z")
    hy = e.inplace("add", hy, n, h + "hy")
    e.cx.keep_alive([xg, hg])  # the cell's chunk vectors hold the gates until it returns
    return hy


def _simple_cell(e, x_t, hx, p, h, nonlin):
    """RNN.cpp SimpleCell::operator(): nonlinearity(linear_hh(hx).add_(x_t)), out of place."""
    hh = e.linear(hx, p["w_hh"], p["b_hh"], h + "hh")
    x = x_t()
    pre = e.inplace("add", hh, x, h + "pre")
    hy = e.pointwise(nonlin, pre, hint=h + nonlin)
    e.cx.keep_alive([x])  # a temporary of the full expression: it dies after the nonlinearity
    return hy


def _cell_fn(mode):
    if mode == "LSTM":
        return _lstm_cell, (lambda hidden: hidden[0])
    if mode == "GRU":
        return _gru_cell, (lambda hidden: hidden)
    nonlin = "tanh" if mode == "RNN_TANH" else "relu"
    return (lambda e, x, hx, p, h: _simple_cell(e, x, hx, p, h, nonlin)), (lambda hidden: hidden)


def _layer_steps(e, mode, steps, hidden, p, h, reverse):
    """FullLayer / ReversedFullLayer's step loop: the step outputs in time order and the final hidden."""
    cell, as_output = _cell_fn(mode)
    outputs = []
    order = range(len(steps) - 1, -1, -1) if reverse else range(len(steps))
    for t in order:
        hidden = cell(e, lambda: steps[t], hidden, p, "%st%d." % (h, t))
        outputs.append(as_output(hidden))
    if reverse:
        outputs.reverse()
    return outputs, hidden


def _unbind(e, x, hint):
    return list(e.op("unbind", [x], {"dim": 0}, shapes=[tuple(x.shape[1:])] * x.shape[0], hint=hint))


def _stack(e, xs, hint):
    return e.op("stack", xs, {"dim": 0}, shape=(len(xs),) + tuple(xs[0].shape), hint=hint)


def _direction(e, mode, x, hidden, p, h, reverse):
    """FullLayer / ReversedFullLayer::operator()(inputs) on the CPU: (stacked output, final hidden)."""
    inputs_w = e.linear(x, p["w_ih"], p["b_ih"], h + "ih")
    outputs, final = _layer_steps(e, mode, _unbind(e, inputs_w, h + "steps"), hidden, p, h, reverse)
    out = _stack(e, outputs, h + "out")
    e.cx.keep_alive([inputs_w])  # a local of the layer until it returns
    return out, final


def _bidirectional(e, mode, x, hiddens, ps, h):
    """FullBidirectionalLayer::operator() on the CPU."""
    input_w = e.linear(x, ps[0]["w_ih"], ps[0]["b_ih"], h + "ih")
    fw_out, fw_final = _layer_steps(e, mode, _unbind(e, input_w, h + "steps"), hiddens[0], ps[0], h, False)
    fw_output = _stack(e, fw_out, h + "out")
    hr = h + "reverse."
    input_w_rev = e.linear(x, ps[1]["w_ih"], ps[1]["b_ih"], hr + "ih")
    e.cx.keep_alive([input_w])  # `input_w = ...` and `step_inputs = ...` replace the forward's
    steps_rev = _unbind(e, input_w_rev, hr + "steps")
    rev_out, rev_final = _layer_steps(e, mode, steps_rev, hiddens[1], ps[1], hr, True)
    rev_output = _stack(e, rev_out, hr + "out")
    out = e.op("cat", [fw_output, rev_output], {"dim": 2}, shape=fw_output.shape[:2] + (2 * fw_output.shape[2],),
               hint=h + "cat")
    e.cx.keep_alive([input_w_rev])
    return out, (fw_final, rev_final)


def _params(cx, mod, layer, suffix):
    g = lambda n: cx.param(getattr(mod, "%s_l%d%s" % (n, layer, suffix), None))
    return {"w_ih": g("weight_ih"), "w_hh": g("weight_hh"), "b_ih": g("bias_ih"), "b_hh": g("bias_hh"),
            "w_hr": g("weight_hr")}


def rnn_forward(cx, mod, path, x, hx=None):
    """nn.RNNBase.forward in training: _VF.lstm / gru / rnn_tanh / rnn_relu on the CPU."""
    x = T(x)
    mode = mod.mode
    if x.ndim != 3:
        raise Unsupported("nn.%s with an unbatched (2-D) input" % type(mod).__name__)
    onednn = mode == "LSTM" and _lstm_uses_onednn(mod, x)
    if onednn and x.dtype != torch.float32:
        raise Unsupported("nn.LSTM in %s on the CPU under torch 2.x (oneDNN's %s LSTM is not modelled)"
                          % (dtype_name(x.dtype), dtype_name(x.dtype)))
    e = _Emit(cx, path)
    dirs = 2 if mod.bidirectional else 1
    B = x.shape[0] if mod.batch_first else x.shape[1]
    H = mod.hidden_size
    Hr = getattr(mod, "proj_size", 0) or H
    # RNNBase.forward: zeros initial states (LSTM: h and c)
    zeros = lambda size, hint: e.op("full", [], {"shape": [mod.num_layers * dirs, B, size], "dtype": dtype_name(x.dtype)},
                                    shape=(mod.num_layers * dirs, B, size), dtype=x.dtype, hint=hint)
    if hx is None:
        h0 = zeros(Hr, "h0")
        c0 = zeros(H, "c0") if mode == "LSTM" else None
    else:  # the caller's states (permute_hidden leaves them as they are without a PackedSequence)
        h0, c0 = (T(hx[0]), T(hx[1])) if mode == "LSTM" else (T(hx), None)
    args = [x, h0, c0]
    if onednn:
        out, hy, cy = _onednn_lstm(cx, e, mod, x, h0, c0)
        cx.keep_alive(args)
        return out, (hy, cy)
    seq = e.op("transpose", [x], {"dim0": 0, "dim1": 1}, shape=(x.shape[1], x.shape[0], x.shape[2]),
               hint="batch_first") if mod.batch_first else x
    hs = _unbind(e, h0, "h0_layers")
    cs = _unbind(e, c0, "c0_layers") if c0 is not None else None
    hidden = [(hs[i], cs[i]) if cs else hs[i] for i in range(len(hs))]
    layer_input, finals = seq, []
    for l in range(mod.num_layers):
        h = "l%d." % l
        ps = [_params(cx, mod, l, "")] + ([_params(cx, mod, l, "_reverse")] if dirs == 2 else [])
        if dirs == 2:
            out, fin = _bidirectional(e, mode, layer_input, hidden[2 * l:2 * l + 2], ps, h)
            finals += list(fin)
        else:
            out, fin = _direction(e, mode, layer_input, hidden[l], ps[0], h, False)
            finals.append(fin)
        layer_input = out
        if mod.dropout and mod.training and l < mod.num_layers - 1:
            layer_input = e.op("dropout", [layer_input], {"p": float(mod.dropout), "inplace": False,
                                                           "training": True}, shape=layer_input.shape, hint=h + "drop")
    hy = _stack(e, [f[0] if mode == "LSTM" else f for f in finals], "h_n")
    cy = _stack(e, [f[1] for f in finals], "c_n") if mode == "LSTM" else None
    cx.keep_alive([finals])  # lstm_impl's hy / cy vectors live until both stacks are made
    out = layer_input
    if mod.batch_first:
        out = e.op("transpose", [out], {"dim0": 0, "dim1": 1}, shape=(out.shape[1], out.shape[0], out.shape[2]),
                   hint="out_batch_first")
    cx.keep_alive(args)
    return (out, (hy, cy)) if mode == "LSTM" else (out, hy)


def _onednn_lstm(cx, e, mod, x, h0, c0):
    """RNN.cpp (2.x) lstm_mkldnn -> mkldnn_rnn: (output, hy, cy)."""
    dirs = 2 if mod.bidirectional else 1
    seq = x
    if mod.batch_first:
        seq = e.op("transpose", [x], {"dim0": 0, "dim1": 1}, shape=(x.shape[1], x.shape[0], x.shape[2]),
                   hint="batch_first")
    seq = e.op("contiguous", [seq], shape=seq.shape, hint="input")  # a copy of a transposed input
    T, B, H = seq.shape[0], seq.shape[1], mod.hidden_size
    layer_input, hys, cys, outs = seq, [], [], []
    for l in range(mod.num_layers):
        outs = []
        for d in range(dirs):
            index, h = l * dirs + d, "l%d%s." % (l, "_reverse" if d else "")
            p = _params(cx, mod, l, "_reverse" if d else "")
            hx = e.op("select", [h0], {"dim": 0, "index": index}, shape=(B, H), hint=h + "hx")
            cx_ = e.op("select", [c0], {"dim": 0, "index": index}, shape=(B, H), hint=h + "cx")
            b_ih, b_hh = p["b_ih"], p["b_hh"]
            if b_ih is None:  # at::zeros of the weights' sizes, the later argument made first
                zeros = lambda w, n: e.op("full", [], {"shape": list(w.shape), "dtype": dtype_name(w.dtype)},
                                          shape=tuple(w.shape), dtype=w.dtype, hint=h + n)
                b_hh = zeros(p["w_hh"], "zeros_hh")
                b_ih = zeros(p["w_ih"], "zeros_ih")
            out, hy, cy = e.op("mkldnn_rnn_layer", [layer_input, p["w_ih"], p["w_hh"], b_ih, b_hh, hx, cx_],
                               {"reverse": bool(d), "hidden_size": H, "has_biases": p["b_ih"] is not None},
                               shapes=[(T, B, H), (B, H), (B, H)], hint=h + "lstm")
            outs.append(out)
            hys.append(hy)
            cys.append(cy)
        layer_input = outs[0] if dirs == 1 else e.op("cat", outs, {"dim": 2}, shape=(T, B, dirs * H), hint="l%d.cat" % l)
        if mod.dropout and mod.training and l < mod.num_layers - 1:
            layer_input = e.op("dropout", [layer_input], {"p": float(mod.dropout), "inplace": False, "training": True},
                               shape=layer_input.shape, hint="l%d.drop" % l)
    hy = _stack(e, hys, "h_n")
    cy = _stack(e, cys, "c_n")
    out = layer_input
    if mod.batch_first:
        out = e.op("transpose", [out], {"dim0": 0, "dim1": 1}, shape=(B, T, out.shape[2]), hint="out_batch_first")
    cx.keep_alive([seq, outs, hys, cys])  # mkldnn_rnn's locals until it returns
    return out, hy, cy


@module(nn.RNN, nn.LSTM, nn.GRU)
def m_rnn(cx, mod, path, x, hx=None):
    return rnn_forward(cx, mod, path, x, hx)


@module(nn.RNNCell, nn.LSTMCell, nn.GRUCell)
def m_rnn_cell(cx, mod, path, x, hx=None):
    """_VF.lstm_cell / gru_cell / rnn_tanh_cell / rnn_relu_cell: RNN.cpp's cells without pre_compute_input."""
    x = T(x)
    if x.ndim != 2:
        raise Unsupported("nn.%s with an unbatched (1-D) input" % type(mod).__name__)
    e = _Emit(cx, path)
    B, H = x.shape[0], mod.hidden_size
    kind = {nn.LSTMCell: "LSTM", nn.GRUCell: "GRU"}.get(type(mod))
    kind = kind or ("RNN_TANH" if mod.nonlinearity == "tanh" else "RNN_RELU")
    if hx is None:  # one zeros tensor, the LSTMCell's h and c both
        z = e.op("full", [], {"shape": [B, H], "dtype": dtype_name(x.dtype)}, shape=(B, H), dtype=x.dtype, hint="h0")
        hidden = (z, z) if kind == "LSTM" else z
    elif kind == "LSTM":
        hidden = (T(hx[0]), T(hx[1]))
    else:
        hidden = T(hx)
    p = {"w_ih": cx.param(mod.weight_ih), "w_hh": cx.param(mod.weight_hh), "b_ih": cx.param(mod.bias_ih),
         "b_hh": cx.param(mod.bias_hh)}
    cell, _ = _cell_fn(kind)
    out = cell(e, lambda: e.linear(x, p["w_ih"], p["b_ih"], "ih"), hidden, p, "")
    cx.keep_alive([x, hidden])
    return out
