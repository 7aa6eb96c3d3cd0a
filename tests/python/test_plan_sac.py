"""docs/plan-sac.md's measured runs (tools/plan_vs_sac.py, issue 30): every recording in
tests/data/traces_plan_sac is predicted by memsim within the 2.13 table's tolerance, and the
script's trace names and kit flags are what those recordings were made with."""
import glob
import json
import os
import re
import sys

import pytest

from conftest import ROOT, run_cli

sys.path.insert(0, os.path.join(ROOT, "tools"))
import plan_vs_sac  # noqa: E402 - its torch imports are inside functions

TRACES = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "traces_plan_sac", "*.trace")))


def config(path):
    with open(path) as f:
        for line in f:
            t = line.split(maxsplit=3)
            if t[0] == "M" and t[2] == "CONFIG":
                return dict(kv.split("=", 1) for kv in t[3].split())
    raise AssertionError("no CONFIG line in " + path)


def memsim_flags(cfg):
    """The memsim flags of a recording: its checkpoint regex as block paths, its SAC policy."""
    flags = []
    rx = cfg.get("checkpoint", "")
    if rx:
        blocks = [p for p in ("transformer.h.%d" % i for i in range(plan_vs_sac.N_LAYER)) if re.fullmatch(rx, p)]
        flags += [f for b in blocks for f in ("--checkpoint", b)]
    if cfg.get("sac"):
        flags += ["--sac", cfg["sac"]]
    return flags


def test_recordings_exist():
    assert len(TRACES) >= 5


@pytest.mark.parametrize("path", TRACES, ids=[os.path.basename(p) for p in TRACES])
def test_recording_predicted(path):
    cfg = config(path)
    flags = memsim_flags(cfg)
    assert plan_vs_sac.trace_key(flags) + ".trace" == os.path.basename(path)
    kit = plan_vs_sac.kit_flags(flags)  # the doc's kit command selects the same blocks and policy
    kit_cfg = {"checkpoint": kit[kit.index("--checkpoint") + 1].strip("'") if "--checkpoint" in kit else "",
               "sac": kit[kit.index("--sac") + 1] if "--sac" in kit else ""}
    assert memsim_flags(kit_cfg) == flags
    out, _, _ = run_cli("run", plan_vs_sac.GRAPH, "--profile", "cpu", "--torch", "2.13", "--optimizer", cfg["opt"],
                        "--step", "first", "--batch", cfg["batch"], "--set", "seq=" + cfg["seq"], "--json", *flags)
    sim = json.loads(out)["peak_live_bytes"]
    rec = plan_vs_sac.trace_peak(path)
    assert abs(sim - rec) <= 0.005 * rec, (sim, rec)
