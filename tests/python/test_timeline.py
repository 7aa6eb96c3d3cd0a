"""Report.timeline() (DataFrame), Report.plot() (matplotlib), _repr_html_ and the exports equal
what `memsim run --events/--timeline` writes."""
import io
import pickle

import pandas as pd
import pytest

import memsim
from conftest import run_cli

COLUMNS = ["kind", "tensor", "op", "module", "phase", "category", "bytes", "live", "allocated", "reserved"]
MNIST = ["graphs/mnist_cnn.json", "--batch", "8", "--optimizer", "adam"]


@pytest.fixture(scope="module")
def mnist():
    return memsim.simulate("graphs/mnist_cnn.json", batch=8, optimizer="adam", explain=False)


def test_timeline_columns_and_rows(mnist):
    df = mnist.timeline()
    assert list(df.columns) == COLUMNS
    assert df.index.name == "time" and list(df.index) == list(range(len(df)))
    events = run_cli("run", *MNIST, "--events", "/dev/stdout")[0]
    lines = [ln for ln in events.splitlines() if ln[:2] in ("A ", "F ")]
    assert len(df) == len(lines) > 0
    # Each row is its event line: A|F <phase> <bytes> <buffer> <category>.
    for row, line in zip(df.itertuples(), lines):
        kind, phase, nbytes, rest = line.split(" ", 3)
        tensor, category = rest.rsplit(" ", 1)  # tensor names may hold spaces
        assert (row.kind, row.phase, row.bytes, row.tensor, row.category) == (
            {"A": "alloc", "F": "free"}[kind], phase, int(nbytes), tensor, category)
    assert set(df["phase"]) <= set(memsim.PHASES) and set(df["category"]) <= set(memsim.CATEGORIES)


def test_timeline_peaks_are_the_reports(mnist):
    df = mnist.timeline()
    assert df["live"].max() == mnist.peak_live_bytes
    assert df["allocated"].max() == mnist.peak_allocated_bytes
    assert df["reserved"].max() == mnist.peak_reserved_bytes
    assert df["allocated"].notna().all() and (df["allocated"] <= df["reserved"]).all()
    signed = df["bytes"].where(df["kind"] == "alloc", -df["bytes"])
    assert (signed.cumsum() == df["live"]).all()
    assert df["op"].iloc[-1] == "" or df["phase"].iloc[-1] == "optimizer"


def test_timeline_after_oom_is_what_the_step_would_need():
    r = memsim.simulate("graphs/alexnet.json", batch=4096, optimizer="adam", gpu="T4", explain=False)
    df = r.timeline()
    assert r.oom is True and r.fits is False
    assert r.oom_event == r.oom_detail["event_index"] < len(df)
    assert df["op"].iloc[r.oom_event] == r.oom_op
    # The allocator columns cover the whole step without the capacity limit: the report's peaks.
    assert df["reserved"].notna().all() and df["reserved"].max() == r.peak_reserved_bytes
    assert df["allocated"].max() == r.peak_allocated_bytes > r.capacity_bytes


def test_plot_and_page_mark_the_oom_and_the_capacity():
    r = memsim.simulate("graphs/alexnet.json", batch=4096, optimizer="adam", gpu="T4", explain=False)
    ax = r.plot().axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert "capacity" in labels and "device used" in labels
    assert any(t.get_text() == "OOM at op " + r.oom_op for t in ax.texts)
    assert "would need" in ax.get_title()
    html = r._repr_html_()
    assert "<title>OOM at op %s</title>" % r.oom_op in html and "<title>capacity</title>" in html


def test_timeline_ideal_allocator_has_no_per_event_state():
    df = memsim.simulate("graphs/mlp.json", batch=4, allocator="ideal").timeline()
    assert df["allocated"].isna().all() and df["reserved"].isna().all() and df["live"].notna().all()


