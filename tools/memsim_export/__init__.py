"""memsim_export: turn a PyTorch nn.Module into a memsim graph (docs/graph-format.md).

Entry points: ``python3 -m memsim_export`` (with ``tools/`` on PYTHONPATH), ``tools/export_torch.py``,
or :func:`export_model` from Python.  See docs/exporter.md.
"""
from .errors import ExportError, UnsupportedError
from .exporter import export_model, InputSpec, materialize_lazy, parse_input_spec, write_graph, graph_to_json
from .sac_policy import record_sac_policy

__all__ = ["ExportError", "UnsupportedError", "export_model", "InputSpec", "materialize_lazy", "parse_input_spec",
           "write_graph", "graph_to_json", "record_sac_policy"]
