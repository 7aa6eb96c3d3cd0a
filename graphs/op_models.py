"""Small models that exercise the ops of the op-coverage traces (tests/data/traces_ops_2_13):
activations, padding / resampling / roll / repeat / casts, broadcast binary ops and losses.

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


MODELS = {
    "act_mlp_a": act_mlp_a, "act_mlp_b": act_mlp_b,
    "clamp_abs_mlp": lambda: (ClampAbs(), (256,), 10),
    "scale_mlp": lambda: (ScaleMlp(), (256,), 10),
    "resample_cnn": lambda: (ResampleCnn(), (3, 16, 16), 10),
}


def _exporter(name):
    def build():
        model, shape, _ = MODELS[name]()
        return model, ["batch," + ",".join(str(d) for d in shape)]
    return build


act_mlp_a_export = _exporter("act_mlp_a")
act_mlp_b_export = _exporter("act_mlp_b")
clamp_abs_mlp_export = _exporter("clamp_abs_mlp")
scale_mlp_export = _exporter("scale_mlp")
resample_cnn_export = _exporter("resample_cnn")
