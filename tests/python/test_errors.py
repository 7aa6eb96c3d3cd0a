"""Errors are Python exceptions carrying the command line's messages."""
import json
import subprocess

import pytest

import memsim
from conftest import CLI, ROOT, cli_error
from models import TinyLSTM

BAD_GRAPHS = ["unknown_op", "dangling", "negative_dim", "overflow_dim", "cycle", "bad_json", "no_such"]


@pytest.mark.parametrize("name", BAD_GRAPHS)
def test_bad_graph_file(name):
    path = "tests/cli/bad/%s.json" % name
    with pytest.raises(memsim.GraphError) as e:
        memsim.load_graph(path)
    assert str(e.value) == cli_error("run", path)
    assert str(e.value).startswith(path + ":")
    assert isinstance(e.value, memsim.Error) and isinstance(e.value, ValueError)


def test_graph_error_names_the_json_pointer():
    with pytest.raises(memsim.GraphError, match=r"unknown_op.json: /ops/1/op: unknown op"):
        memsim.simulate("tests/cli/bad/unknown_op.json")


def test_bad_graph_at_binding():
    path = "tests/cli/bad/shape_mismatch.json"
    with pytest.raises(memsim.GraphError) as e:
        memsim.simulate(path)
    assert str(e.value) == cli_error("run", path)
    assert "/ops/0: linear \"h\": input [4, 10] does not match weight [5, 11]" in str(e.value)


@pytest.mark.parametrize("kwargs,cli", [
    (dict(optimizer="adamx"), ["--optimizer", "adamx"]),
    (dict(gpu="Z80"), ["--gpu", "Z80"]),
    (dict(freeze="zzz*"), ["--freeze", "zzz*"]),
    (dict(alloc_conf="max_split_size_mb:abc"), ["--alloc-conf", "max_split_size_mb:abc"]),
    (dict(set={"seq": 4}), ["--set", "seq=4"]),
    (dict(set={"batch": "x"}), ["--set", "batch=x"]),
    (dict(batch=-1), ["--batch=-1"]),
    (dict(freeze_params=99), ["--freeze-params", "99"]),
    (dict(capacity=-5), ["--capacity=-5"]),
    (dict(step="sometimes"), ["--step", "sometimes"]),
    (dict(allocator="magic"), ["--allocator", "magic"]),
    (dict(batch="eight"), ["--batch", "eight"]),
    (dict(batch=0), ["--batch", "0"]),
    (dict(amp="fp61"), ["--amp", "fp61"]),
    (dict(profile="cdua"), ["--profile", "cdua"]),
    (dict(clip_grad_norm="abc"), ["--clip-grad-norm", "abc"]),
    (dict(optimizer="adam8bit", min_8bit_size=-1), ["--optimizer", "adam8bit", "--min-8bit-size=-1"]),
    (dict(optimizer="adafactor", foreach="on"), ["--optimizer", "adafactor", "--foreach", "on"]),
    (dict(world=4), ["--world", "4"]),
    (dict(ddp=2, zero=1), ["--ddp", "2", "--zero", "1"]),
    (dict(alloc_conf="expandable_segments=True"), ["--alloc-conf", "expandable_segments=True"]),
])
def test_bad_option_has_the_cli_message(kwargs, cli):
    with pytest.raises(memsim.OptionError) as e:
        memsim.simulate("graphs/mlp.json", **kwargs)
    assert isinstance(e.value, ValueError)
    assert str(e.value) == cli_error("run", "graphs/mlp.json", *cli).splitlines()[0]


def test_negative_top_is_refused_as_on_the_command_line():
    with pytest.raises(memsim.OptionError, match=r"top=-1: expected 0 or more \(0 lists none\)"):
        memsim.simulate("graphs/mlp.json", top=-1)
    assert cli_error("run", "graphs/mlp.json", "--top=-1") == "--top -1: expected 0 or more (0 lists none)"


def test_snapshot_is_not_a_graph():
    path = "tests/data/robustness/snapshot_bad_settings.pickle"
    with pytest.raises(memsim.GraphError) as e:
        memsim.load_graph(path)
    assert str(e.value) == cli_error("run", path)
    assert str(e.value).endswith("not a graph: use memsim replay " + path)


