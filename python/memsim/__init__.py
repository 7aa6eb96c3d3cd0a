"""memsim from Python: how much GPU memory one training step of a PyTorch model needs.

    import memsim, torchvision
    report = memsim.estimate(torchvision.models.resnet50(), "batch,3,224,224", batch=32,
                             optimizer="adam", gpu="A100-40GB")
    report.peak_reserved_bytes, report.fits, report.breakdown
    report.timeline()          # pandas DataFrame, one row per allocate/free event
    report.plot()              # matplotlib Figure
    report                     # in a notebook: the HTML timeline of `memsim run --timeline x.html`
    memsim.sweep(report.graph, batch=[16, 32, 64], optimizer=["sgd", "adam"])
    memsim.fit(report.graph, gpu="V100-16GB", optimizer="adam")
    memsim.plan(report.graph, gpus="8xH100-80GB", global_batch=512)
    memsim.replay("snapshot.pickle")  # a real _dump_snapshot(): fragmentation at the peak, what-ifs

Everything is computed by memsim's C++ pipeline (the extension memsim._core), the same code as
the `memsim` command line: the same options (docs/cli.md, ``_`` for ``-``), the same numbers,
the same messages. See docs/python.md.
"""
from ._core import (CATEGORIES, GPUS, OPTIMIZERS, PHASES, Error, ExportError, Graph, GraphError,  # noqa: F401
                    OptionError, SnapshotError, __version__, parse_graph)
from ._api import advise, estimate, export, fit, load_graph, plan, simulate, sweep  # noqa: F401
from ._replay import ReplayReport, replay  # noqa: F401
from ._report import Report  # noqa: F401

__all__ = ["estimate", "export", "simulate", "load_graph", "parse_graph", "sweep", "fit", "advise", "plan", "replay",
           "Report", "ReplayReport", "Graph", "Error", "GraphError", "OptionError", "ExportError", "SnapshotError",
           "PHASES", "CATEGORIES", "GPUS", "OPTIMIZERS", "__version__"]
