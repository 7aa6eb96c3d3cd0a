#!/usr/bin/env python3
"""Checks that every #include goes down the pipeline: a folder includes only itself and the
folders before it in LAYERS (docs/README.md, "The pipeline"). Exit 1 listing each violation."""
import pathlib
import re
import sys

LAYERS = ["lib/util", "lib/ir", "lib/io", "lib/ops", "lib/stream", "lib/autodiff", "lib/analysis", "lib/onnx",
          "sim/allocator", "sim/replay", "sim", "sim/report", "sim/options", "tools", "python"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """The deepest layer that is a prefix of |path| (a file under sim/report is sim/report)."""
    best = None
    for i, layer in enumerate(LAYERS):
        if path == layer or path.startswith(layer + "/"):
            if best is None or len(layer) > len(LAYERS[best]):
                best = i
    return best


def self_test():
    """The checker must catch an include going up (lib/ops including sim/) and pass a clean tree."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "lib/ops").mkdir(parents=True)
        (root / "sim").mkdir()
        (root / "sim/a.h").write_text('#include "lib/ops/b.h"\n')
        (root / "lib/ops/b.h").write_text('#include "lib/ir/graph.h"\n')
        ok = subprocess.run([sys.executable, __file__, d], capture_output=True, text=True)
        (root / "lib/ops/b.h").write_text('#include "sim/a.h"\n')
        bad = subprocess.run([sys.executable, __file__, d], capture_output=True, text=True)
    if ok.returncode != 0 or bad.returncode != 1 or "lib/ops/b.h: includes sim/a.h" not in bad.stdout:
        print("self-test failed:", ok.stdout, bad.stdout)
        return 1
    print("self-test passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = []
    checked = 0
    for top in ("lib", "sim", "tools", "python"):
        for f in sorted((root / top).rglob("*")):
            if f.suffix not in (".h", ".cc"):
                continue
            rel = f.relative_to(root).as_posix()
            me = layer_of(rel)
            for inc in INCLUDE.findall(f.read_text()):
                target = layer_of(inc)
                if target is None:
                    continue
                checked += 1
                if target > me:
                    bad.append(f"{rel}: includes {inc} ({LAYERS[target]} comes after {LAYERS[me]})")
    for b in bad:
        print(b)
    print(f"{checked} includes checked, {len(bad)} going up the pipeline")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
