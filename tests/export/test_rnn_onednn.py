"""nn.LSTM under torch 2.x on the CPU (Note [oneDNN LSTM]): RNN.cpp's mkldnn_rnn, one mkldnn_rnn_layer op
per layer and direction. Run with the torch 2.x venv (ctest export.rnn_onednn); skipped under 1.13, whose
nn.LSTM is the composite (test_rnn.py)."""
import unittest
from collections import Counter

import torch
import torch.nn as nn

from export_util import check_well_formed, ops_of

from memsim_export import export_model
from memsim_export.registry import Unsupported

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


class Seq(nn.Module):
    def __init__(s, rnn, use_h=False):
        super().__init__(); s.rnn = rnn; s.use_h = use_h
        s.fc = nn.Linear(rnn.hidden_size * (2 if rnn.bidirectional else 1) + (rnn.hidden_size if use_h else 0), 4)

    def forward(s, x):
        out, (h, c) = s.rnn(x)
        last = out[:, -1] if s.rnn.batch_first else out[-1]
        return s.fc(torch.cat([last, h[-1]], 1) if s.use_h else last)


def export_seq(rnn, T=3, I=5, **kw):
    shape = "batch,%d,%d" % (T, I) if rnn.batch_first else "%d,batch,%d" % (T, I)
    return export_model(Seq(rnn, **kw), [shape], name="rnn")


def rnn_ops(g):
    return [o for o in g["ops"] if o.get("module") == "rnn"]


@unittest.skipUnless(TORCH2, "nn.LSTM takes oneDNN under torch 2.x only")
class OneDnnLstm(unittest.TestCase):
    def test_batch_first_layer(self):
        g = export_seq(nn.LSTM(5, 4, batch_first=True))
        check_well_formed(self, g)
        self.assertEqual([o["op"] for o in rnn_ops(g)], ["full", "full", "transpose", "contiguous", "select", "select",
                                                         "mkldnn_rnn_layer", "stack", "stack", "transpose"])
        layer = ops_of(g, "mkldnn_rnn_layer")[0]
        self.assertEqual(layer["inputs"][1:5], ["rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0"])
        self.assertEqual(len(layer["outputs"]), 3)
        self.assertEqual(layer["attrs"], {"reverse": False, "hidden_size": 4, "has_biases": True})
        self.assertEqual(ops_of(g, "full")[0]["attrs"]["shape"], [1, "batch", 4])

    def test_bidirectional_layers_without_bias_and_dropout(self):
        g = export_seq(nn.LSTM(5, 4, num_layers=2, bidirectional=True, bias=False, dropout=0.5), use_h=True)
        check_well_formed(self, g)
        layers = ops_of(g, "mkldnn_rnn_layer")
        self.assertEqual([o["attrs"]["reverse"] for o in layers], [False, True, False, True])
        self.assertEqual([o["inputs"][5] for o in layers], ["rnn:l0.hx", "rnn:l0_reverse.hx", "rnn:l1.hx",
                                                            "rnn:l1_reverse.hx"])
        counts = Counter(o["op"] for o in rnn_ops(g))
        self.assertEqual(counts["cat"], 2)
        self.assertEqual(counts["dropout"], 1)
        # the bias slots: at::zeros of weight_hh's sizes made before weight_ih's
        zeros = [o["attrs"]["shape"] for o in rnn_ops(g) if o["op"] == "full"][2:]
        self.assertEqual(zeros[:2], [[16, 4], [16, 5]])
        self.assertEqual(zeros[4:6], [[16, 4], [16, 8]])  # layer 1 reads both directions: I = 8

    def test_bf16_is_refused(self):
        with self.assertRaisesRegex(Exception, "bfloat16 on the CPU under torch 2.x"):
            export_model(Seq(nn.LSTM(5, 4, batch_first=True).to(torch.bfloat16)), ["bfloat16:batch,3,5"], name="rnn")


if __name__ == "__main__":
    unittest.main()
