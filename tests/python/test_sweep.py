"""memsim.sweep / fit / advise give what `memsim sweep/fit/advise` print; the sweep releases the GIL."""
import io
import json

import pytest
import threading
import time

import pandas as pd

import memsim
from conftest import cli_error, run_cli
from models import TinyCNN

SWEEP = dict(batch=[8, 64], optimizer=["sgd", "adam"], profile=["cuda", "cpu"], gpu="T4")
SWEEP_CLI = ["--batch", "8,64", "--optimizer", "sgd,adam", "--profile", "cuda,cpu", "--gpu", "T4"]


def test_sweep_equals_cli_json_and_csv():
    df = memsim.sweep("graphs/resnet18.json", threads=2, **SWEEP)
    out_json, _, _ = run_cli("sweep", "graphs/resnet18.json", *SWEEP_CLI, "--json", "--threads", 2)
    out_csv, _, _ = run_cli("sweep", "graphs/resnet18.json", *SWEEP_CLI, "--csv")
    assert df.attrs["json"] == out_json and df.attrs["csv"] == out_csv
    expected = pd.DataFrame(json.loads(out_json)["configurations"])
    pd.testing.assert_frame_equal(df, expected)
    assert len(df) == 8
    assert list(df.columns) == ["batch", "optimizer", "step", "profile", "torch", "inplace", "freeze_params", "allocator",
                                "alloc_conf", "peak_live_bytes", "peak_phase", "peak_allocated_bytes",
                                "peak_reserved_bytes", "peak_device_used_bytes", "capacity_bytes", "oom", "oom_op",
                                "oom_phase", "verdict", "oom_message"]
    # The CLI's CSV, column by column: the same names.
    csv = pd.read_csv(io.StringIO(out_csv))
    for col in ["batch", "optimizer", "profile", "peak_live_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
                "oom"]:
        assert list(df[col]) == list(csv[col]), col
    assert list(csv["peak_device_used_bytes"]) == ["-" if v is None or v != v else str(int(v))
                                                   for v in df["peak_device_used_bytes"]]


# One configuration's figures are the same in `run --json` (Report.data), the sweep's DataFrame
# and its CSV, for zoo graphs × batches on both sides of the capacity (Note [Would need]).
FIGURES = ["peak_live_bytes", "peak_phase", "peak_allocated_bytes", "peak_reserved_bytes", "peak_device_used_bytes",
           "capacity_bytes", "oom", "oom_op", "oom_phase", "verdict"]


@pytest.mark.parametrize("graph, batches", [("graphs/nanogpt_gpt2_small.json", [2, 8, 64]),
                                            ("graphs/resnet18.json", [64, 512, 1024])])