def test_plot_renders_png(mnist):
    fig = mnist.plot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60)
    png = buf.getvalue()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert {"reserved", "allocated", "parameter", "activation"} <= set(labels)
    assert ax.get_title().startswith("mnist_cnn: peak reserved")
    import matplotlib.figure
    other = matplotlib.figure.Figure()
    assert mnist.plot(ax=other.add_subplot(), unit="MiB") is other
    with pytest.raises(ValueError, match="unit='TB'"):
        mnist.plot(unit="TB")


def test_repr_html_is_the_cli_page(mnist, tmp_path):
    run_cli("run", *MNIST, "--timeline", tmp_path / "t.html")
    assert mnist._repr_html_() == (tmp_path / "t.html").read_text()
    mnist.to_html(tmp_path / "p.html")
    assert (tmp_path / "p.html").read_text() == (tmp_path / "t.html").read_text()


def test_memory_viz_and_chrome_trace_are_the_clis(mnist, tmp_path):
    run_cli("run", *MNIST, "--timeline", tmp_path / "cli.pickle")
    run_cli("run", *MNIST, "--timeline", tmp_path / "cli.json")
    mnist.to_memory_viz(tmp_path / "py.pickle")
    mnist.to_chrome_trace(tmp_path / "py.json")
    assert (tmp_path / "py.pickle").read_bytes() == (tmp_path / "cli.pickle").read_bytes()
    assert (tmp_path / "py.json").read_text() == (tmp_path / "cli.json").read_text()
    snap = pickle.loads((tmp_path / "py.pickle").read_bytes())
    assert set(snap) >= {"segments", "device_traces"}


def test_memory_viz_needs_the_caching_allocator(tmp_path):
    r = memsim.simulate("graphs/mlp.json", batch=4, allocator="expandable")
    with pytest.raises(memsim.OptionError, match="needs the caching allocator without expandable_segments"):
        r.to_memory_viz(tmp_path / "x.pickle")
    assert pd.notna(r.timeline()["reserved"]).all()


def test_page_headline_is_the_plot_title():
    """Note [Timeline page]: the page's headline is plot()'s title, from the same figures."""
    r = memsim.simulate("graphs/alexnet.json", batch=4096, optimizer="adam", gpu="T4", explain=False)
    title = r.plot().axes[0].get_title()
    assert title.startswith("alexnet: would need peak reserved")
    assert '<h2 class="headline">%s</h2>' % title in r._repr_html_()


def test_page_has_a_panel_per_distinct_rank(tmp_path):
    r = memsim.simulate("graphs/bert_small.json", batch=32, optimizer="adam", data_parallel=4, gpu="V100-16GB",
                        explain=False)
    html = r._repr_html_()
    assert len(r.ranks) == html.count('<section class="panel"') == 2
    page = tmp_path / "ranks.html"
    run_cli("run", "graphs/bert_small.json", "--batch", "32", "--optimizer", "adam", "--data-parallel", "4",
            "--gpu", "V100-16GB", "--timeline", str(page))
    assert page.read_text() == html


def test_page_data_agrees_with_the_report():
    """The page's embedded data (Note [Timeline page]) gives the report's figures."""
    import json
    import re
    r = memsim.simulate("graphs/alexnet.json", batch=4096, optimizer="adam", gpu="T4", explain=False)
    text = re.search(r'<script type="application/json" class="memsim-data" id="memsim-data">(.*?)</script>',
                     r._repr_html_(), re.S).group(1)
    p = json.loads(text)["panels"][0]
    assert p["peak_reserved"]["bytes"] == r.peak_reserved_bytes
    assert p["peak"]["live_bytes"] == r.peak_live_bytes and p["peak"]["phase"] == r.peak_phase
    assert p["oom"] == {"event": r.oom_event, "op": r.oom_op}
    assert p["capacity_bytes"] == r.capacity_bytes
    assert p["device_overhead_bytes"] + r.peak_reserved_bytes == r.peak_device_used_bytes
    assert p["y_max_bytes"] >= r.peak_device_used_bytes
