"""Report.plot(): memory over time as a matplotlib Figure (drawn from Report.timeline(), the
C++ timeline table; nothing is simulated here)."""
import numpy as np

# The HTML timeline's colours (sim/report/timeline.cc), in category order.
COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#9c755f", "#76b7b2"]
PHASE_BANDS = {"setup": "#f4f4f4", "forward": "#eaf2fb", "backward": "#fbf1e8", "optimizer": "#eef7ee"}
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _phase_bands(ax, phases):
    """A shaded band and a label per run of events of one phase."""
    start = 0
    for i in range(1, len(phases) + 1):
        if i == len(phases) or phases[i] != phases[start]:
            ax.axvspan(start, i - 1, color=PHASE_BANDS.get(phases[start], "#f4f4f4"), zorder=0, lw=0)
            ax.text(start, 1.0, " " + phases[start], transform=ax.get_xaxis_transform(), va="top", fontsize=8,
                    color="#666")
            start = i


def _capacity_and_oom(ax, report, reserved, scale):
    """With a capacity: device used (cuda) as a line, the capacity as a limit, the OOM marked."""
    if report.capacity_bytes is None:
        return
    device = report.data.get("device")
    if device is not None:
        outside = device["context_bytes"] + device.get("nccl_bytes", 0)  # Note [NCCL buffers]
        ax.plot(np.arange(len(reserved)), reserved + outside / scale, color="#7b2fbf", lw=1.2, label="device used")
    ax.axhline(report.capacity_bytes / scale, color="#d00000", lw=1.5, label="capacity")
    if report.oom:
        e = report.oom_event
        ax.axvline(e, color="#d00000", lw=1.5)
        ax.annotate("OOM" + (" at op %s" % report.oom_op if report.oom_op else ""), xy=(e, report.capacity_bytes / scale),
                    xytext=(4, 4), textcoords="offset points", fontsize=8, color="#d00000")


def plot_timeline(report, ax=None, unit="GiB"):
    if unit not in UNITS:
        raise ValueError("unit=%r: one of %s" % (unit, ", ".join(UNITS)))
    from matplotlib.figure import Figure
    df = report.timeline()
    scale = UNITS[unit]
    x = np.arange(len(df))
    signed = np.where(df["kind"].to_numpy() == "alloc", 1, -1) * df["bytes"].to_numpy()
    codes = df["category"].cat.codes.to_numpy()
    cats = list(df["category"].cat.categories)
    used = [k for k in range(len(cats)) if (codes == k).any()]
    series = [np.cumsum(np.where(codes == k, signed, 0)) / scale for k in used]
    if ax is None:
        fig = Figure(figsize=(10, 4.5), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    _phase_bands(ax, list(df["phase"].astype(str)))
    if used:
        ax.stackplot(x, series, labels=[cats[k] for k in used], colors=[COLORS[k] for k in used], alpha=0.85)
    reserved = df["reserved"].astype("float64").to_numpy() / scale
    ax.plot(x, reserved, color="black", lw=1.2, label="reserved")
    ax.plot(x, df["allocated"].astype("float64").to_numpy() / scale, color="#555", lw=0.8, ls=":",
            label="allocated")
    peak = report._run.peak_event
    ax.axvline(peak, color="#d00", ls="--", lw=1)
    ax.annotate("peak live %.3g %s\n%s %s" % (report.peak_live_bytes / scale, unit, report.peak_phase,
                                              report.peak_op),
                xy=(peak, report.peak_live_bytes / scale), xytext=(6, -4), textcoords="offset points",
                fontsize=8, color="#d00", va="top")
    if np.isfinite(reserved).any():
        r = int(np.nanargmax(reserved))
        ax.plot([r], [reserved[r]], "o", color="black", ms=4)
    _capacity_and_oom(ax, report, reserved, scale)
    ax.set_xlim(0, max(len(df) - 1, 1))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("memory events in order")
    ax.set_ylabel(unit)
    need = "would need " if report.oom else ""
    ax.set_title("%s: %speak reserved %.3g %s, allocated %.3g %s" % (
        report.data["model"], need, report.peak_reserved_bytes / scale, unit, report.peak_allocated_bytes / scale,
        unit))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return fig
