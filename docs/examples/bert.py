"""docs/python.md, worked example: BERT (graphs/models.py:bert_small). Run from the repository root:
    PYTHONPATH=build/python /usr/bin/python3 docs/examples/bert.py
"""
import sys
import memsim
import torch

sys.path.insert(0, "graphs")
import models  # graphs/models.py: the zoo's model code

model, inputs = models.bert_small()          # BertCls(layers=4, d=256, heads=4, ff=1024)
print(inputs)
ids = torch.randint(0, 30522, (16, 128))     # an example batch: 16 sequences of 128 tokens
report = memsim.estimate(model, {"ids": ids}, optimizer="adamw", gpu="T4")
print(repr(report))
print(report.data["config"])
print(report.phase_peaks)
frozen = memsim.simulate(report.graph, batch=16, optimizer="adamw", gpu="T4", freeze=["text.tok.*", "text.enc.layers.0.*"])
print(frozen.data["config"]["frozen_parameters"], frozen.peak_reserved_bytes)
table = memsim.sweep(report.graph, batch=[16, 64], optimizer="adamw", allocator=["caching", "expandable"],
                     inplace_activations=["keep", "on"], gpu="T4")
print(table.attrs["csv"])
print(memsim.advise(report.graph, batch=64, optimizer="adamw", gpu="T4")["changes"][0])
