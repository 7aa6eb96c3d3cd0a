"""The recurrent layers' expansion (Note [Recurrent layers]): nn.RNN / nn.LSTM / nn.GRU and the Cell
modules become the ATen ops RNN.cpp runs on the CPU, per layer, direction and step."""
import unittest
from collections import Counter

import torch
import torch.nn as nn

from export_util import check_well_formed, ops_of

import op_models
from memsim_export import export_model


class Seq(nn.Module):
    def __init__(s, rnn, last=None):
        super().__init__(); s.rnn = rnn; s.fc = nn.Linear(last or rnn.hidden_size * (2 if rnn.bidirectional else 1), 4)

    def forward(s, x):
        out, _ = s.rnn(x)
        return s.fc(out[:, -1] if s.rnn.batch_first else out[-1])


def export_seq(rnn, T=3, I=5, **kw):
    shape = "batch,%d,%d" % (T, I) if rnn.batch_first else "%d,batch,%d" % (T, I)
    return export_model(Seq(rnn, **kw), [shape], name="rnn")


def rnn_ops(g):
    return [o for o in g["ops"] if o.get("module") == "rnn"]


def names(ops):
    return [o["op"] for o in ops]


class RecurrentLayers(unittest.TestCase):
    def test_lstm_step(self):
        g = export_seq(nn.LSTM(5, 4, batch_first=True), T=2)
        check_well_formed(self, g)
        step = ["linear", "add", "chunk", "sigmoid", "sigmoid", "tanh", "sigmoid", "mul", "mul", "add", "tanh", "mul"]
        self.assertEqual(names(rnn_ops(g)), ["full", "full", "transpose", "unbind", "unbind", "linear", "unbind"]
                         + step * 2 + ["stack", "stack", "stack", "transpose"])
        gates = [o for o in rnn_ops(g) if o["op"] in ("sigmoid", "tanh") and o["attrs"].get("inplace")]
        self.assertEqual(len(gates), 8)
        self.assertTrue(all(o["attrs"]["inplace_fixed"] for o in gates))
        ih = [o for o in rnn_ops(g) if o["op"] == "linear"]
        self.assertEqual(ih[0]["inputs"][1:], ["rnn.weight_ih_l0", "rnn.bias_ih_l0"])
        self.assertEqual(ih[1]["inputs"][1:], ["rnn.weight_hh_l0", "rnn.bias_hh_l0"])

    def test_gru_step(self):
        g = export_seq(nn.GRU(5, 4), T=1)
        self.assertEqual(names(rnn_ops(g))[2:], ["linear", "unbind", "chunk", "linear", "chunk", "add", "sigmoid", "add",
                                                 "sigmoid", "mul", "add", "tanh", "sub", "mul", "add", "stack", "stack"])

    def test_rnn_relu_layers_dropout_no_bias(self):
        g = export_seq(nn.RNN(5, 4, num_layers=2, nonlinearity="relu", dropout=0.5, bias=False), T=2)
        ops = rnn_ops(g)
        self.assertEqual(Counter(names(ops))["relu"], 4)
        self.assertEqual(len(ops_of(g, "dropout")), 1)
        self.assertTrue(all(len(o["inputs"]) == 2 for o in ops if o["op"] == "linear"))  # no bias
        drop = ops_of(g, "dropout")[0]
        self.assertEqual(drop["attrs"]["p"], 0.5)

    def test_bidirectional_order(self):
        g = export_seq(nn.GRU(5, 4, bidirectional=True, batch_first=True), T=3)
        lin = [o["inputs"][1] for o in rnn_ops(g) if o["op"] == "linear"]
        # forward projection, the 3 forward steps, the reverse projection, the 3 reverse steps
        self.assertEqual(lin, ["rnn.weight_ih_l0"] + ["rnn.weight_hh_l0"] * 3 + ["rnn.weight_ih_l0_reverse"]
                         + ["rnn.weight_hh_l0_reverse"] * 3)
        self.assertEqual(len(ops_of(g, "cat")), 1)

    def test_lstm_proj(self):
        g = export_seq(nn.LSTM(5, 6, proj_size=3, bias=False), T=2, last=3)
        ops = rnn_ops(g)
        self.assertEqual(len([o for o in ops if o["op"] == "matmul"]), 2)     # hy = matmul(hy, w_hr.t()) per step
        self.assertEqual([o["attrs"]["shape"][2] for o in ops if o["op"] == "full"], [3, 6])  # h0 of proj_size, c0

    def test_explicit_state(self):
        class WithState(nn.Module):
            def __init__(s):
                super().__init__(); s.rnn = nn.LSTM(5, 4, batch_first=True); s.h = nn.Linear(5, 4); s.c = nn.Linear(5, 4)

            def forward(s, x):  # the initial state from the first step
                h0 = s.h(x[:, 0]).unsqueeze(0)
                return s.rnn(x, (h0, s.c(x[:, 0]).unsqueeze(0)))[0].sum(1)
        g = export_model(WithState(), ["batch,3,5"], name="state")
        check_well_formed(self, g)
        self.assertEqual([o for o in rnn_ops(g) if o["op"] == "full"], [])
        unbinds = [o for o in rnn_ops(g) if o["op"] == "unbind"]
        self.assertEqual(len(unbinds), 3)  # h0, c0 per layer, then the projected sequence

    def test_cells(self):
        g = export_model(op_models.CellLoop(), ["batch,8,32"], name="cell_loop")
        check_well_formed(self, g)
        lstm = [o for o in g["ops"] if o.get("module") == "lstm"]
        # t = 0: one zeros tensor for h and c; linear_hh before linear_ih
        self.assertEqual(names(lstm)[:4], ["full", "linear", "linear", "add"])
        self.assertEqual(lstm[1]["inputs"][1], "lstm.weight_hh")
        gru = [o for o in g["ops"] if o.get("module") == "gru"]
        self.assertEqual(gru[1]["inputs"][1], "gru.weight_ih")  # GRUCell: linear_ih first
        self.assertEqual(len([o for o in g["ops"] if o.get("module") == "rnn" and o["op"] == "tanh"]), 8)


if __name__ == "__main__":
    unittest.main()
