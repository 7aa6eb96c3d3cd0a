"""Child process of optimizer_record.py, run with LD_PRELOAD=allocspy.so: constructs a user's
optimizer on probe parameters and runs three steps, marking each in the allocation log.

    python3 -m memsim_export.optimizer_probe FILE.py:CLASS KWARGS_LITERAL N1,N2,N3 OUT.trace
"""
import ast
import ctypes
import sys


def load_class(spec):
    from .cli import load_builder
    cls, _ = load_builder(spec)
    return cls


def main(argv):
    spec, kwargs, sizes, out = argv
    import torch
    torch.manual_seed(0)
    cls = load_class(spec)
    kw = ast.literal_eval(kwargs) if kwargs else {}
    spy = ctypes.CDLL(None)
    params = [torch.nn.Parameter(torch.randn(int(n))) for n in sizes.split(",")]
    grads = [torch.randn(p.shape) for p in params]
    spy.allocspy_open(out.encode())
    spy.allocspy_mark(b"CTOR")
    opt = cls(params, **kw)
    for k in range(1, 4):
        for p, g in zip(params, grads):
            p.grad = g  # the same tensors every step: no allocation
        spy.allocspy_mark(("STEP %d" % k).encode())
        opt.step()
    spy.allocspy_mark(b"END")
    spy.allocspy_close()
    del opt
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