def test_run_sweep_and_csv_give_the_same_figures(graph, batches):
    df = memsim.sweep(graph, batch=batches, optimizer="adam", gpu="T4")
    csv = pd.read_csv(io.StringIO(df.attrs["csv"]), dtype=str, keep_default_na=False)
    ooms = []
    for i, b in enumerate(batches):
        run = memsim.simulate(graph, batch=b, optimizer="adam", gpu="T4", explain=False).data
        row = df.iloc[i]
        for k in FIGURES:
            assert run[k] == row[k], (graph, b, k)
        for k in ["peak_live_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "peak_device_used_bytes"]:
            assert csv[k][i] == str(run[k]), (graph, b, k)
        assert csv["oom"][i] == ("true" if run["oom"] else "false")
        assert csv["oom_op"][i] == (run["oom_op"] if run["oom"] else "-")
        ooms.append(run["oom"])
    assert ooms[0] is False and ooms[-1] is True  # both sides of the capacity
    # Past the capacity the figures still grow with the batch: none is truncated at the OOM.
    assert df["peak_reserved_bytes"].is_monotonic_increasing


def test_sweep_symbols_alloc_confs_and_errors():
    df = memsim.sweep("graphs/bert_small.json", set={"batch": [1, 2]}, alloc_conf=["", "expandable_segments:True"],
                      optimizer="adamw", inplace_activations=["on", "off"])
    out, _, _ = run_cli("sweep", "graphs/bert_small.json", "--set", "batch=1,2", "--alloc-conf", "",
                        "--alloc-conf", "expandable_segments:True", "--optimizer", "adamw",
                        "--inplace-activations", "on,off", "--csv")
    assert df.attrs["csv"] == out and len(df) == 8
    # An invalid configuration is a row with its error, as in the CLI.
    bad = memsim.sweep("graphs/mlp.json", batch=[1], freeze_params=[0, 999])
    assert pd.isna(bad["error"][0]) and "--freeze-params 999" in bad["error"][1]


def test_sweep_of_a_model():
    df = memsim.sweep(TinyCNN(), "batch,3,16,16", batch=[1, 2, 4])
    assert list(df["batch"]) == [1, 2, 4] and df["peak_live_bytes"].is_monotonic_increasing


def test_sweep_releases_the_gil():
    g = memsim.load_graph("graphs/resnet50.json")
    done = threading.Event()
    ticks = 0

    def work():
        memsim.sweep(g, batch=list(range(1, 1001)), optimizer=["sgd", "adam"], threads=1)
        done.set()

    t = threading.Thread(target=work)
    start = time.perf_counter()
    t.start()
    while not done.is_set():  # this loop runs only while the sweep does not hold the GIL
        ticks += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.perf_counter() - start
    # Held, the GIL would stop this loop for the whole C++ sweep: a handful of ticks at most.
    assert elapsed > 0.1 and ticks > 50 and ticks > elapsed / 0.01


def test_fit_equals_cli():
    out, _, _ = run_cli("fit", "graphs/resnet18.json", "--gpu", "T4", "--optimizer", "adam", "--json")
    n = memsim.fit("graphs/resnet18.json", gpu="T4", optimizer="adam")
    assert isinstance(n, int) and n == json.loads(out)["max_batch"] > 0
    r = memsim.simulate("graphs/resnet18.json", batch=n, gpu="T4", optimizer="adam", explain=False)
    assert r.fits and not memsim.simulate("graphs/resnet18.json", batch=n + 1, gpu="T4", optimizer="adam").fits


def test_fit_at_the_top_of_the_range_agrees_with_simulate():
    kw = dict(gpu="V100-16GB", optimizer="adam")
    n = memsim.fit("graphs/resnet50.json", **kw)
    top = memsim.fit("graphs/resnet50.json", at_top=True, **kw)
    assert 0 < top < n
    assert memsim.simulate("graphs/resnet50.json", batch=top, explain=False, **kw).verdict == "fits"
    above = memsim.simulate("graphs/resnet50.json", batch=top + 1, explain=False, **kw)
    assert above.fits and above.verdict == "within the uncertainty"
    assert memsim.simulate("graphs/resnet50.json", batch=n, explain=False, **kw).fits


def test_fit_searches_the_sequence_length_like_the_cli():
    out, _, _ = run_cli("fit", "graphs/cs336_small.json", "--search", "seq", "--batch", 8, "--gpu", "A100-40GB",
                        "--optimizer", "adamw", "--json")
    n = memsim.fit("graphs/cs336_small.json", search="seq", batch=8, gpu="A100-40GB", optimizer="adamw")
    assert n == json.loads(out)["max_seq"] > 1


def test_fit_needs_a_capacity():
    try:
        memsim.fit("graphs/mlp.json")
    except memsim.OptionError as e:
        assert str(e) == cli_error("fit", "graphs/mlp.json")
    else:
        raise AssertionError("no error")


def test_advise_equals_cli():
    out, _, _ = run_cli("advise", "graphs/mlp.json", "--batch", 64, "--optimizer", "adam", "--gpu", "T4", "--json")
    assert memsim.advise("graphs/mlp.json", batch=64, optimizer="adam", gpu="T4") == json.loads(out)
