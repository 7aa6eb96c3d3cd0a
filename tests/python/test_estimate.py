"""memsim.estimate / memsim.simulate give the `memsim run` report, byte for byte."""
import json

import pytest
import torch

import memsim
from memsim._options import running_torch_release
from conftest import GRAPHS, ROOT, run_cli
from models import TinyCNN

RUN = ["--optimizer", "adam", "--gpu", "A100-40GB", "--explain"]  # estimate's defaults


@pytest.fixture(scope="module")
def exported_by_cli(tmp_path_factory):
    """torchvision resnet18 exported by tools/export_torch.py (its own process)."""
    import subprocess
    path = tmp_path_factory.mktemp("cli") / "resnet18.json"
    p = subprocess.run(["/usr/bin/python3", "tools/export_torch.py", "torchvision:resnet18", "--input",
                        "batch,3,224,224", "-o", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return path


def test_estimate_equals_cli_run_json(resnet18, exported_by_cli):
    report = memsim.estimate(resnet18, "batch,3,224,224", batch=4, name="resnet18")
    out, _, _ = run_cli("run", exported_by_cli, "--batch", 4, *RUN, "--json")
    assert report.json == out  # byte for byte
    assert report.data == json.loads(out)
    # the module follows the release of the torch it runs under (Note [Version profiles])
    assert report.data["config"] == {"symbols": {"batch": 4}, "optimizer": "adam", "step": "first",
                                     "profile": "cuda", "torch": running_torch_release(),
                                     "inplace_activations": "keep", "frozen_parameters": 0}


def test_estimate_text_equals_cli_run_text(resnet18, exported_by_cli):
    report = memsim.estimate(resnet18, "batch,3,224,224", batch=2, name="resnet18", optimizer="sgd", top=3)
    out, _, _ = run_cli("run", exported_by_cli, "--batch", 2, "--optimizer", "sgd", "--gpu", "A100-40GB",
                        "--explain", "--top", 3)
    assert str(report) == out


def test_example_tensor_gives_the_batch(resnet18, exported_by_cli):
    report = memsim.estimate(resnet18, torch.randn(4, 3, 224, 224), name="resnet18")
    out, _, _ = run_cli("run", exported_by_cli, "--batch", 4, *RUN, "--json")
    assert report.json == out
    assert report.graph.symbols == {"batch": 4}


def test_report_numbers(resnet18):
    r = memsim.estimate(resnet18, "batch,3,224,224", batch=4)
    d = r.data
    assert r.peak_reserved_bytes == d["peak_reserved_bytes"] == d["allocator"]["peak_reserved_bytes"]
    assert r.peak_allocated_bytes == d["peak_allocated_bytes"]
    assert r.peak_live_bytes == sum(r.breakdown.values()) == d["peak_live_bytes"]
    assert r.peak_live_bytes <= r.peak_allocated_bytes <= r.peak_reserved_bytes
    assert set(r.phase_peaks) == {"forward", "backward", "optimizer"}
    assert max(r.phase_peaks.values()) == r.peak_live_bytes
    assert r.capacity_bytes == 40 << 30 and r.fits is True and r.oom is False  # sim/gpus: A100-40GB
    assert r.oom_op is None and r.oom_detail is None and r.verdict == "fits"
    assert r.used_bytes == r.peak_device_used_bytes == d["device"]["peak_device_used_bytes"]
    assert r.margin_bytes == r.capacity_bytes - r.peak_device_used_bytes
    tops = r.top_tensors()
    assert list(tops.columns) == ["name", "bytes", "category", "op", "module", "held_by"]
    assert len(tops) == 10 and tops["bytes"].is_monotonic_decreasing
    assert all(isinstance(h, list) and h for h in tops["held_by"])  # explain=True: why each is alive
    assert r.graph.name == "ResNet" and "ResNet" in repr(r)


def test_estimate_does_not_fit():
    r = memsim.estimate(TinyCNN(), "batch,3,16,16", batch=64, gpu=None, capacity=1 << 20)
    assert r.fits is False and r.margin_bytes is None and r.oom is True
    assert "CUDA out of memory" in r.oom_detail["message"]
    assert r.oom_op == r.oom_detail["op"] and r.oom_phase == r.oom_detail["phase"]
    # What it would need: more than the capacity, the peaks of the whole step (Note [Would need]).
    assert r.used_bytes > r.capacity_bytes and r.verdict == "does not fit"
    assert str(r).startswith("does not fit on the device: would need ")


def test_train_mode_restored():
    m = TinyCNN().eval()
    memsim.estimate(m, "batch,3,16,16", batch=2)
    assert not m.training and not m.bn.training
    m.train()
    memsim.estimate(m, "batch,3,16,16", batch=2)
    assert m.training


@pytest.mark.parametrize("options,cli", [
    (dict(batch=2, optimizer="adamw", freeze=["text.tok.*", "text.enc.layers.0.*"], top=5),
     ["--batch", 2, "--optimizer", "adamw", "--freeze", "text.tok.*", "--freeze", "text.enc.layers.0.*", "--top", 5]),
    (dict(set={"batch": 3}, profile="cpu", step="steady", inplace_activations="off", allocator="expandable"),
     ["--set", "batch=3", "--profile", "cpu", "--step", "steady", "--inplace-activations", "off",
      "--allocator", "expandable"]),
    (dict(batch=2, alloc_conf="max_split_size_mb:128,roundup_power2_divisions:4", capacity=1 << 30,
          conv_workspace=1 << 20, cublas_workspace=0, freeze_params=3),
     ["--batch", 2, "--alloc-conf", "max_split_size_mb:128,roundup_power2_divisions:4", "--capacity", 1 << 30,
      "--conv-workspace", 1 << 20, "--cublas-workspace", 0, "--freeze-params", 3]),
])
def test_simulate_equals_cli_run(options, cli):
    path = "graphs/bert_small.json"
    top = options.pop("top", 10)
    r = memsim.simulate(path, explain=False, top=top, **options)
    out, _, _ = run_cli("run", path, *cli, "--json")
    assert r.json == out


def test_load_graph_reused():
    g = memsim.load_graph(GRAPHS + "/mlp.json")
    assert isinstance(g, memsim.Graph) and g.name == "mlp" and g.num_ops > 0 and g.num_parameters == 10
    a, b = memsim.simulate(g, batch=8), memsim.simulate(g, batch=16)
    assert a.peak_live_bytes < b.peak_live_bytes
    assert a.events().splitlines()[0].startswith("A setup")


def test_simulate_reports_every_distinct_rank_as_cli_run():
    """Several ranks: the Python report carries `memsim run`'s per-rank list (Note [DataParallel])."""
    path = "graphs/bert_small.json"
    r = memsim.simulate(path, explain=False, top=3, batch=32, optimizer="adam", data_parallel=4,
                        fsdp_mixed_precision=None)
    out, _, _ = run_cli("run", path, "--batch", 32, "--optimizer", "adam", "--data-parallel", 4, "--top", 3, "--json")
    assert r.json == out
    assert [e["ranks"] for e in r.ranks] == [[0], [1, 2, 3]]
    z = memsim.simulate(path, explain=False, batch=8, zero=3, world=8, dtype="fp16")
    assert len(z.ranks) == 1 and z.ranks[0]["ranks"] == list(range(8))
    assert memsim.simulate(path, batch=8).ranks == []


def test_estimate_of_a_peft_lora_model_equals_lora_option():
    """A peft LoRA model exports as its base model with the "lora" key (Note [LoRA]): the same step
    as the base model with lora=, and peft's own trainable-parameter count. Needs peft (the torch
    2.13 venv: PYTHONPATH=build/python:tools .venv/bin/python -m pytest tests/python/test_estimate.py)."""
    peft = pytest.importorskip("peft")
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.act, self.down = nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)

        def forward(self, x):
            return self.down(self.act(self.up(x)))
    x = torch.randn(32, 64)
    wrapped = peft.get_peft_model(Net(), peft.LoraConfig(r=8, lora_alpha=16, target_modules=["up", "down"],
                                                         lora_dropout=0.1))
    trainable = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    a = json.loads(memsim.estimate(wrapped, [x], optimizer="adamw", profile="cpu").json)
    b = json.loads(memsim.estimate(Net(), [x], optimizer="adamw", profile="cpu",
                                   lora="r=8,alpha=16,targets=up,down,dropout=0.1").json)
    assert a["parameters"]["trainable"] == trainable == 4688
    assert a["config"]["lora"]["adapters"] == 2
    assert a["peak_live_bytes"] == b["peak_live_bytes"]
    assert a["phase_peaks"] == b["phase_peaks"]


def test_estimate_quantize_base_equals_cli_option(tmp_path):
    """quantize_base= is the CLI's --quantize-base (Note [Quantized base weights]): NF4 weights
    packed two per byte plus their quant state, every Linear but lm_head."""
    from torch import nn
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    x = torch.randn(32, 64)
    q = json.loads(memsim.estimate(model, [x], optimizer="adamw", profile="cpu",
                                   quantize_base="nf4,double_quant=on").json)
    plain = json.loads(memsim.estimate(model, [x], optimizer="adamw", profile="cpu").json)
    assert q["config"]["quantized_base"] == {"spec": "nf4,double_quant=on", "linears": 2}
    assert q["parameters"]["bytes"] < plain["parameters"]["bytes"] / 4
    assert q["parameters"]["trainable"] == 256 + 10  # the biases


def test_estimate_records_a_model_fx_cannot_trace_without_touching_it():
    """nanoGPT asserts on its input's length (data-dependent Python for torch.fx): estimate falls
    back to recording it as it runs on a meta copy, as the CLI's --trace auto does; the user's
    model keeps its weights on its device."""
    import sys
    sys.path.insert(0, GRAPHS)
    import llm_models
    torch.manual_seed(0)
    model = llm_models.LLM_MODELS["gpt2_small"][0](64)
    head = model.lm_head.weight.detach().clone()
    report = memsim.estimate(model, torch.randint(0, 50304, (2, 64)), optimizer="adamw", profile="cpu",
                             explain=False)
    assert model.lm_head.weight.device.type == "cpu" and torch.equal(model.lm_head.weight, head)
    out = json.loads(run_cli("run", "graphs/nanogpt_gpt2_small.json", "--batch", 2, "--set", "seq=64",
                             "--optimizer", "adamw", "--profile", "cpu", "--json")[0])
    assert report.data["peak_live_bytes"] == out["peak_live_bytes"]
    assert report.data["phase_peaks"] == out["phase_peaks"]


def test_version_and_python_dash_m_are_the_command_line():
    import subprocess
    import sys
    out, _, _ = run_cli("--version")
    assert out.strip() == "memsim " + memsim.__version__
    p = subprocess.run([sys.executable, "-m", "memsim", "run", "graphs/mlp.json", "--batch", "4"] + RUN_TORCH,
                       cwd=ROOT, capture_output=True, text=True)
    cli, _, _ = run_cli("run", "graphs/mlp.json", "--batch", 4)
    assert p.returncode == 0 and p.stdout == cli
    bad = subprocess.run([sys.executable, "-m", "memsim", "rn"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("memsim: ") and "did you mean run?" in bad.stderr


RUN_TORCH = ["--torch", running_torch_release()]


def test_lazy_modules_take_their_shapes_from_the_example_tensors():
    # nn.LazyLinear(64) on [8, 32] examples: the same step as nn.Linear(32, 64)
    lazy = torch.nn.Sequential(torch.nn.LazyLinear(64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    plain = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    x = torch.randn(8, 32)
    a = memsim.estimate(lazy, x, explain=False)
    b = memsim.estimate(plain, x, explain=False)
    assert a.peak_live_bytes == b.peak_live_bytes > 0
    with pytest.raises(memsim.OptionError, match="lazy modules"):
        memsim.estimate(torch.nn.Sequential(torch.nn.LazyLinear(4)), "batch,32", explain=False)