def test_python_argument_errors():
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) optimiser"):
        memsim.simulate("graphs/mlp.json", optimiser="adam")
    with pytest.raises(TypeError, match="memsim.sweep takes lists"):
        memsim.simulate("graphs/mlp.json", batch=[1, 2])
    with pytest.raises(TypeError, match="gpu takes one value"):
        memsim.sweep("graphs/mlp.json", gpu=["T4", "A10G"])
    with pytest.raises(TypeError, match="expected a dict"):
        memsim.simulate("graphs/mlp.json", set="seq=4")
    with pytest.raises(TypeError, match="batch=True"):
        memsim.simulate("graphs/mlp.json", batch=True)
    with pytest.raises(TypeError, match="memsim.Graph or a graph file path"):
        memsim.simulate(42)
    with pytest.raises(memsim.OptionError, match='run takes one value per option'):
        memsim.simulate("graphs/mlp.json", batch="1,2")


def test_checkpoint_is_simulated_like_the_cli():
    g = memsim.load_graph("graphs/resnet18.json")
    plain = memsim.simulate(g, batch=2, profile="cpu")
    assert memsim.simulate(g, batch=2, profile="cpu", checkpoint="layer?.?").phase_peaks["forward"] < \
        plain.phase_peaks["forward"]
    ckpt = memsim.simulate(g, batch=2, profile="cpu", torch="1.13", checkpoint="layer?.?", accumulate=2, foreach="on")
    cli = subprocess.run([CLI, "run", "graphs/resnet18.json", "--batch", "2", "--profile", "cpu", "--torch", "1.13", "--checkpoint",
                          "layer?.?", "--accumulate", "2", "--foreach", "on", "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout)["peak_live_bytes"] == ckpt.peak_live_bytes
    with pytest.raises(memsim.OptionError, match='--checkpoint "zz\\*" matches no module'):
        memsim.simulate(g, batch=2, checkpoint="zz*")


def test_amp_is_simulated_like_the_cli():
    g = memsim.load_graph("graphs/mlp.json")
    amp = memsim.simulate(g, batch=64, optimizer="adam", amp="fp16", steps=2, zero_grad="zeros", torch="2.13")
    cli = subprocess.run([CLI, "run", "graphs/mlp.json", "--batch", "64", "--optimizer", "adam", "--amp", "fp16",
                          "--steps", "2", "--zero-grad", "zeros", "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout)["peak_live_bytes"] == amp.peak_live_bytes
    with pytest.raises(memsim.OptionError, match="amp=8: expected"):
        memsim.estimate(TinyLSTM(), "batch,5,8", amp=8)


def test_amp_loss_and_cpu_isa_are_keywords_like_the_cli():
    g = memsim.load_graph("graphs/mnist_cnn.json")
    kw = dict(batch=64, optimizer="none", profile="cpu", torch="1.13", amp="bf16", amp_loss="outside", cpu_isa="avx2")
    r = memsim.simulate(g, **kw)
    cli = subprocess.run([CLI, "run", "graphs/mnist_cnn.json", "--batch", "64", "--optimizer", "none", "--profile", "cpu", "--torch", "1.13",
                          "--amp", "bf16",
                          "--amp-loss", "outside", "--cpu-isa", "avx2", "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout)["peak_live_bytes"] == r.peak_live_bytes
    # avx512 runs the bf16 convolutions through oneDNN instead: another peak.
    assert memsim.simulate(g, **dict(kw, cpu_isa="avx512")).peak_live_bytes != r.peak_live_bytes
    with pytest.raises(memsim.OptionError, match="cpu-isa"):
        memsim.simulate(g, **dict(kw, cpu_isa="sse2"))


def test_export_error_lists_unsupported_ops():
    p = subprocess.run(["/usr/bin/python3", "tools/export_torch.py", "tests/python/models.py:tiny_lstm", "--no-recorded"],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2
    # 1.13's nn.LSTM exports (expanded into RNN.cpp's CPU composite, Note [Recurrent layers]);
    # torch.erfinv has no rule
    assert p.stderr.endswith("unsupported ops: function torch.erfinv\n")


def test_ops_with_no_rule_run_on_recorded_rules():
    # fx meets erfinv: the model is recorded as it runs, erfinv measured (Note [Recorded rules]; the LSTM expanded)
    r = memsim.estimate(TinyLSTM(), "batch,5,8", profile="cpu", gpu=None)
    assert any("aten.erfinv" in op for op in r.data["recorded_rules"]["ops"])
    assert 0 <= r.data["recorded_rules"]["share_of_peak"] <= 1


def test_export_error_for_a_bad_input_spec():
    with pytest.raises(memsim.ExportError, match="bad dimension"):
        memsim.export(TinyLSTM(), "batch,5,8.5")
