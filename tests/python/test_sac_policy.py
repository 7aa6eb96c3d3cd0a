"""A selective-checkpointing policy recorded from a policy_fn (memsim_export.record_sac_policy,
memsim.estimate(sac=policy_fn)): runs under the 2.x venv (create_selective_checkpoint_contexts is
torch >= 2.4; tests/python/python.cmake). Note [Selective activation checkpointing]."""
import json
import os
import sys

import pytest
import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

import memsim
import memsim_export
from conftest import ROOT, cli_error

sys.path.insert(0, os.path.join(ROOT, "graphs"))
import llm_models  # noqa: E402

aten = torch.ops.aten


def torchtitan_context_fn():
    """torchtitan's op-level SAC (activation_checkpoint.py): a context_fn with a per-call mm count."""
    save = {aten.mm.default, aten._scaled_dot_product_flash_attention.default, aten.max.default}
    count = {"forward": 0, "recompute": 0}

    def policy_fn(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == aten.mm.default:
            count[mode] += 1
        keep = func in save and not (func == aten.mm.default and count[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy_fn)


def save_fused_attention(ctx, func, *args, **kwargs):
    """A plain policy_fn: keep the CPU flash attention's outputs, recompute everything else."""
    return func == aten._scaled_dot_product_flash_attention_for_cpu.default


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return llm_models.LLM_MODELS["gpt2_small"][0](32)


def ids():
    return torch.randint(0, 50304, (2, 32))


def test_records_torchtitan_every_other_mm_per_call(gpt, tmp_path):
    path = tmp_path / "policy.json"
    rec = memsim_export.record_sac_policy(gpt, (ids(),), torchtitan_context_fn, "transformer.h.*", path)
    assert json.loads(path.read_text()) == rec
    assert set(rec["recorded"]) == {"transformer.h.%d" % i for i in range(12)}
    for calls in rec["recorded"].values():
        # one call per block; its four linears (c_attn, c_proj, c_fc, mlp c_proj) are mm calls:
        # the 1st and 3rd saved, counted afresh in each call; the CPU flash kernel is not in the list
        assert calls == [{"mm": [True, False, True, False]}]


class Blocks(torch.nn.Module):
    """Four checkpointable blocks of two bias-free linears (mm calls) and a head."""
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(64, 256, bias=False), torch.nn.ReLU(),
                                                              torch.nn.Linear(256, 64, bias=False)) for _ in range(4))
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return self.head(x)


def test_simulating_the_recorded_policy_equals_the_named_policy(gpt, tmp_path):
    path = tmp_path / "policy.json"
    memsim_export.record_sac_policy(gpt, (ids(),), torchtitan_context_fn, "transformer.h.*", path)
    graph = os.path.join(ROOT, "tests", "data", "traces_2_13", "graphs", "nanogpt_gpt2_small.json")
    kw = dict(batch=2, set={"seq": 64}, optimizer="adamw", profile="cpu", torch="2.13",
              checkpoint="transformer.h.*", explain=False)
    recorded = memsim.simulate(graph, sac=str(path), **kw)
    named = memsim.simulate(graph, sac="torchtitan", **kw)
    plain = memsim.simulate(graph, **kw)
    assert recorded.data["phase_peaks"] == named.data["phase_peaks"]
    assert recorded.data["phase_peaks"] != plain.data["phase_peaks"]


def test_estimate_with_a_policy_fn_equals_the_listed_ops():
    torch.manual_seed(0)
    model, x = Blocks(), torch.randn(8, 64)
    kw = dict(optimizer="adam", profile="cpu", checkpoint="blocks.*", explain=False)
    every_mm = memsim.estimate(model, x, sac=lambda ctx, func, *a, **k: func == aten.mm.default, **kw)
    listed = memsim.estimate(model, x, sac="ops:mm", **kw)
    assert every_mm.data["phase_peaks"] == listed.data["phase_peaks"]
    titan = memsim.estimate(model, x, sac=torchtitan_context_fn, **kw)
    assert titan.data["phase_peaks"] == memsim.estimate(model, x, sac="torchtitan", **kw).data["phase_peaks"]
    assert titan.data["phase_peaks"] != every_mm.data["phase_peaks"]


def test_policy_fn_without_checkpoint_or_example_tensors_is_refused():
    model = Blocks()
    with pytest.raises(memsim.OptionError, match="checkpoint="):
        memsim.estimate(model, torch.randn(8, 64), sac=save_fused_attention, profile="cpu")
    with pytest.raises(memsim.OptionError, match="example tensors"):
        memsim.estimate(model, "batch,64", sac=save_fused_attention, profile="cpu", checkpoint="blocks.*")
    with pytest.raises(memsim.OptionError, match="matches no module"):
        memsim.estimate(model, torch.randn(8, 64), sac=save_fused_attention, profile="cpu", checkpoint="nothing.*")


def test_a_broken_recorded_file_names_its_json_pointer(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"recorded": {"transformer.h.0": [{"mm": [True, 1]}]}}))
    err = cli_error("run", os.path.join(ROOT, "graphs", "nanogpt_gpt2_small.json"), "--profile", "cpu",
                    "--checkpoint", "transformer.h.*", "--sac", str(path))
    assert "/recorded/transformer.h.0/0/mm" in err and "true or false" in err
