"""Merge the op lists of several probes (same model, different symbol values) into one symbolic list.

A probe is a dict {symbol: value}.  Probe 0 is the base; probe i (i ≥ 1) changes exactly one symbol.
Every integer that differs between probes is written as a product ``"batch*12"`` of symbols and an
integer factor: for each symbol s the exponent e ∈ {0..3} is the one with
``v_base * alt_s**e == v_s * base_s**e``; the remaining factor must be a positive integer.
A size in a view/reshape ``shape`` that is no such product becomes -1 (if the list has no -1 yet).
"""
from .errors import ExportError


def symbolize_int(values, probes, symbols):
    """values[i] is the integer seen in probe i; returns an int or a product string."""
    v0 = values[0]
    if all(v == v0 for v in values):
        return v0
    if v0 <= 0:
        return None
    base = probes[0]
    exps = {}
    for i, s in enumerate(symbols, start=1):
        b, a, v = base[s], probes[i][s], values[i]
        for e in range(0, 4):
            if v0 * a ** e == v * b ** e:
                exps[s] = e
                break
        else:
            return None
    denom = 1
    for s, e in exps.items():
        denom *= base[s] ** e
    if v0 % denom:
        return None
    c = v0 // denom
    factors = []
    for s in symbols:
        factors += [s] * exps[s]
    if c != 1 or not factors:
        factors.append(str(c))
    return "*".join(factors)


def merge(structs, probes, symbols, where=""):
    """Merge parallel JSON-like structures from each probe."""
    s0 = structs[0]
    if isinstance(s0, dict):
        for s in structs[1:]:
            if not isinstance(s, dict) or list(s.keys()) != list(s0.keys()):
                raise ExportError("graph structure depends on the symbol values at %s (data-dependent code?)" % where)
        return {k: merge([s[k] for s in structs], probes, symbols, "%s/%s" % (where, k)) for k in s0}
    if isinstance(s0, list):
        for s in structs[1:]:
            if not isinstance(s, list) or len(s) != len(s0):
                raise ExportError("graph structure depends on the symbol values at %s (data-dependent code?)" % where)
        out = [merge([s[i] for s in structs], probes, symbols, "%s/%d" % (where, i)) for i in range(len(s0))]
        if where.endswith("/attrs/shape") and any(x is _FAIL for x in out):
            if out.count(_FAIL) == 1 and -1 not in out:
                return [-1 if x is _FAIL else x for x in out]
        if any(x is _FAIL for x in out):
            i = next(i for i, x in enumerate(out) if x is _FAIL)
            raise ExportError("value at %s/%d is %s for symbol values %s: not a product of symbols" % (
                where, i, [s[i] for s in structs], probes))
        return out
    if isinstance(s0, bool) or s0 is None or isinstance(s0, str):
        for s in structs[1:]:
            if s != s0:
                raise ExportError("value at %s depends on the symbol values: %s" % (where, structs))
        return s0
    if isinstance(s0, int):
        if any(isinstance(s, bool) or not isinstance(s, int) for s in structs):
            raise ExportError("value at %s changes type between probes: %s" % (where, structs))
        r = symbolize_int(structs, probes, symbols)
        if r is None and where.split("/")[-2:-1] in (["fwd_bytes"], ["bwd_bytes"]):
            r = _near_product(structs, probes, symbols)
        if r is None:
            if where.split("/")[-2:-1] == ["shape"]:
                return _FAIL
            raise ExportError("value at %s is %s for symbol values %s: not a product of symbols" % (
                where, structs, probes))
        return r
    if isinstance(s0, float):
        for s in structs[1:]:
            if s != s0:
                raise ExportError("value at %s depends on the symbol values: %s" % (where, structs))
        return s0
    raise ExportError("unexpected value at %s: %r" % (where, s0))


# A recorded op's buffer of a product of symbols plus a few bytes (EmbeddingBag's offset2bag: int64
# [n + 1]) is written as the product: at most this many bytes off (Note [Recorded rules]).
NEAR_PRODUCT_BYTES = 64


def _near_product(values, probes, symbols):
    """A measured byte count v = c·s + d with one symbol s varying between the probes and
    |d| ≤ NEAR_PRODUCT_BYTES: "s*c" (or None)."""
    varying = [x for x in symbols if len({p[x] for p in probes}) > 1]
    if len(varying) != 1 or len(values) < 2:
        return None
    x = varying[0]
    (a, va), (b, vb) = (probes[0][x], values[0]), (probes[1][x], values[1])
    if (vb - va) % (b - a):
        return None
    c = (vb - va) // (b - a)
    d = va - c * a
    if c <= 0 or abs(d) > NEAR_PRODUCT_BYTES or any(v != c * p[x] + d for v, p in zip(values, probes)):
        return None
    return "%s*%d" % (x, c)


class _Fail:
    def __repr__(self):
        return "<not a product>"


_FAIL = _Fail()


def numel_at(shape, symbols):
    """Elements of a shape whose dims are ints, symbols or products ("batch*12") at |symbols|."""
    n = 1
    for d in shape:
        if isinstance(d, str):
            for f in d.split("*"):
                n *= int(f) if f.isdigit() else symbols[f]
        else:
            n *= d
    return n


def plan_probes(specs, symbols, probe_batch):
    """(symbols of the input specs in order, their defaults, the probe bindings): probe 0 binds
    `batch` to probe_batch[0] and every other symbol to its default; probe i changes symbol i only."""
    syms = []
    for spec in specs:
        for d in spec.dims:
            if isinstance(d, str) and d not in syms:
                syms.append(d)
    defaults = dict(symbols or {})
    if "batch" in syms:
        defaults.setdefault("batch", 32)
    for s in syms:
        if s not in defaults:
            raise ExportError("symbol %r has no default value (use --set %s=N)" % (s, s))
    base = {s: probe_batch[0] if s == "batch" else int(defaults[s]) for s in syms}
    probes = [base]
    for s in syms:
        p = dict(base)
        if s == "batch":
            p[s] = probe_batch[1]
        else:
            p[s] = base[s] // 2 if base[s] >= 4 else base[s] + 1
        probes.append(p)
    return syms, defaults, probes
