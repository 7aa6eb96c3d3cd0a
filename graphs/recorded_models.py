"""Small models built around ops memsim has no rule for, which the exporter measures as recorded
ops (Note [Recorded rules] in docs/op-rules.md): torch.special functions, cumulative ops and a
user's torch.autograd.Function. Traced by tests/oracle/record_recorded.sh (the recording kit
imports this file by name from graphs/), exported with ``tools/export_torch.py
graphs/recorded_models.py:NAME_export``. Each builder returns ``(module, input shape without the
batch, classes)``.
"""
import torch
import torch.nn as nn


class SquaredRelu(torch.autograd.Function):
    """relu(x)² with its own backward: saves the input, keeps the mask as a ctx attribute."""

    @staticmethod
    def forward(ctx, x):
        mask = x > 0
        ctx.save_for_backward(x)
        ctx.mask = mask
        return x.clamp(min=0) ** 2

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2 * x * ctx.mask


class SpecialMlp(nn.Module):  # torch.special.erfcx, cumprod, logcumsumexp
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 256); s.b = nn.Linear(256, 256); s.c = nn.Linear(256, 10)

    def forward(s, x):
        h = torch.special.erfcx(s.a(x))
        h = torch.cumprod(torch.sigmoid(s.b(h)), dim=-1)
        return s.c(torch.logcumsumexp(h, dim=-1))


class CustomFnMlp(nn.Module):  # a user's autograd.Function, torch.special.i0e
    def __init__(s):
        super().__init__(); s.a = nn.Linear(256, 256); s.b = nn.Linear(256, 256); s.c = nn.Linear(256, 10)

    def forward(s, x):
        h = SquaredRelu.apply(s.a(x))
        return s.c(torch.special.i0e(s.b(h)))


class CumCnn(nn.Module):  # cummax (values and int64 indices), torch.special.log_ndtr on a feature map
    def __init__(s):
        super().__init__(); s.conv = nn.Conv2d(3, 16, 3, padding=1); s.fc = nn.Linear(16 * 16 * 16, 10)

    def forward(s, x):
        h = torch.cummax(s.conv(x), dim=2).values
        return s.fc(torch.special.log_ndtr(h).flatten(1))


MODELS = {
    "special_mlp": lambda: (SpecialMlp(), (256,), 10),
    "custom_fn_mlp": lambda: (CustomFnMlp(), (256,), 10),
    "cum_cnn": lambda: (CumCnn(), (3, 16, 16), 10),
}


def _exporter(name):
    def build():
        model, shape, _ = MODELS[name]()
        return model, ["batch," + ",".join(str(d) for d in shape)]
    return build


special_mlp_export = _exporter("special_mlp")
custom_fn_mlp_export = _exporter("custom_fn_mlp")
cum_cnn_export = _exporter("cum_cnn")
