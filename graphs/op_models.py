"""Small models that exercise the ops of the op-coverage traces (tests/data/traces_ops_2_13):
activations, padding / resampling / roll / repeat / casts, broadcast binary ops and losses, 3-D
convolution and pooling, upsample modes, vector norms, channel and alpha dropout.

Shared by the recording kit (tests/oracle/kit/trace_step.py imports it by name from graphs/) and
the exporter (``tools/export_torch.py graphs/op_models.py:NAME``): one definition, the same layers
in the same registration order. Each builder returns ``(module, input shape without the batch,
classes)``; the ``*_export`` builders give the exporter the module and its input spec.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def act_mlp_a():  # ELU family, softplus, mish, PReLU
    return nn.Sequential(nn.Linear(256, 128), nn.ELU(), nn.Linear(128, 128), nn.SELU(), nn.Linear(128, 128),
                         nn.CELU(0.5), nn.Linear(128, 128), nn.Softplus(), nn.Linear(128, 128), nn.Mish(),
                         nn.Linear(128, 128), nn.PReLU(), nn.Linear(128, 10)), (256,), 10


def act_mlp_b():  # bounded and shrinking activations, GLU
    return nn.Sequential(nn.Linear(256, 128), nn.Hardtanh(-2.0, 2.0), nn.Linear(128, 128), nn.Softsign(),
                         nn.Linear(128, 128), nn.LogSigmoid(), nn.Linear(128, 256), nn.GLU(), nn.Linear(128, 128),
                         nn.Hardshrink(), nn.Linear(128, 128), nn.Softshrink(), nn.Linear(128, 128), nn.Tanhshrink(),
                         nn.Linear(128, 10)), (256,), 10


class ClampAbs(nn.Module):  # torch.clamp with both bounds, with one, and abs
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 128); s.b = nn.Linear(128, 128); s.c = nn.Linear(128, 10)

    def forward(s, x):
        h = torch.clamp(s.a(x), -1.0, 1.0)
        h = s.b(h).clamp(min=-0.5).abs()
        return s.c(h)


class ScaleMlp(nn.Module):  # broadcast binary ops: a learned per-feature scale, a row-normalising div
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 128); s.scale = nn.Parameter(torch.ones(128)); s.b = nn.Linear(128, 10)

    def forward(s, x):
        h = s.a(x) * s.scale
        h = h / (h.abs().sum(-1, keepdim=True) + 1.0)
        return s.b(h)


class ResampleCnn(nn.Module):  # F.pad (constant, reflect, replicate), interpolate, roll, repeat, casts
    def __init__(s):
        super().__init__()
        # 16 channels: oneDNN's AVX-512 blocking then matches the 2.13 CPU convolution rules
        s.c1 = nn.Conv2d(3, 16, 3); s.c2 = nn.Conv2d(16, 16, 3); s.fc = nn.Linear(16 * 2 * 18 * 18, 10)

    def forward(s, x):  # one op per statement: `h` is rebound as each result dies (fx's last use)
        h = F.pad(x, (1, 1, 1, 1))                            # constant: 16 -> 18
        h = F.pad(h, (1, 1, 1, 1), mode="reflect")            # 20
        h = s.c1(h)                                           # 18
        h = F.interpolate(h, scale_factor=2, mode="nearest")  # 36
        h = F.interpolate(h, size=(18, 18), mode="bilinear", align_corners=False)
        h = F.pad(h, (1, 1, 1, 1), mode="replicate")          # 20
        h = s.c2(h)                                           # 18
        h = torch.roll(h, shifts=1, dims=2)
        h = h.repeat(1, 2, 1, 1)
        h = h.double()
        h = h.float()
        return s.fc(h.flatten(1))


class Conv3dNet(nn.Module):  # conv3d, max/avg/adaptive 3-D pooling (a video-style block)
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv3d(3, 16, 3, padding=1); s.p1 = nn.MaxPool3d(2); s.c2 = nn.Conv3d(16, 16, 3, padding=1)
        s.p2 = nn.AvgPool3d(2); s.p3 = nn.AdaptiveAvgPool3d((1, 2, 2)); s.fc = nn.Linear(16 * 4, 10)

    def forward(s, x):  # [N, 3, 8, 16, 16]
        h = s.p1(torch.relu(s.c1(x)))    # 4, 8, 8
        h = s.p2(torch.relu(s.c2(h)))    # 2, 4, 4
        return s.fc(s.p3(h).flatten(1))  # 1, 2, 2


# LstmCls & co.: Notes [Recurrent layers] and [oneDNN LSTM]. DeconvNet: Note [Transposed convolution].
class DeconvNet(nn.Module):  # conv_transpose 1-D, 2-D, 3-D (a UNet-style decoder)
    def __init__(s):
        super().__init__()
        s.down = nn.Conv2d(3, 16, 3, stride=2, padding=1); s.up = nn.ConvTranspose2d(16, 16, 4, stride=2, padding=1)
        s.up1 = nn.ConvTranspose1d(16, 16, 3, stride=2, padding=1, output_padding=1)
        s.up3 = nn.ConvTranspose3d(16, 8, 2, stride=2); s.fc = nn.Linear(8 * 2 * 4 * 512, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = torch.relu(s.down(x))            # 16, 8, 8
        h = torch.relu(s.up(h))              # 16, 16, 16
        h = s.up1(h.flatten(2))              # 16, 512
        h = s.up3(h.view(h.shape[0], 16, 1, 2, 256))  # 8, 2, 4, 512
        return s.fc(h.flatten(1))


class DcganGen(nn.Module):  # a DCGAN-like generator: ConvTranspose2d (bias off) + BatchNorm2d + ReLU, 3 channels out
    def __init__(s):
        super().__init__()
        s.net = nn.Sequential(
            nn.ConvTranspose2d(32, 32, 4, 1, 0, bias=False), nn.BatchNorm2d(32), nn.ReLU(),   # 4
            nn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),   # 8
            nn.ConvTranspose2d(16, 3, 4, 2, 1), nn.Tanh())                                    # 16
        s.fc = nn.Linear(3 * 16 * 16, 10)

    def forward(s, x):  # [N, 32, 1, 1]
        return s.fc(s.net(x).flatten(1))


class Deconv1dNet(nn.Module):  # ConvTranspose1d with groups and output_padding; bias on and off
    def __init__(s):
        super().__init__()
        s.up1 = nn.ConvTranspose1d(32, 32, 5, stride=3, padding=2, output_padding=1, groups=2)
        s.up2 = nn.ConvTranspose1d(32, 16, 4, stride=2, padding=1, bias=False); s.fc = nn.Linear(16 * 190, 10)

    def forward(s, x):  # [N, 32, 32]
        h = torch.relu(s.up1(x))          # 32, 95
        return s.fc(s.up2(h).flatten(1))  # 16, 190


class Unet3d(nn.Module):  # a 3-D UNet block: conv3d, max_pool3d (indices), conv_transpose3d, a skip, avg and adaptive pools
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv3d(3, 16, 3, padding=1); s.c2 = nn.Conv3d(16, 32, 3, padding=1)
        s.up = nn.ConvTranspose3d(32, 16, 2, stride=2); s.c3 = nn.Conv3d(32, 16, 3, padding=1)
        s.p = nn.AdaptiveAvgPool3d((1, 2, 2)); s.fc = nn.Linear(16 * 4, 10)

    def forward(s, x):  # [N, 3, 8, 16, 16]
        skip = torch.relu(s.c1(x))
        h = torch.relu(s.c2(F.max_pool3d(skip, 2)))       # 32, 4, 8, 8
        h = torch.cat([skip, s.up(h)], 1)                 # 32, 8, 16, 16
        h = F.avg_pool3d(torch.relu(s.c3(h)), 2)          # 16, 4, 8, 8
        return s.fc(s.p(h).flatten(1))


def rrelu_mlp():  # nn.RReLU in training: rrelu_with_noise's noise (empty_like the input, saved)
    return nn.Sequential(nn.Linear(256, 128), nn.RReLU(), nn.Linear(128, 128), nn.RReLU(0.1, 0.4), nn.Linear(128, 10)), \
        (256,), 10


class EmbBagNet(nn.Module):  # nn.EmbeddingBag(mode="mean") over [batch, 8] ids (offset2bag, bag_size, max_indices)
    def __init__(s):
        super().__init__(); s.e = nn.EmbeddingBag(30522, 32, mode="mean"); s.fc = nn.Linear(32, 10)

    def forward(s, ids):
        return s.fc(s.e(ids))


def soft_margin(output, target):  # --loss soft_margin (export_torch.py --loss graphs/op_models.py:soft_margin)
    return F.soft_margin_loss(output, target)


def multi_margin(output, target):  # --loss multi_margin (export_torch.py --loss graphs/op_models.py:multi_margin)
    return F.multi_margin_loss(output, target)


def multilabel_margin(output, target):  # --loss multilabel_margin (int64 targets [batch, classes])
    return F.multilabel_margin_loss(output, target)


def sigmoid_mlp():  # probabilities for F.binary_cross_entropy (trace_step.py --loss bce)
    return nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10), nn.Sigmoid()), (256,), 10


class ResampleModes(nn.Module):  # interpolate bicubic / linear / trilinear / 1-D and 3-D nearest
    def __init__(s):
        super().__init__(); s.c = nn.Conv2d(3, 8, 3, padding=1); s.fc = nn.Linear(8 * 4 * 9 * 9, 10)

    def forward(s, x):  # [N, 3, 8, 8]
        h = F.interpolate(s.c(x), scale_factor=2, mode="bicubic", align_corners=False)  # 16, 16
        g = F.interpolate(h.flatten(2), size=162, mode="linear")                        # [N, 8, 162]
        g = F.interpolate(g, scale_factor=2, mode="nearest")                            # 324
        v = F.interpolate(g.view(g.shape[0], 8, 4, 9, 9), scale_factor=2, mode="trilinear")  # 8, 18, 18
        v = F.interpolate(v, size=(4, 9, 9), mode="nearest")
        return s.fc(v.flatten(1))


class NormMlp(nn.Module):  # F.normalize, Tensor.norm, torch.linalg.vector_norm
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 128); s.b = nn.Linear(128, 128); s.c = nn.Linear(128, 10)

    def forward(s, x):
        h = F.normalize(s.a(x), dim=-1)
        h = s.b(h)
        h = h * h.norm(dim=-1, keepdim=True)
        h = h - torch.linalg.vector_norm(h, ord=1, dim=-1, keepdim=True)
        return s.c(h)


class DropCnn(nn.Module):  # channel dropout (Dropout1d/2d/3d) and alpha dropout (AlphaDropout, FeatureAlphaDropout)
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 16, 3); s.d2 = nn.Dropout2d(0.2); s.d1 = nn.Dropout1d(0.3); s.d3 = nn.Dropout3d(0.25)
        s.fa = nn.FeatureAlphaDropout(0.2); s.fc1 = nn.Linear(16 * 14 * 14, 64); s.ad = nn.AlphaDropout(0.1)
        s.fc2 = nn.Linear(64, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = s.d2(torch.relu(s.c1(x)))                 # [N, 16, 14, 14]
        h = s.d1(h.flatten(2))                        # [N, 16, 196]
        h = s.d3(h.view(h.shape[0], 16, 1, 14, 14))   # [N, 16, 1, 14, 14]
        h = s.fa(h)
        h = s.ad(torch.selu(s.fc1(h.flatten(1))))
        return s.fc2(h)


class LstmCls(nn.Module):  # nn.LSTM (2 layers) over a sequence, classifier on the last step
    def __init__(s, cell=nn.LSTM):
        super().__init__(); s.rnn = cell(32, 64, num_layers=2, batch_first=True); s.fc = nn.Linear(64, 10)

    def forward(s, x):  # [N, 16, 32]
        out, _ = s.rnn(x)
        return s.fc(out[:, -1])


class EmbLstmCls(nn.Module):  # embedding -> nn.LSTM (2 layers, dropout between them) -> linear on the last step
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(30522, 32)
        s.rnn = nn.LSTM(32, 64, num_layers=2, batch_first=True, dropout=0.25); s.fc = nn.Linear(64, 10)

    def forward(s, ids):  # [N, 32]
        out, _ = s.rnn(s.emb(ids))
        return s.fc(out[:, -1])


class BiGruTagger(nn.Module):  # embedding -> bidirectional GRU -> per-token scores, summed over the sequence
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(30522, 32)
        s.rnn = nn.GRU(32, 48, batch_first=True, bidirectional=True); s.tag = nn.Linear(96, 10)

    def forward(s, ids):  # [N, 32]
        out, _ = s.rnn(s.emb(ids))
        return s.tag(out).sum(1)


class CharRnn(nn.Module):  # a char-RNN: embedding, time-major ReLU nn.RNN (2 layers, dropout), bias-free LSTM
    def __init__(s):      # with proj_size, the next-char scores of the last step
        super().__init__(); s.emb = nn.Embedding(30522, 16)
        s.rnn = nn.RNN(16, 48, num_layers=2, nonlinearity="relu", dropout=0.1)
        s.lstm = nn.LSTM(48, 40, bias=False, proj_size=24); s.fc = nn.Linear(24, 10)

    def forward(s, ids):  # [N, 32]
        h = s.rnn(s.emb(ids).transpose(0, 1))[0]  # [0]: h_n dies at once (a name `_` would keep it)
        h = s.lstm(h)[0]
        return s.fc(h[-1])


class BiLstmTagger(nn.Module):  # embedding, time-major bidirectional bias-free nn.LSTM (2 layers, dropout); the
    def __init__(s):            # last step's output and the last h_n feed the classifier (c_n unused)
        super().__init__(); s.emb = nn.Embedding(30522, 24)
        s.lstm = nn.LSTM(24, 40, num_layers=2, bidirectional=True, bias=False, dropout=0.2); s.fc = nn.Linear(120, 10)

    def forward(s, ids):  # [N, 32]
        out, (h, c) = s.lstm(s.emb(ids).transpose(0, 1))
        return s.fc(torch.cat([out[-1], h[-1]], 1))


class CellLoop(nn.Module):  # LSTMCell, GRUCell and a tanh RNNCell stepped in Python over the sequence
    def __init__(s):
        super().__init__(); s.lstm = nn.LSTMCell(32, 48); s.gru = nn.GRUCell(48, 40)
        s.rnn = nn.RNNCell(40, 32, bias=False); s.fc = nn.Linear(32, 10)

    def forward(s, x):  # [N, 8, 32]
        h = c = g = r = None
        for t in range(8):  # the sequence length, fixed (fx traces the loop unrolled)
            h, c = s.lstm(x[:, t]) if t == 0 else s.lstm(x[:, t], (h, c))
            g = s.gru(h) if t == 0 else s.gru(h, g)
            r = s.rnn(g) if t == 0 else s.rnn(g, r)
        return s.fc(r)


class SliceAssign(nn.Module):  # slice assignment and in-place writes into views (CopySlices), index_put_
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 128); s.b = nn.Linear(256, 64); s.e = nn.Linear(256, 32)
        s.c = nn.Linear(256, 10)

    def forward(s, x):  # [N, 256]
        h = s.a(x)                                  # [N, 128]
        g = s.b(x)                                  # [N, 64]
        h[:, 32:96] = g                             # copy_ into a slice of a tensor with history
        h[:, :8] = 0.0                              # fill_ of a slice
        h[:, 100:].masked_fill_(g[:, :28] > 1.0, 1.0)  # masked_fill_ on a view
        h[:, torch.arange(0, h.shape[1], 4)] = s.e(x)  # index_put_ (2.x: on h itself; 1.13: on a whole-slice view)
        z = torch.zeros(x.shape[0], 2, 128)         # a buffer without history
        z[:, 1] = torch.tanh(h)                     # copy_ into a select view of it
        z[:, 0, ::2] = g                            # strided slice of a select
        return s.c(z.flatten(1))


class AdaptiveMaxNet(nn.Module):  # nn.AdaptiveMaxPool1d/2d/3d on one activation (each keeps it and its indices)
    def __init__(s):
        super().__init__()
        # 16 output channels: oneDNN's AVX-512 blocking of 8 is a known conv gap (grid_net)
        s.c = nn.Conv2d(3, 16, 3, padding=1); s.p2 = nn.AdaptiveMaxPool2d((5, 7)); s.p1 = nn.AdaptiveMaxPool1d(6)
        s.p3 = nn.AdaptiveMaxPool3d((2, 3, 3)); s.fc = nn.Linear(16 * 5 * 7 + 16 * 6 + 2 * 3 * 3, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = torch.relu(s.c(x))                      # [N, 16, 16, 16]
        a = s.p2(h).flatten(1)                      # [N, 560]
        b = s.p1(h.flatten(2)).flatten(1)           # [N, 16, 256] -> [N, 96]
        c = s.p3(h.unsqueeze(1)).flatten(1)         # [N, 1, 16, 16, 16] -> [N, 18]
        return s.fc(torch.cat([a, b, c], 1))


class MaskWrite(nn.Module):  # x[mask] = number / tensor (index_put_ with a bool mask), masked_scatter_
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 128); s.b = nn.Linear(256, 128); s.e = nn.Linear(256, 32)
        s.c = nn.Linear(128, 10)
        s.register_buffer("cols", torch.arange(128) % 4 == 0)  # 32 of 128 columns

    def forward(s, x):  # [N, 256]
        h = s.a(x)                                  # [N, 128]
        g = s.b(x)
        h[g > 0.5] = 0.0                            # a bool mask and a number: masked_fill_
        h[s.cols.expand_as(h)] = s.e(x).flatten()   # a bool mask and a tensor: index_put_ (nonzero)
        h.masked_scatter_(s.cols.expand_as(h), torch.tanh(g[:, :32]))  # masked_scatter_
        return s.c(h)


class UnfoldNet(nn.Module):  # nn.Unfold / F.fold (im2col / col2im), Tensor.unfold (a sliding-window view)
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(3, 8, 3, padding=1); s.un = nn.Unfold(kernel_size=2, stride=2); s.fc = nn.Linear(8 * 31 * 16, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        p = s.un(s.c(x))                                                # [N, 32, 64]
        h = F.fold(torch.tanh(p), output_size=(16, 16), kernel_size=2, stride=2)  # [N, 8, 16, 16]
        w = h.flatten(2).unfold(2, 16, 8)                               # [N, 8, 31, 16]
        return s.fc(w.flatten(1))


class GridNet(nn.Module):  # a spatial transformer: affine_grid, grid_sample (bilinear, nearest); circular pad
    def __init__(s):
        # 16 channels: oneDNN's AVX-512 blocking then matches the 2.13 CPU convolution rules (as ResampleCnn)
        super().__init__(); s.loc = nn.Linear(3 * 16 * 16, 6); s.c = nn.Conv2d(3, 16, 3); s.fc = nn.Linear(16 * 16 * 16, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        theta = s.loc(x.flatten(1)).view(-1, 2, 3)
        grid = F.affine_grid(theta, [x.shape[0], 3, 16, 16], align_corners=False)  # [N, 16, 16, 2]
        h = F.grid_sample(x, grid, mode="bilinear", align_corners=False)            # [N, 3, 16, 16]
        h = F.pad(h, (1, 1, 1, 1), mode="circular")  # one op per statement: `h` dies as fx's last use says
        h = s.c(h)                                                                  # [N, 16, 16, 16]
        h = F.grid_sample(h, grid, mode="nearest", align_corners=False)
        return s.fc(h.flatten(1))


class CircPadCnn(nn.Module):  # F.pad(mode="circular"): ATen's composite of copies into slices of a new tensor
    def __init__(s):
        super().__init__(); s.c1 = nn.Conv2d(3, 16, 3); s.c2 = nn.Conv2d(16, 16, 3); s.fc = nn.Linear(16 * 14 * 14, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = s.c1(x)                                   # 14
        h = F.pad(h, (1, 2, 2, 1), mode="circular")   # 17
        h = torch.relu(s.c2(h))                       # 15
        h = F.pad(h, (0, 1, 0, 0), mode="circular")   # [N, 16, 15, 16]: one pad
        return s.fc(h[:, :, 1:, 2:].flatten(1))       # 14, 14


class MhaSelfNet(nn.Module):  # nn.MultiheadAttention self-attention (batch_first): under 2.x the CPU flash
    def __init__(s):           # output takes the query's [L, N·H, E] layout, so its permute is contiguous
        super().__init__(); s.q = nn.Linear(16, 32)
        s.attn = nn.MultiheadAttention(32, 4, batch_first=True); s.fc = nn.Linear(32, 10)

    def forward(s, x):  # [N, 8, 16]
        q = s.q(x)
        o, _ = s.attn(q, q, q, need_weights=False)
        return s.fc(o.mean(1))


class MhaCrossNet(nn.Module):  # nn.MultiheadAttention encoder-decoder attention (key is value): the
    def __init__(s):            # in-projection's w.split([E, 2E]) and the packed k/v's contiguous copy
        super().__init__(); s.q = nn.Linear(16, 32); s.kv = nn.Linear(16, 32)
        s.attn = nn.MultiheadAttention(32, 4, batch_first=True); s.fc = nn.Linear(32, 10)

    def forward(s, x):  # [N, 8, 16]
        q, kv = s.q(x), s.kv(x.flip(1))
        o, _ = s.attn(q, kv, kv, need_weights=False)
        return s.fc(o.mean(1))


class MhaDistinctNet(nn.Module):  # nn.MultiheadAttention with distinct query, key and value: w.chunk(3)
    def __init__(s):
        super().__init__(); s.q = nn.Linear(16, 32); s.k = nn.Linear(16, 32); s.v = nn.Linear(16, 32)
        s.attn = nn.MultiheadAttention(32, 4, batch_first=True); s.fc = nn.Linear(32, 10)

    def forward(s, x):  # [N, 8, 16]
        o, _ = s.attn(s.q(x), s.k(x), s.v(x), need_weights=False)
        return s.fc(o.mean(1))


class TransformerNet(nn.Module):  # nn.Transformer (1 encoder + 1 decoder layer, batch_first) with a causal
    def __init__(s):               # float target mask: self-attention, encoder-decoder attention, norms
        super().__init__(); s.src = nn.Linear(16, 32); s.tgt = nn.Linear(16, 32)
        s.t = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64,
                             dropout=0.0, batch_first=True)
        s.register_buffer("mask", torch.triu(torch.full((8, 8), float("-inf")), diagonal=1), persistent=False)
        s.fc = nn.Linear(32, 10)

    def forward(s, x):  # [N, 8, 16]
        o = s.t(s.src(x), s.tgt(x.flip(1)), tgt_mask=s.mask)
        return s.fc(o.mean(1))


class Pool1dNet(nn.Module):  # 1-D pooling (ATen's unsqueeze / 2-D kernel / squeeze composites) and tensor_split
    def __init__(s):
        super().__init__()
        s.c = nn.Conv1d(4, 16, 3, padding=1); s.mp = nn.MaxPool1d(2); s.ap = nn.AvgPool1d(3, stride=2, padding=1)
        s.aap = nn.AdaptiveAvgPool1d(4); s.fc = nn.Linear(16 * 8 + 16 * 4 + 16 + 16 * 15, 10)

    def forward(s, x):  # [N, 4, 32]
        h = s.mp(torch.relu(s.c(x)))                  # [N, 16, 16]
        cls, rest = torch.tensor_split(h, (1,), dim=2)  # [N, 16, 1], [N, 16, 15] (torchvision MViT's _Pool)
        return s.fc(torch.cat([s.ap(h).flatten(1), s.aap(h).flatten(1), cls.flatten(1), rest.flatten(1)], 1))


class InstNormNet(nn.Module):  # nn.InstanceNorm2d plain and affine with running stats; torchvision's stochastic depth spelled out
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 16, 3, padding=1); s.n1 = nn.InstanceNorm2d(16)
        s.c2 = nn.Conv2d(16, 16, 3, padding=1); s.n2 = nn.InstanceNorm2d(16, affine=True, track_running_stats=True)
        s.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = torch.relu(s.n1(s.c1(x)))
        h = torch.relu(s.n2(s.c2(h)))
        noise = torch.empty([h.shape[0], 1, 1, 1], dtype=h.dtype, device=h.device)  # torchvision.ops.stochastic_depth
        noise = noise.bernoulli_(0.9)
        noise.div_(0.9)
        return s.fc(F.max_pool2d(h * noise, 2).flatten(1))


class UnpoolNet(nn.Module):  # nn.MaxPool1d/2d/3d(return_indices=True) into nn.MaxUnpool1d/2d/3d
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(3, 16, 3, padding=1); s.p2 = nn.MaxPool2d(2, return_indices=True); s.u2 = nn.MaxUnpool2d(2)
        s.p1 = nn.MaxPool1d(2, return_indices=True); s.u1 = nn.MaxUnpool1d(2)
        s.p3 = nn.MaxPool3d(2, return_indices=True); s.u3 = nn.MaxUnpool3d(2); s.fc = nn.Linear(3 * 16 * 16 * 16, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = torch.relu(s.c(x))                      # [N, 16, 16, 16]
        y, i = s.p2(h)
        a = s.u2(y, i)                              # [N, 16, 16, 16]
        y1, i1 = s.p1(h.flatten(2))
        b = s.u1(y1, i1)                            # [N, 16, 256]
        y3, i3 = s.p3(h.unsqueeze(1))
        c = s.u3(y3, i3)                            # [N, 1, 16, 16, 16]
        return s.fc(torch.cat([a.flatten(1), b.flatten(1), c.flatten(1)], 1))


class FracPoolNet(nn.Module):  # nn.FractionalMaxPool2d (output_size) and 3d (output_ratio)
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(3, 16, 3, padding=1); s.p2 = nn.FractionalMaxPool2d(3, output_size=(10, 10))
        s.p3 = nn.FractionalMaxPool3d(2, output_ratio=0.5); s.fc = nn.Linear(16 * 10 * 10 + 8 * 8 * 8, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = torch.relu(s.c(x))                      # [N, 16, 16, 16]
        return s.fc(torch.cat([s.p2(h).flatten(1), s.p3(h.unsqueeze(1)).flatten(1)], 1))


class LpPoolNet(nn.Module):  # nn.LPPool1d and nn.LPPool2d (F.lp_pool: pow, avg_pool, sign * relu(abs), mul, pow)
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(3, 16, 3, padding=1); s.p2 = nn.LPPool2d(2, 2); s.p1 = nn.LPPool1d(3, 4, stride=2)
        s.fc = nn.Linear(16 * 8 * 8 + 16 * 127, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = torch.relu(s.c(x))                      # [N, 16, 16, 16]
        return s.fc(torch.cat([s.p2(h).flatten(1), s.p1(h.flatten(2)).flatten(1)], 1))


class EmbBagSumMaxNet(nn.Module):  # nn.EmbeddingBag modes sum and max over [batch, 8] ids
    def __init__(s):
        super().__init__()
        s.es = nn.EmbeddingBag(30522, 32, mode="sum"); s.em = nn.EmbeddingBag(30522, 32, mode="max")
        s.fc = nn.Linear(64, 10)

    def forward(s, ids):
        return s.fc(torch.cat([s.es(ids), s.em(ids)], 1))


class MiscMathNet(nn.Module):  # nn.Threshold, torch.flip, torch.maximum, torch.var (dim and whole)
    def __init__(s):
        super().__init__(); s.f1 = nn.Linear(256, 128); s.th = nn.Threshold(0.1, 0.0); s.f2 = nn.Linear(129, 10)

    def forward(s, x):  # [N, 256]
        h = s.th(s.f1(x))
        m = torch.maximum(h, torch.flip(h, (1,)))
        return s.f2(torch.cat([m, m.var(1, keepdim=True)], 1)) * m.var()


class PixelShuffleNet(nn.Module):  # nn.PixelShuffle and nn.PixelUnshuffle between convolutions
    def __init__(s):  # (16-channel convolutions: oneDNN pads fewer output channels, not modelled)
        super().__init__()
        s.c1 = nn.Conv2d(3, 64, 3, padding=1); s.ps = nn.PixelShuffle(2); s.c2 = nn.Conv2d(16, 16, 3, padding=1)
        s.pu = nn.PixelUnshuffle(2); s.fc = nn.Linear(64 * 16 * 16, 10)

    def forward(s, x):  # [N, 3, 16, 16] -> [N, 16, 32, 32] -> [N, 64, 16, 16]
        return s.fc(s.pu(s.c2(s.ps(s.c1(x)))).flatten(1))


class BilinearNet(nn.Module):  # nn.Bilinear (aten::bilinear: _trilinear, then + bias) of two projections
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 32); s.b = nn.Linear(256, 24); s.bl = nn.Bilinear(32, 24, 10)

    def forward(s, x):  # [N, 256]
        return s.bl(torch.relu(s.a(x)), torch.relu(s.b(x)))


class ChannelShuffleNet(nn.Module):  # nn.ChannelShuffle (aten::channel_shuffle) between convolutions
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 16, 3, padding=1); s.cs = nn.ChannelShuffle(4); s.c2 = nn.Conv2d(16, 16, 3, padding=1)
        s.fc = nn.Linear(16 * 16 * 16, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        return s.fc(s.c2(s.cs(s.c1(x))).flatten(1))


class CrossMapLrnNet(nn.Module):  # nn.CrossMapLRN2d (torch's own autograd.Function _cross_map_lrn2d)
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 16, 3, padding=1); s.lrn = nn.CrossMapLRN2d(5, 1e-4, 0.75, 1.0)
        s.fc = nn.Linear(16 * 16 * 16, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        return s.fc(s.lrn(s.c1(x)).flatten(1))


class Drop3dNet(nn.Module):  # nn.Dropout3d of a 4-D input (unsqueezed: one draw per sample) and of a 5-D one
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(3, 16, 3, padding=1); s.d = nn.Dropout3d(0.3); s.fc = nn.Linear(2 * 16 * 16 * 16, 10)

    def forward(s, x):  # [N, 3, 16, 16]
        h = torch.relu(s.c(x))                      # [N, 16, 16, 16]
        return s.fc(torch.cat([s.d(h).flatten(1), s.d(h.unsqueeze(1)).flatten(1)], 1))
class PairLossMlp(nn.Module):  # embedding losses of C++ composites: cosine_embedding, hinge_embedding,
    # margin_ranking, triplet_margin (and with_distance: pairwise_distance), kl_div (xlogy), summed into the logits
    def __init__(s):
        super().__init__(); s.a = nn.Linear(32, 64); s.p = nn.Linear(64, 512); s.q = nn.Linear(64, 512)
        s.r = nn.Linear(64, 512); s.c = nn.Linear(64, 10)

    def forward(s, x):  # [N, 32]
        h = torch.relu(s.a(x))
        p, q, r = s.p(h), s.q(h), s.r(h)
        y = x.new_ones(x.shape[0])
        aux = F.cosine_embedding_loss(p, q, y) + F.hinge_embedding_loss(p - q, torch.ones_like(p))
        aux = aux + F.margin_ranking_loss(p.sum(1), q.sum(1), y) + F.triplet_margin_loss(p, q, r)
        aux = aux + F.triplet_margin_with_distance_loss(p, r, q)
        aux = aux + F.kl_div(F.log_softmax(p, -1), F.softmax(q, -1), reduction="batchmean")
        return s.c(h) + aux


class NllLossMlp(nn.Module):  # Python composites seen whole: gaussian_nll (its no-grad clamp_ of var),
    # poisson_nll, multilabel_soft_margin (log_sigmoid_forward, rsub), summed into the logits
    def __init__(s):
        super().__init__(); s.a = nn.Linear(32, 64); s.p = nn.Linear(64, 512); s.q = nn.Linear(64, 512)
        s.r = nn.Linear(64, 512); s.c = nn.Linear(64, 10)

    def forward(s, x):  # [N, 32]
        h = torch.relu(s.a(x))
        p, q, r = s.p(h), s.q(h), s.r(h)
        aux = F.gaussian_nll_loss(p, q, r.exp()) + F.poisson_nll_loss(p, torch.sigmoid(q))
        aux = aux + F.multilabel_soft_margin_loss(r, torch.sigmoid(q))
        return s.c(h) + aux


class SimNet(nn.Module):  # nn.LocalResponseNorm (constant_pad_nd, avg_pool3d), nn.CosineSimilarity,
    # nn.PairwiseDistance (norm.ScalarOpt_dim), nn.Softmin
    def __init__(s):
        super().__init__()
        s.conv = nn.Conv2d(3, 8, 3, padding=1); s.lrn = nn.LocalResponseNorm(3)
        s.p = nn.Linear(8 * 8 * 8, 256); s.q = nn.Linear(8 * 8 * 8, 256)
        s.cos = nn.CosineSimilarity(); s.dist = nn.PairwiseDistance(); s.fc = nn.Linear(258, 10); s.smin = nn.Softmin(-1)

    def forward(s, x):  # [N, 3, 16, 16]
        h = F.max_pool2d(s.lrn(torch.relu(s.conv(x))), 2).flatten(1)  # [N, 512]
        p, q = s.p(h), s.q(h)
        z = torch.cat([p, s.cos(p, q).unsqueeze(1), s.dist(p, q).unsqueeze(1)], 1)
        return s.smin(s.fc(z))


MODELS = {
    "act_mlp_a": act_mlp_a, "act_mlp_b": act_mlp_b,
    "pair_loss_mlp": lambda: (PairLossMlp(), (32,), 10),
    "nll_loss_mlp": lambda: (NllLossMlp(), (32,), 10),
    "sim_net": lambda: (SimNet(), (3, 16, 16), 10),
    "lp_pool_net": lambda: (LpPoolNet(), (3, 16, 16), 10),
    "embbag_sum_max_net": lambda: (EmbBagSumMaxNet(), ("ids", 8), 10),
    "misc_math_net": lambda: (MiscMathNet(), (256,), 10),
    "pixel_shuffle_net": lambda: (PixelShuffleNet(), (3, 16, 16), 10),
    "bilinear_net": lambda: (BilinearNet(), (256,), 10),
    "channel_shuffle_net": lambda: (ChannelShuffleNet(), (3, 16, 16), 10),
    "cross_map_lrn_net": lambda: (CrossMapLrnNet(), (3, 16, 16), 10),
    "drop3d_net": lambda: (Drop3dNet(), (3, 16, 16), 10),
    "frac_pool_net": lambda: (FracPoolNet(), (3, 16, 16), 10),
    "unpool_net": lambda: (UnpoolNet(), (3, 16, 16), 10),
    "pool1d_net": lambda: (Pool1dNet(), (4, 32), 10),
    "inorm_net": lambda: (InstNormNet(), (3, 16, 16), 10),
    "mha_self_net": lambda: (MhaSelfNet(), (8, 16), 10),
    "mha_cross_net": lambda: (MhaCrossNet(), (8, 16), 10),
    "mha_distinct_net": lambda: (MhaDistinctNet(), (8, 16), 10),
    "transformer_net": lambda: (TransformerNet(), (8, 16), 10),
    "clamp_abs_mlp": lambda: (ClampAbs(), (256,), 10),
    "scale_mlp": lambda: (ScaleMlp(), (256,), 10),
    "resample_cnn": lambda: (ResampleCnn(), (3, 16, 16), 10),
    "conv3d_net": lambda: (Conv3dNet(), (3, 8, 16, 16), 10),
    "deconv_net": lambda: (DeconvNet(), (3, 16, 16), 10),
    "dcgan_gen": lambda: (DcganGen(), (32, 1, 1), 10),
    "deconv1d_net": lambda: (Deconv1dNet(), (32, 32), 10),
    "unet3d": lambda: (Unet3d(), (3, 8, 16, 16), 10),
    "sigmoid_mlp": sigmoid_mlp,
    "rrelu_mlp": rrelu_mlp,
    "embbag_net": lambda: (EmbBagNet(), ("ids", 8), 10),
    "resample_modes": lambda: (ResampleModes(), (3, 8, 8), 10),
    "norm_mlp": lambda: (NormMlp(), (256,), 10),
    "drop_cnn": lambda: (DropCnn(), (3, 16, 16), 10),
    "lstm_cls": lambda: (LstmCls(), (16, 32), 10),
    "gru_cls": lambda: (LstmCls(nn.GRU), (16, 32), 10),
    "rnn_cls": lambda: (LstmCls(nn.RNN), (16, 32), 10),
    "emb_lstm_cls": lambda: (EmbLstmCls(), ("ids", 32), 10),
    "bigru_tagger": lambda: (BiGruTagger(), ("ids", 32), 10),
    "char_rnn": lambda: (CharRnn(), ("ids", 32), 10),
    "cell_loop": lambda: (CellLoop(), (8, 32), 10),
    "bilstm_tagger": lambda: (BiLstmTagger(), ("ids", 32), 10),
    "slice_assign": lambda: (SliceAssign(), (256,), 10),
    "unfold_net": lambda: (UnfoldNet(), (3, 16, 16), 10),
    "grid_net": lambda: (GridNet(), (3, 16, 16), 10),
    "circ_pad_cnn": lambda: (CircPadCnn(), (3, 16, 16), 10),
    "adaptive_max_net": lambda: (AdaptiveMaxNet(), (3, 16, 16), 10),
    "mask_write": lambda: (MaskWrite(), (256,), 10),
}


def _exporter(name):
    def build():
        model, shape, _ = MODELS[name]()
        if shape[0] == "ids":  # token ids, as trace_step.py draws them
            return model, ["int64:batch,%d" % shape[1]]
        return model, ["batch," + ",".join(str(d) for d in shape)]
    return build


act_mlp_a_export = _exporter("act_mlp_a")
act_mlp_b_export = _exporter("act_mlp_b")
clamp_abs_mlp_export = _exporter("clamp_abs_mlp")
scale_mlp_export = _exporter("scale_mlp")
resample_cnn_export = _exporter("resample_cnn")
conv3d_net_export = _exporter("conv3d_net")
deconv_net_export = _exporter("deconv_net")
dcgan_gen_export = _exporter("dcgan_gen")
deconv1d_net_export = _exporter("deconv1d_net")
unet3d_export = _exporter("unet3d")
resample_modes_export = _exporter("resample_modes")
sigmoid_mlp_export = _exporter("sigmoid_mlp")
rrelu_mlp_export = _exporter("rrelu_mlp")
embbag_net_export = _exporter("embbag_net")
norm_mlp_export = _exporter("norm_mlp")
drop_cnn_export = _exporter("drop_cnn")
slice_assign_export = _exporter("slice_assign")
adaptive_max_net_export = _exporter("adaptive_max_net")
mask_write_export = _exporter("mask_write")
unfold_net_export = _exporter("unfold_net")
grid_net_export = _exporter("grid_net")
circ_pad_cnn_export = _exporter("circ_pad_cnn")
lstm_cls_export = _exporter("lstm_cls")
gru_cls_export = _exporter("gru_cls")
rnn_cls_export = _exporter("rnn_cls")
emb_lstm_cls_export = _exporter("emb_lstm_cls")
bigru_tagger_export = _exporter("bigru_tagger")
char_rnn_export = _exporter("char_rnn")
cell_loop_export = _exporter("cell_loop")
bilstm_tagger_export = _exporter("bilstm_tagger")
mha_self_net_export = _exporter("mha_self_net")
mha_cross_net_export = _exporter("mha_cross_net")
mha_distinct_net_export = _exporter("mha_distinct_net")
transformer_net_export = _exporter("transformer_net")
pool1d_net_export = _exporter("pool1d_net")
inorm_net_export = _exporter("inorm_net")
unpool_net_export = _exporter("unpool_net")
frac_pool_net_export = _exporter("frac_pool_net")
lp_pool_net_export = _exporter("lp_pool_net")
embbag_sum_max_net_export = _exporter("embbag_sum_max_net")
misc_math_net_export = _exporter("misc_math_net")
pixel_shuffle_net_export = _exporter("pixel_shuffle_net")
bilinear_net_export = _exporter("bilinear_net")
channel_shuffle_net_export = _exporter("channel_shuffle_net")
cross_map_lrn_net_export = _exporter("cross_map_lrn_net")
drop3d_net_export = _exporter("drop3d_net")
pair_loss_mlp_export = _exporter("pair_loss_mlp")
nll_loss_mlp_export = _exporter("nll_loss_mlp")
sim_net_export = _exporter("sim_net")
