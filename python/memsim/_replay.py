"""memsim.replay(): a real PyTorch memory snapshot replayed through memsim's allocator model, as
`memsim replay FILE` reports it (the same JSON document and text, from the same C++ code)."""
import json
import os
import warnings

from . import _core


class ReplayReport:
    """The result of memsim.replay.

    data is the `memsim replay --json` document (json is its exact text, str(report) the text
    report); the properties below read it. at_peak explains the fragmentation at the peak,
    what_if() gives the same trace under expandable_segments / max_split_size_mb."""

    def __init__(self, out):
        self.json = out["json"]
        self._text = out["text"]
        self.data = json.loads(self.json)

    recorded_peak_reserved_bytes = property(lambda self: self.data["recorded_peak_reserved_bytes"],
                                            doc="max_memory_reserved() of the recording (None without segments)")
    peak_reserved_bytes = property(lambda self: self.data["simulated_peak_reserved_bytes"],
                                   doc="max_memory_reserved() of the replay")
    peak_allocated_bytes = property(lambda self: self.data["simulated_peak_allocated_bytes"],
                                    doc="max_memory_allocated() of the replay (block bytes)")
    recorded_peak_requested_bytes = property(lambda self: self.data["recorded_peak_allocated_bytes"],
                                             doc="peak of the recording's live requested bytes")
    at_peak = property(lambda self: self.data["at_peak"],
                       doc="the allocator at the peak: reserved_minus_allocated_bytes, inactive_split_bytes, "
                           "largest_free_block_bytes, top_segments (with the allocations that split them)")
    warnings = property(lambda self: list(self.data["warnings"]), doc="e.g. a snapshot without trace history")

    def what_if(self):
        """The same trace under other allocator settings as a DataFrame (change, alloc_conf,
        peak_reserved_bytes, peak_allocated_bytes, reserved_minus_allocated_bytes, change_bytes);
        the first row is the baseline (the recorded settings, cold start)."""
        import pandas as pd
        return pd.DataFrame(self.data["what_if"],
                            columns=["change", "alloc_conf", "peak_reserved_bytes", "peak_allocated_bytes",
                                     "reserved_minus_allocated_bytes", "change_bytes"])

    def __str__(self):
        return self._text

    def __repr__(self):
        d = self.data
        return "<memsim.ReplayReport %s: peak reserved %d B (recorded %s), reserved - allocated at the peak %d B>" % (
            d["file"], d["simulated_peak_reserved_bytes"], d["recorded_peak_reserved_bytes"],
            (d["at_peak"] or {}).get("reserved_minus_allocated_bytes", 0))


def replay(snapshot, alloc_conf=None, what_if=True):
    """Replays a recorded PyTorch memory history (`memsim replay`, docs/allocator.md): |snapshot| is
    the path of a torch.cuda.memory._dump_snapshot() pickle (or memory_viz alloc_data JSON /
    trace_plot HTML), or its bytes (torch.cuda.memory._snapshot() pickled). |alloc_conf|: a
    PYTORCH_CUDA_ALLOC_CONF to simulate instead of the recorded one. |what_if|: also replay under
    expandable_segments and max_split_size_mb. Raises SnapshotError for a file that cannot be
    read or replayed, OptionError for a bad alloc_conf; warns (UserWarning) for a snapshot
    without trace history."""
    if isinstance(snapshot, (bytes, bytearray, memoryview)):
        out = _core.replay("<bytes>", data=bytes(snapshot), alloc_conf=alloc_conf, what_if=what_if)
    else:
        out = _core.replay(os.fspath(snapshot), alloc_conf=alloc_conf, what_if=what_if)
    report = ReplayReport(out)
    for w in report.warnings:
        warnings.warn(w, UserWarning, stacklevel=2)
    return report
