"""The cases tools/coverage.py tries: torchvision builders, torch.nn modules, functional ops and
Hugging Face architectures, each as (section, name, build, input specs, --loss).

``build()`` returns the nn.Module a user would pass to the exporter. A module or a functional op
alone has no parameter upstream of it, so its backward would never run: it is wrapped in
:class:`Probe`, which scales the input by a learnable scalar first (``f(x * w)``), as a layer
before it would. Loss modules return their scalar (``--loss output``); the others train with
``--loss mse`` against a target shaped like the output (cross_entropy for classifiers).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Probe(nn.Module):
    """f(x * w, *rest): a learnable scalar ahead of the op under test, so that its backward runs."""

    def __init__(self, f, scale=True):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))
        self.f = f
        self.scale = scale  # False: integer indices go in as they are (an embedding has its own weight)

    def forward(self, x, y=None, z=None):  # named arguments: the exporter matches inputs to them
        if self.scale:
            x = x * self.w
        return self.f(*[v for v in (x, y, z) if v is not None])


class Fn(nn.Module):
    """A functional op as a module (fx traces through it: the op appears as a call_function)."""

    def __init__(self, f):
        super().__init__()
        self.fn = f

    def forward(self, *xs):
        return self.fn(*xs)


# ---- torchvision --------------------------------------------------------------------------------

TV_SUBPACKAGES = ("classification", "segmentation", "video", "optical_flow", "detection")
TV_INPUT = {"classification": "batch,3,224,224", "segmentation": "batch,3,224,224",
            "video": "batch,3,16,112,112", "optical_flow": ["batch,3,128,128", "batch,3,128,128"],
            "detection": "batch,3,224,224"}
TV_SIZE = {"inception_v3": "batch,3,299,299", "s3d": "batch,3,16,224,224", "mvit_v1_b": "batch,3,16,224,224",
           "mvit_v2_s": "batch,3,16,224,224", "swin3d_t": "batch,3,16,224,224", "swin3d_s": "batch,3,16,224,224",
           "swin3d_b": "batch,3,16,224,224"}
TV_LOSS = {"classification": "cross_entropy", "video": "cross_entropy", "segmentation": "mse",
           "optical_flow": "mse", "detection": "output"}


def torchvision_cases():
    try:
        import torchvision
    except ImportError:
        return []
    m = torchvision.models
    out = []
    for name, f in sorted(m.__dict__.items()):
        _add_tv(out, name, f, "classification")
    for sub in TV_SUBPACKAGES[1:]:
        for name, f in sorted(getattr(m, sub).__dict__.items()):
            _add_tv(out, name, f, sub)
    return out


def _add_tv(out, name, f, sub):
    mod = getattr(f, "__module__", "") or ""
    if not callable(f) or not name.islower() or name.startswith("_") or isinstance(f, type):
        return
    if not mod.startswith("torchvision.models.") or mod.startswith("torchvision.models._"):
        return
    part = mod.split(".")[2]
    if sub == "classification":
        if part in ("detection", "segmentation", "video", "quantization", "optical_flow"):
            return
    elif part != sub:
        return
    inputs = TV_SIZE.get(name, TV_INPUT[sub])
    out.append(("torchvision " + sub, name, _tv_builder(f, sub), inputs if isinstance(inputs, list) else [inputs],
                TV_LOSS[sub]))


def _tv_builder(f, sub):
    if sub == "detection":  # images in, the summed losses out, synthetic targets (export_torch.py torchvision:NAME)
        from memsim_export import detection
        return lambda: detection.build(f)

    def build():
        kw = {"weights": None}
        if sub in ("detection", "segmentation"):
            kw["weights_backbone"] = None
        try:
            return f(**kw)
        except TypeError:  # torchvision < 0.13
            return f(pretrained=False)
    return build


# ---- torch.nn modules ---------------------------------------------------------------------------

IMG, SEQ, VEC, VOL = "batch,4,8,8", "batch,4,16", "batch,16", "batch,4,4,8,8"
# class name -> (constructor args, input specs, loss); classes not listed are built with no
# arguments on an IMG input and mse
NN_ARGS = {
    "AdaptiveAvgPool1d": ((2,), [SEQ]), "AdaptiveAvgPool2d": ((2,), [IMG]), "AdaptiveAvgPool3d": ((2,), [VOL]),
    "AdaptiveMaxPool1d": ((2,), [SEQ]), "AdaptiveMaxPool2d": ((2,), [IMG]), "AdaptiveMaxPool3d": ((2,), [VOL]),
    "AvgPool1d": ((2,), [SEQ]), "AvgPool2d": ((2,), [IMG]), "AvgPool3d": ((2,), [VOL]),
    "MaxPool1d": ((2,), [SEQ]), "MaxPool2d": ((2,), [IMG]), "MaxPool3d": ((2,), [VOL]),
    "LPPool1d": ((2, 2), [SEQ]), "LPPool2d": ((2, 2), [IMG]), "LPPool3d": ((2, 2), [VOL]),
    "RMSNorm": ((8,), [IMG]),
    "FractionalMaxPool2d": ((2,), [IMG], {"output_size": 4}), "FractionalMaxPool3d": ((2,), [VOL], {"output_size": 2}),
    "BatchNorm1d": ((4,), [SEQ]), "BatchNorm2d": ((4,), [IMG]), "BatchNorm3d": ((4,), [VOL]),
    "InstanceNorm1d": ((4,), [SEQ]), "InstanceNorm2d": ((4,), [IMG]), "InstanceNorm3d": ((4,), [VOL]),
    "LazyBatchNorm1d": ((), [SEQ]), "LazyBatchNorm2d": ((), [IMG]), "LazyBatchNorm3d": ((), [VOL]),
    "LazyInstanceNorm1d": ((), [SEQ]), "LazyInstanceNorm2d": ((), [IMG]), "LazyInstanceNorm3d": ((), [VOL]),
    "GroupNorm": ((2, 4), [IMG]), "LayerNorm": ((8,), [IMG]), "LocalResponseNorm": ((2,), [IMG]),
    "CrossMapLRN2d": ((2,), [IMG]), "SyncBatchNorm": ((4,), [IMG]),
    "Conv1d": ((4, 6, 3), [SEQ]), "Conv2d": ((4, 6, 3), [IMG]), "Conv3d": ((4, 6, 3), [VOL]),
    "ConvTranspose1d": ((4, 6, 3), [SEQ]), "ConvTranspose2d": ((4, 6, 3), [IMG]),
    "ConvTranspose3d": ((4, 6, 3), [VOL]),
    "LazyConv1d": ((6, 3), [SEQ]), "LazyConv2d": ((6, 3), [IMG]), "LazyConv3d": ((6, 3), [VOL]),
    "LazyConvTranspose1d": ((6, 3), [SEQ]), "LazyConvTranspose2d": ((6, 3), [IMG]),
    "LazyConvTranspose3d": ((6, 3), [VOL]),
    "Linear": ((16, 8), [VEC]), "LazyLinear": ((8,), [VEC]), "Bilinear": ((16, 16, 8), [VEC, VEC]),
    "Embedding": ((100, 8), ["int64:batch,16@0:100"]), "EmbeddingBag": ((100, 8), ["int64:batch,16@0:100"]),
    "RNN": ((16, 8), ["batch,5,16"], {"batch_first": True}), "LSTM": ((16, 8), ["batch,5,16"], {"batch_first": True}),
    "GRU": ((16, 8), ["batch,5,16"], {"batch_first": True}),
    "RNNCell": ((16, 8), [VEC]), "LSTMCell": ((16, 8), [VEC]), "GRUCell": ((16, 8), [VEC]),
    "MultiheadAttention": ((16, 4), ["batch,5,16", "batch,5,16", "batch,5,16"], {"batch_first": True}),
    "Transformer": ((), ["batch,5,16", "batch,5,16"], {"d_model": 16, "nhead": 4, "num_encoder_layers": 1,
                                                       "num_decoder_layers": 1, "dim_feedforward": 32,
                                                       "batch_first": True}),
    "TransformerEncoderLayer": ((16, 4, 32), ["batch,5,16"], {"batch_first": True}),
    "TransformerDecoderLayer": ((16, 4, 32), ["batch,5,16", "batch,5,16"], {"batch_first": True}),
    "Flatten": ((), [IMG]), "Unflatten": ((1, (2, 2)), [IMG]), "Fold": ((4, 2), ["batch,16,9"]),
    "Unfold": ((2,), [IMG]), "PixelShuffle": ((2,), [IMG]), "PixelUnshuffle": ((2,), [IMG]),
    "ChannelShuffle": ((2,), [IMG]), "Upsample": ((), [IMG], {"scale_factor": 2}),
    "UpsamplingBilinear2d": ((), [IMG], {"scale_factor": 2}), "UpsamplingNearest2d": ((), [IMG], {"scale_factor": 2}),
    "ConstantPad1d": ((1, 0.5), [SEQ]), "ConstantPad2d": ((1, 0.5), [IMG]), "ConstantPad3d": ((1, 0.5), [VOL]),
    "ReflectionPad1d": ((1,), [SEQ]), "ReflectionPad2d": ((1,), [IMG]), "ReflectionPad3d": ((1,), [VOL]),
    "ReplicationPad1d": ((1,), [SEQ]), "ReplicationPad2d": ((1,), [IMG]), "ReplicationPad3d": ((1,), [VOL]),
    "ZeroPad1d": ((1,), [SEQ]), "ZeroPad2d": ((1,), [IMG]), "ZeroPad3d": ((1,), [VOL]), "CircularPad1d": ((1,), [SEQ]),
    "CircularPad2d": ((1,), [IMG]), "CircularPad3d": ((1,), [VOL]),
    "Dropout1d": ((), [SEQ]),  # [N, C, L]: 1.13 refuses a 4-D input
    "MaxUnpool1d": ((2,), [SEQ]), "MaxUnpool2d": ((2,), [IMG]), "MaxUnpool3d": ((2,), [VOL]),
    "Threshold": ((0.1, 0.0), [IMG]), "Softmax": ((-1,), [IMG]), "Softmin": ((-1,), [IMG]),
    "LogSoftmax": ((-1,), [IMG]), "GLU": ((1,), [IMG]), "PReLU": ((4,), [IMG]),
    "CosineSimilarity": ((), [VEC, VEC]), "PairwiseDistance": ((), [VEC, VEC]),
    "AdaptiveLogSoftmaxWithLoss": ((16, 20, [4, 8]), [VEC, "int64:batch@0:20"]),
}
# loss modules: (input specs) -> the module returns the scalar loss
NN_LOSSES = {
    "L1Loss": [VEC, VEC], "MSELoss": [VEC, VEC], "HuberLoss": [VEC, VEC], "SmoothL1Loss": [VEC, VEC],
    "BCELoss": None, "BCEWithLogitsLoss": [VEC, VEC], "CrossEntropyLoss": [VEC, "int64:batch@0:16"],
    "NLLLoss": [VEC, "int64:batch@0:16"], "NLLLoss2d": [IMG, "int64:batch,8,8@0:4"],
    "KLDivLoss": [VEC, VEC], "PoissonNLLLoss": [VEC, VEC], "GaussianNLLLoss": [VEC, VEC, VEC + "@1:2"],
    "SoftMarginLoss": [VEC, VEC], "MultiLabelSoftMarginLoss": [VEC, VEC], "MultiMarginLoss": [VEC, "int64:batch@0:16"],
    "MultiLabelMarginLoss": [VEC, "int64:batch,16@0:16"], "HingeEmbeddingLoss": [VEC, VEC],
    "CosineEmbeddingLoss": [VEC, VEC, "batch"], "MarginRankingLoss": [VEC, VEC, VEC],
    "TripletMarginLoss": [VEC, VEC, VEC], "TripletMarginWithDistanceLoss": [VEC, VEC, VEC],
    "CTCLoss": None,
}
NN_SKIP = {"Module", "Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
           "DataParallel", "RNNBase", "RNNCellBase", "TransformerEncoder", "TransformerDecoder"}


def nn_cases():
    out = []
    for name in sorted(dir(nn)):
        cls = getattr(nn, name)
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)) or name in NN_SKIP or name.startswith("_"):
            continue
        if name in NN_LOSSES:
            if NN_LOSSES[name] is None:
                continue  # BCELoss needs inputs in [0, 1], CTCLoss lengths: the functional list has them
            out.append(("torch.nn module", name, _nn_loss_builder(cls), NN_LOSSES[name], "output"))
            continue
        spec = NN_ARGS.get(name, ((), [IMG]))
        args, inputs, kw = (spec + ({},))[:3]
        out.append(("torch.nn module", name, _nn_builder(cls, args, kw, not inputs[0].startswith("int")), inputs, "mse"))
    return out


class _Unpool(nn.Module):
    """MaxUnpoolNd as models use it: on a MaxPoolNd(return_indices=True)'s output and indices."""

    def __init__(self, cls, k):
        super().__init__()
        self.pool = getattr(nn, cls.__name__.replace("Unpool", "Pool"))(k, return_indices=True)
        self.unpool = cls(k)

    def forward(self, x):
        return self.unpool(*self.pool(x))


