#!/usr/bin/python3
"""Export a PyTorch model to a memsim graph (JSON). Needs /usr/bin/python3 (Debian's torch 1.13).

    /usr/bin/python3 tools/export_torch.py torchvision:resnet50 --input "batch,3,224,224" -o graphs/resnet50.json

See docs/exporter.md. Same as `PYTHONPATH=tools /usr/bin/python3 -m memsim_export ...`.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from memsim_export.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
