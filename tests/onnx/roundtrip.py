"""Round trip: torch.onnx.export(seed model) → memsim import-onnx → memsim run, against the zoo graph
tools/export_torch.py made from the same model (graphs/*.json). peak_live_bytes must be equal.

Usage: /usr/bin/python3 tests/onnx/roundtrip.py MEMSIM_BINARY WORK_DIR   (from the source root)
Exports in TRAINING mode without constant folding so BatchNorm/Dropout stay, batch dynamic.
Known and documented (docs/onnx-import.md): ONNX has no in-place flags and no keep_alive; for
these three models neither changes peak_live_bytes. torch.onnx drops BatchNorm's
num_batches_tracked; the importer restores it (20 x 8 bytes in resnet18).
"""
import json
import os
import subprocess
import sys
import warnings

import torch
import torchvision

sys.path.insert(0, "graphs")
import models  # noqa: E402

MEMSIM, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
warnings.filterwarnings("ignore")
torch.manual_seed(0)

CASES = {
    "mlp": (lambda: models.mlp()[0], [2, 1000]),
    "mnist_cnn": (lambda: models.mnist_cnn()[0], [2, 1, 28, 28]),
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), [2, 3, 224, 224]),
}


def peak(graph, profile, batch):
    out = subprocess.run([MEMSIM, "run", graph, "--profile", profile, "--batch", str(batch), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["peak_live_bytes"]


failures = []
for name, (build, shape) in CASES.items():
    model = build().train()
    path = os.path.join(WORK, name + ".onnx")
    torch.onnx.export(model, (torch.randn(*shape),), path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x"], output_names=["out"],
                      dynamic_axes={"x": {0: "batch"}, "out": {0: "batch"}}, opset_version=13)
    gpath = os.path.join(WORK, name + ".json")
    subprocess.run([MEMSIM, "import-onnx", path, "-o", gpath, "--name", name], check=True)
    for profile in ("cpu", "cuda"):
        for batch in (4, 32):
            a, z = peak(gpath, profile, batch), peak("graphs/%s.json" % name, profile, batch)
            status = "ok" if a == z else "DIFFERENT"
            print("%-10s %-4s batch=%-3d onnx=%d zoo=%d %s" % (name, profile, batch, a, z, status))
            if a != z:
                failures.append((name, profile, batch, a, z))
sys.exit(1 if failures else 0)