def _nn_builder(cls, args, kw, scale):
    if cls.__name__.startswith("MaxUnpool"):
        return lambda: Probe(_Unpool(cls, *args), scale)
    return lambda: Probe(cls(*args, **kw), scale)


def _nn_loss_builder(cls):
    return lambda: Probe(cls())


# ---- functional ops -----------------------------------------------------------------------------

def _functional():
    """name -> (f(x) on the scaled input, input spec); ~70 ops a model's forward calls."""
    return {
        "F.relu": (F.relu, VEC), "F.gelu": (F.gelu, VEC), "F.gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), VEC),
        "F.silu": (F.silu, VEC), "F.mish": (F.mish, VEC), "F.elu": (F.elu, VEC), "F.selu": (F.selu, VEC),
        "F.celu": (F.celu, VEC), "F.softplus": (F.softplus, VEC), "F.leaky_relu": (F.leaky_relu, VEC),
        "F.hardtanh": (F.hardtanh, VEC), "F.relu6": (F.relu6, VEC), "F.hardswish": (F.hardswish, VEC),
        "F.hardsigmoid": (F.hardsigmoid, VEC), "F.logsigmoid": (F.logsigmoid, VEC), "F.softsign": (F.softsign, VEC),
        "F.tanhshrink": (F.tanhshrink, VEC), "F.hardshrink": (F.hardshrink, VEC), "F.softshrink": (F.softshrink, VEC),
        "F.glu": (F.glu, VEC), "F.rrelu": (F.rrelu, VEC), "torch.sigmoid": (torch.sigmoid, VEC),
        "torch.tanh": (torch.tanh, VEC), "torch.exp": (torch.exp, VEC), "torch.log": (lambda x: torch.log(x.abs() + 1), VEC),
        "torch.sqrt": (lambda x: torch.sqrt(x.abs()), VEC), "torch.rsqrt": (lambda x: torch.rsqrt(x.abs() + 1), VEC),
        "torch.abs": (torch.abs, VEC), "torch.sin": (torch.sin, VEC), "torch.cos": (torch.cos, VEC),
        "torch.pow": (lambda x: torch.pow(x, 3), VEC), "torch.clamp": (lambda x: torch.clamp(x, -1, 1), VEC),
        "torch.where": (lambda x: torch.where(x > 0, x, x * 2), VEC), "torch.maximum": (lambda x: torch.maximum(x, x.flip(-1)), VEC),
        "F.softmax": (lambda x: F.softmax(x, -1), VEC), "F.log_softmax": (lambda x: F.log_softmax(x, -1), VEC),
        "F.dropout": (lambda x: F.dropout(x, 0.1), VEC), "F.dropout2d": (lambda x: F.dropout2d(x, 0.1), IMG),
        "F.alpha_dropout": (lambda x: F.alpha_dropout(x, 0.1, True), VEC),
        "F.layer_norm": (lambda x: F.layer_norm(x, (16,)), VEC), "F.normalize": (F.normalize, VEC),
        "torch.linalg.norm": (lambda x: torch.linalg.norm(x, dim=-1), VEC),
        "F.interpolate nearest": (lambda x: F.interpolate(x, scale_factor=2), IMG),
        "F.interpolate bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), IMG),
        "F.interpolate bicubic": (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), IMG),
        "F.pad constant": (lambda x: F.pad(x, (1, 1, 1, 1)), IMG),
        "F.pad reflect": (lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), IMG),
        "F.pad replicate": (lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate"), IMG),
        "F.pad circular": (lambda x: F.pad(x, (1, 1, 1, 1), mode="circular"), IMG),
        "F.max_pool2d": (lambda x: F.max_pool2d(x, 2), IMG), "F.avg_pool2d": (lambda x: F.avg_pool2d(x, 2), IMG),
        "F.adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 1), IMG),
        "F.grid_sample": (lambda x: F.grid_sample(x, x[:, :2].permute(0, 2, 3, 1).tanh(), align_corners=False), IMG),
        "F.unfold": (lambda x: F.unfold(x, 2), IMG), "F.pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), IMG),
        "torch.roll": (lambda x: torch.roll(x, 1, -1), VEC), "torch.flip": (lambda x: torch.flip(x, (-1,)), VEC),
        "torch.cat": (lambda x: torch.cat([x, x * 2], -1), VEC), "torch.stack": (lambda x: torch.stack([x, x * 2]), VEC),
        "torch.chunk": (lambda x: x.chunk(2, -1)[0] * 2, VEC), "Tensor.repeat": (lambda x: x.repeat(1, 2), VEC),
        "torch.cumsum": (lambda x: torch.cumsum(x, -1), VEC), "torch.sum": (lambda x: x.sum(-1), VEC),
        "torch.mean": (lambda x: x.mean(-1), VEC), "torch.var": (lambda x: x.var(-1), VEC),
        "torch.amax": (lambda x: x.amax(-1), VEC), "torch.topk": (lambda x: x.topk(4, -1).values, VEC),
        "torch.sort": (lambda x: x.sort(-1).values, VEC), "torch.gather": (lambda x: x.gather(-1, x.argsort(-1)), VEC),
        "Tensor.to(float16)": (lambda x: x.to(torch.float16).float(), VEC), "Tensor.detach": (lambda x: x + x.detach(), VEC),
        "slice assignment": (lambda x: _slice_assign(x), VEC), "torch.zeros in forward": (lambda x: x + torch.zeros_like(x), VEC),
        "torch.einsum": (lambda x: torch.einsum("bi,bj->bij", x, x), VEC), "torch.matmul": (lambda x: x.unsqueeze(-1) @ x.unsqueeze(-2), VEC),
        "torch.baddbmm": (lambda x: torch.baddbmm(x.unsqueeze(-1), x.unsqueeze(-1), x.unsqueeze(-2)), VEC),
        "torch.outer": (lambda x: torch.outer(x[0], x[0]), VEC), "torch.tril": (lambda x: torch.tril(x.view(-1, 4, 4)), VEC),
        "F.conv2d": (lambda x: F.conv2d(x, x[:1].expand(4, 4, 8, 8)[:, :, :3, :3].contiguous()), IMG),
        "F.cross_entropy": (lambda x: F.cross_entropy(x, x.argmax(-1)), VEC),
        "F.binary_cross_entropy": (lambda x: F.binary_cross_entropy(torch.sigmoid(x), torch.zeros_like(x)), VEC),
        "F.binary_cross_entropy_with_logits": (lambda x: F.binary_cross_entropy_with_logits(x, torch.zeros_like(x)), VEC),
        "F.smooth_l1_loss": (lambda x: F.smooth_l1_loss(x, torch.zeros_like(x)), VEC),
        "F.kl_div": (lambda x: F.kl_div(F.log_softmax(x, -1), F.softmax(x.detach(), -1), reduction="batchmean"), VEC),
        "F.scaled_dot_product_attention": (lambda x: F.scaled_dot_product_attention(*(x.view(-1, 2, 2, 4),) * 3), VEC),
    }


def _slice_assign(x):
    y = x * 1
    y[:, :4] = x[:, 4:8] * 2
    return y


def _probe_builder(f):
    return lambda: Probe(f)


def functional_cases():
    out = []
    for name, (f, spec) in sorted(_functional().items()):
        out.append(("functional op", name, _probe_builder(f), [spec], "mse"))
    return out


# ---- Hugging Face -------------------------------------------------------------------------------

HF_ARCHS = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "gpt2", "gpt_neox",
            "falcon", "bert", "roberta", "deberta_v2", "t5", "bart", "vit", "clip", "whisper")


def hf_cases():
    try:
        import transformers  # noqa: F401
    except ImportError:
        return []
    out = []
    for arch in HF_ARCHS:
        for attn in ("sdpa", "eager"):
            out.append(("Hugging Face", "%s attn=%s" % (arch, attn), "hf:%s:attn=%s" % (arch, attn), None, "auto"))
    return out


SECTIONS = {"torchvision": torchvision_cases, "nn": nn_cases, "functional": functional_cases, "hf": hf_cases}
