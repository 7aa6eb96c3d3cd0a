"""docs/python.md, worked example: ResNet-50. Run from the repository root:
    PYTHONPATH=build/python /usr/bin/python3 docs/examples/resnet50.py
"""
import os
import tempfile

import memsim
import torchvision

model = torchvision.models.resnet50(weights=None)
report = memsim.estimate(model, "batch,3,224,224", batch=32, optimizer="adam", gpu="V100-16GB")
print(repr(report))
print(report.peak_phase, report.peak_op, report.fits, report.margin_bytes)
print(report.breakdown)
print(report.top_tensors()[["name", "bytes", "held_by"]].head(3).to_string())
df = report.timeline()
print(len(df), df.columns.tolist())
print(df.groupby("phase", observed=True)[["live", "reserved"]].max())
report.plot().savefig(os.path.join(tempfile.gettempdir(), "resnet50.png"))
print(memsim.fit(report.graph, gpu="V100-16GB", optimizer="adam"))
table = memsim.sweep(report.graph, batch=[32, 64, 128], optimizer=["sgd", "adam"], gpu="V100-16GB")
print(table[["batch", "optimizer", "peak_reserved_bytes", "oom"]].to_string())
