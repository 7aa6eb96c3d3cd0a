"""Report: one simulated training step, as `memsim run` reports it (the same JSON document, text
and HTML page), plus its timeline as a pandas DataFrame and a matplotlib plot."""
import json

from . import _core


class Report:
    """The result of memsim.estimate / memsim.simulate.

    data is the `memsim run --json` document (json is its exact text, str(report) the text
    report); the properties below read it. timeline() and plot() show memory over time;
    _repr_html_ is the page `memsim run --timeline x.html` writes (a notebook cell shows it)."""

    def __init__(self, run):
        self._run = run
        self.json = run.json()
        self.data = json.loads(self.json)

    # ---- the numbers -----------------------------------------------------------------------
    graph = property(lambda self: self._run.graph, doc="the simulated Graph (reuse it in sweep/fit)")
    peak_allocated_bytes = property(lambda self: self.data["peak_allocated_bytes"],
                                    doc="torch.cuda.max_memory_allocated() of the step")
    peak_reserved_bytes = property(lambda self: self.data["peak_reserved_bytes"],
                                   doc="torch.cuda.max_memory_reserved() of the step")
    peak_live_bytes = property(lambda self: self.data["peak_live_bytes"],
                               doc="peak of the requested bytes of the tensors alive")
    peak_phase = property(lambda self: self.data["peak_phase"])
    peak_op = property(lambda self: self.data["peak_op"])
    phase_peaks = property(lambda self: dict(self.data["phase_peaks"]), doc="forward/backward/optimizer peaks")
    breakdown = property(lambda self: dict(self.data["breakdown_at_peak"]), doc="live bytes by category at the peak")
    # The figures every report names the same way (docs/cli.md, "The figures"): after a simulated
    # OOM the peaks are what the step would need without the capacity limit.
    peak_device_used_bytes = property(lambda self: self.data["peak_device_used_bytes"],
                                      doc="device used (nvidia-smi: reserved + CUDA context); None on cpu")
    capacity_bytes = property(lambda self: self.data["capacity_bytes"],
                              doc="the device's memory (gpu= or capacity=); None: no device given")
    oom = property(lambda self: self.data["oom"],
                   doc="True when the capacity-limited allocator runs out of memory")
    oom_op = property(lambda self: self.data["oom_op"], doc="the op where it does (None: no OOM)")
    oom_phase = property(lambda self: self.data["oom_phase"], doc="the phase where it does (None: no OOM)")
    oom_detail = property(lambda self: self.data["oom_detail"],
                          doc="the OOM's tensor, module, PyTorch's message and numbers (a dict), or None")
    verdict = property(lambda self: self.data["verdict"],
                       doc="'fits', 'does not fit' or 'within the uncertainty' (the device-used range); None "
                           "without a capacity")
    ranks = property(lambda self: [dict(r) for r in self.data.get("ranks", [])],
                     doc="several ranks (ddp, zero, fsdp, data_parallel): one dict per distinct rank (ranks, "
                         "peak_live_bytes, peak_reserved_bytes, oom, host_bytes, ...); [] on one GPU")

    @property
    def used_bytes(self):
        """The figure compared with the capacity: device used on cuda, else peak reserved."""
        d = self.data
        return d["peak_device_used_bytes"] if d["peak_device_used_bytes"] is not None else d["peak_reserved_bytes"]

    @property
    def fits(self):
        """Whether the step fits the device (None without gpu/capacity)."""
        return None if self.capacity_bytes is None else not self.oom

    @property
    def margin_bytes(self):
        """Capacity minus used_bytes when the step fits; None without a capacity or after a
        simulated OOM (see oom_op, and memsim.fit for the batch that fits)."""
        return self.capacity_bytes - self.used_bytes if self.fits else None

    def top_tensors(self):
        """The largest tensors alive at the peak as a DataFrame (name, bytes, category, op, module,
        held_by: what keeps each alive, with explain=True)."""
        import pandas as pd
        return pd.DataFrame(self.data["top_tensors_at_peak"],
                            columns=["name", "bytes", "category", "op", "module", "held_by"])

    # ---- renderings ------------------------------------------------------------------------
    def __str__(self):
        return self._run.text()

    def __repr__(self):
        d = self.data
        fit = "" if self.fits is None else (", fits" if self.fits else ", OUT OF MEMORY at op %s" % d["oom_op"])
        need = "would need " if d["oom"] else ""
        return "<memsim.Report %s: %speak reserved %d B, allocated %d B, live %d B in %s%s>" % (
            d["model"], need, d["peak_reserved_bytes"], d["peak_allocated_bytes"], d["peak_live_bytes"],
            d["peak_phase"], fit)

    def _repr_html_(self):
        return self._run.html()

    def to_html(self, path):
        """Writes the standalone page (`memsim run --timeline x.html`)."""
        _write(path, self._run.html())

    def to_chrome_trace(self, path):
        """Writes the Chrome trace for Perfetto (`memsim run --timeline x.json`)."""
        _write(path, self._run.chrome_trace())

    def to_memory_viz(self, path):
        """Writes a torch.cuda.memory._dump_snapshot() pickle for pytorch.org/memory_viz
        (`memsim run --timeline x.pickle`; the caching allocator without expandable segments)."""
        with open(path, "wb") as f:
            f.write(self._run.memory_viz())

    def events(self):
        """The raw event stream as text (`memsim run --events`)."""
        return self._run.events_text()

    # ---- memory over time ------------------------------------------------------------------
    def timeline(self):
        """One row per allocate/free event, in order (the index is the event's time): kind,
        tensor, op (being run; its backward in the backward phase), module, phase, category,
        bytes, live (requested bytes alive after the event), allocated and reserved (the caching
        allocator model after the event, without the capacity limit after a simulated OOM: what
        the step would need; <NA> for allocator="ideal"). oom_event is where the OOM happens."""
        import numpy as np
        import pandas as pd
        cols = self._run.timeline()
        missing = np.arange(len(cols["bytes"])) >= cols["allocator_rows"]
        df = pd.DataFrame({
            "kind": pd.Categorical.from_codes(cols["kind"], _core.KINDS),
            "tensor": cols["tensor"],
            "op": cols["op"],
            "module": cols["module"],
            "phase": pd.Categorical.from_codes(cols["phase"], _core.PHASES),
            "category": pd.Categorical.from_codes(cols["category"], _core.CATEGORIES),
            "bytes": cols["bytes"],
            "live": cols["live"],
            "allocated": pd.arrays.IntegerArray(cols["allocated"], missing.copy()),
            "reserved": pd.arrays.IntegerArray(cols["reserved"], missing.copy()),
        })
        df.index.name = "time"
        return df

    @property
    def oom_event(self):
        """The index (time) of the event where the capacity-limited allocator fails; None: no OOM."""
        return self._run.oom_event

    def plot(self, ax=None, unit="GiB"):
        """A matplotlib Figure of memory over time: live bytes stacked by category, the allocator
        model's reserved (and allocated) bytes as lines, the peak marked. |ax|: draw into it."""
        from ._plot import plot_timeline
        return plot_timeline(self, ax=ax, unit=unit)


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)
