"""memsim.plan gives what `memsim plan --json` prints (docs/plan.md), and the snippet of --framework."""
import json

import pytest

import memsim
from conftest import run_cli

GRAPH = "graphs/nanogpt_gpt2_small.json"
AXES = dict(precision=["amp-bf16", "bf16"], sharding=["ddp", "zero2", "fsdp"], checkpoints=["none", "all"])
AXES_CLI = ["--precision", "amp-bf16,bf16", "--sharding", "ddp,zero2,fsdp", "--checkpoints", "none,all"]


def test_plan_equals_cli_json():
    got = memsim.plan(GRAPH, gpus="2xA100-40GB", global_batch=16, torch="2.13", threads=2, **AXES)
    out, _, _ = run_cli("plan", GRAPH, "--gpus", "2xA100-40GB", "--global-batch", 16, *AXES_CLI, "--json",
                        "--threads", 2)
    want = json.loads(out)
    for d in (got, want):
        d.pop("seconds", None)
    assert got.pop("text").startswith("plan nanogpt_gpt2_small on 2 x A100-40GB")
    assert got.pop("html").startswith("<!DOCTYPE html>")
    assert got == want
    chosen = got["chosen"]
    assert chosen is not None and not chosen["figures"]["oom"]
    assert chosen["micro_batch"] * chosen["accumulate"] * chosen["world"] == 16


def test_plan_snippet_and_bad_input():
    got = memsim.plan(GRAPH, gpus="2xA100-40GB", global_batch=16, torch="2.13", framework="deepspeed", **AXES)
    out, _, _ = run_cli("plan", GRAPH, "--gpus", "2xA100-40GB", "--global-batch", 16, *AXES_CLI, "--framework",
                        "deepspeed")
    assert got["snippet"] == out
    with pytest.raises(memsim.OptionError, match="--gpus: unknown GPU \"A100-40G\": did you mean A100-40GB"):
        memsim.plan(GRAPH, gpus="2xA100-40G", global_batch=16)
    with pytest.raises(memsim.OptionError, match="--objective"):
        memsim.plan(GRAPH, gpus="2xA100-40GB", global_batch=16, objective="speed")
