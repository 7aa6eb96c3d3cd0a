"""Measure the oneDNN scratchpad of bf16 GEMMs: the c10 allocations a GEMM makes besides its result.

Run with the allocation spy preloaded and one thread (tests/data/onednn/amx_bf16_matmul_scratchpads.tsv
was recorded this way under PyTorch 2.13.0 on an AMX-BF16 host):
  gcc -O2 -shared -fPIC -o /tmp/allocspy.so tools/memsim_export/allocspy.c -ldl -lpthread
  OMP_NUM_THREADS=1 LD_PRELOAD=/tmp/allocspy.so python tests/oracle/onednn_matmul_sizes.py OUT KIND:BxMxKxN ...
KIND: linear (x[m,k]·W[n,k]ᵀ: B transposed), mm (a[m,k]·b[k,n]), gradw (g[k,m]ᵀ·x[k,n]: A transposed,
as linear's grad_weight), bmm, bmmt (B a transposed view), bmmta (A a transposed view); B is the batch
(1 for the 2-D kinds). Writes one line per problem: KIND B M K N, then every allocation's bytes, the
result first. ONEDNN_VERBOSE=1 shows the implementation oneDNN chose (brg_matmul:avx10_1_512_amx).
"""
import ctypes
import sys

import torch

SPY = ctypes.CDLL(None)


def problem(kind, b, m, k, n):
    """The GEMM as a function of no arguments, its operands made beforehand."""
    r = lambda *s: torch.randn(*s).bfloat16()
    if kind == "linear":
        x, w = r(m, k), r(n, k)
        return lambda: torch.nn.functional.linear(x, w)
    if kind == "mm":
        x, y = r(m, k), r(k, n)
        return lambda: torch.mm(x, y)
    if kind == "gradw":
        g, x = r(k, m), r(k, n)
        return lambda: torch.mm(g.t(), x)
    x = r(b, k, m).transpose(1, 2) if kind == "bmmta" else r(b, m, k)
    y = r(b, n, k).transpose(1, 2) if kind == "bmmt" else r(b, k, n)
    return lambda: torch.bmm(x, y)


def allocations(out, f):
    f()  # warm up: oneDNN's primitive cache
    SPY.allocspy_open((out + ".tmp").encode())
    result = f()
    SPY.allocspy_close()
    del result
    return [line.split()[2] for line in open(out + ".tmp").read().splitlines() if line.startswith("A")]


def main():
    torch.set_num_threads(1)
    out = sys.argv[1]
    with open(out, "w") as fo:
        for spec in sys.argv[2:]:
            kind, dims = spec.split(":")
            b, m, k, n = map(int, dims.split("x"))
            fo.write("%s %d %d %d %d %s\n" % (kind, b, m, k, n, " ".join(allocations(out, problem(kind, b, m, k, n)))))


if __name__ == "__main__":
    main()
