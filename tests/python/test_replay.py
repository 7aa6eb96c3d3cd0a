"""memsim.replay() equals `memsim replay` (text and JSON) on the real GPU recordings, from a path
or from bytes; the fragmentation at the peak, the what-ifs and the no-history warning."""
import json
import os
import warnings

import pytest

import memsim
from conftest import ROOT, run_cli

GPU = os.path.join("tests", "data", "gpu")
CTX256 = os.path.join(GPU, "transformer_small_ctx256_bs32_fwd_bwd_warm.pickle")
NO_HISTORY = os.path.join(GPU, "transformer_small_ctx256_no_history.pickle")


def test_replay_is_the_cli_report():
    r = memsim.replay(CTX256)
    assert r.json == run_cli("replay", CTX256, "--json")[0]
    assert str(r) == run_cli("replay", CTX256)[0]
    assert r.peak_reserved_bytes == r.recorded_peak_reserved_bytes == 14180941824
    peak = r.at_peak
    assert peak["reserved_minus_allocated_bytes"] == peak["reserved_bytes"] - peak["allocated_bytes"] > 0
    assert peak["inactive_split_bytes"] + peak["unsplit_free_bytes"] == peak["reserved_minus_allocated_bytes"]
    assert peak["top_segments"] and peak["where"]
    assert r.warnings == []


def test_replay_what_if_is_a_dataframe():
    df = memsim.replay(CTX256).what_if()
    assert list(df["change"]) == ["as recorded, cold start", "expandable_segments:True", "max_split_size_mb:128",
                                  "max_split_size_mb:512"]
    assert df["change_bytes"].iloc[0] == 0
    assert df["peak_reserved_bytes"].iloc[1] == 13296 << 20
    assert memsim.replay(CTX256, what_if=False).what_if().empty


def test_replay_of_bytes_and_override():
    with open(os.path.join(ROOT, CTX256), "rb") as f:
        data = f.read()
    r = memsim.replay(data, alloc_conf="expandable_segments:True")
    assert r.data["file"] == "<bytes>" and r.data["alloc_conf_override"] is True
    assert r.peak_reserved_bytes == 13296 << 20


def test_replay_warns_without_history():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = memsim.replay(NO_HISTORY)
    assert any("no trace history" in str(w.message) for w in caught)
    assert r.warnings and r.data["trace_events"] == 0 and r.at_peak["event"] is None


def test_replay_errors_are_typed():
    with pytest.raises(memsim.SnapshotError, match="graphs/mlp.json: this is a memsim graph"):
        memsim.replay("graphs/mlp.json")
    with pytest.raises(memsim.SnapshotError, match="<bytes>"):
        memsim.replay(b"\x80\x02}q\x00.garbage")
    with pytest.raises(memsim.OptionError, match="alloc_conf"):
        memsim.replay(CTX256, alloc_conf="max_split_size_mb:abc")
    assert issubclass(memsim.SnapshotError, ValueError) and issubclass(memsim.SnapshotError, memsim.Error)
