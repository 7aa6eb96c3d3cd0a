"""Handlers for what Hugging Face models call beyond the other tables: ``weight.T`` / ``x.mT``
(Falcon's linear), ``torch.addmm`` (GPT-2's Conv1D), the ``*_like`` / ``new_*`` factories (T5's
position bias), ``argmax`` / ``argmin`` (CLIP's pooling) (Note [Hugging Face architectures] in
docs/exporter.md)."""
import torch

from . import ops_shape
from .ops_math import f_factory
from .registry import PROPERTY_HANDLERS, T, Unsupported, function, method


def _transpose_last(cx, x):
    x = T(x)
    if x.ndim < 2:
        return x
    return ops_shape.t_transpose(cx, x, -2, -1)


PROPERTY_HANDLERS["T"] = lambda cx, x: ops_shape.t_transpose(cx, x, 0, 1) if T(x).ndim == 2 else _bad_T(x)
PROPERTY_HANDLERS["mT"] = _transpose_last


def _bad_T(x):
    if x.ndim < 2:
        return x
    raise Unsupported("Tensor.T of a %d-D tensor" % x.ndim)


@function(torch.addmm)
@method("addmm")
def f_addmm(cx, bias, mat1, mat2, *, beta=1, alpha=1, out=None):
    """addmm(b, x, W) with beta = alpha = 1 is the kernel F.linear(x, Wᵀ, b) runs for a 2-D input
    (aten/src/ATen/native/Linear.cpp): the same saved tensors (x and the weight) and the same
    gradients (derivatives.yaml addmm: mat1 grad = grad.mm(mat2ᵀ), mat2 grad = mat1ᵀ.mm(grad) at
    mat2's shape, self grad = grad summed to the bias's shape); Wᵀ is a view of the parameter."""
    if out is not None or beta != 1 or alpha != 1:
        raise Unsupported("torch.addmm with beta/alpha/out")
    bias, mat1, mat2 = T(bias, "bias"), T(mat1), T(mat2)
    if mat1.ndim != 2 or mat2.ndim != 2 or bias.ndim != 1:
        raise Unsupported("torch.addmm of shapes %s, %s, %s" % (list(bias.shape), list(mat1.shape), list(mat2.shape)))
    w = ops_shape.t_transpose(cx, mat2, 0, 1)
    return cx.emit("linear", [mat1, w, bias], shape=(mat1.shape[0], mat2.shape[1]))


for _f in ("zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like"):
    function(getattr(torch, _f, None))(f_factory)
for _m in ("new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"):
    method(_m)(f_factory)


@function(torch.argmax, torch.argmin)
@method("argmax", "argmin")
def f_argmax(cx, x, *args, **kwargs):
    """An int64 index result with no gradient: the one allocation is the result (a `full` of its
    shape); the input's lifetime is the Python one the recorder sees."""
    T(x)
    return f_factory(cx)
