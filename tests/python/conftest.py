"""Shared fixtures of the Python module's tests (run by ctest, tests/python/python.cmake, with
PYTHONPATH=build/python and MEMSIM_CLI=build/memsim; /usr/bin/python3: Debian's torch 1.13)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GRAPHS = os.path.join(ROOT, "graphs")
BAD = os.path.join(ROOT, "tests", "cli", "bad")
CLI = os.environ.get("MEMSIM_CLI", os.path.join(ROOT, "build", "memsim"))
sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

torch.set_num_threads(1)


CONFIG_COMMANDS = {"run", "sweep", "fit", "advise", "summary"}


def run_cli(*args, check=True):
    """`memsim ARGS` from the source root: (stdout, stderr, exit code); |check| wants exit 0.
    A configuration command gets `--torch` of the torch running these tests unless it names one:
    the module's default (Note [Version profiles]), so the two are compared on the same rules."""
    args = [str(a) for a in args]
    if args and args[0] in CONFIG_COMMANDS and "--torch" not in args:
        from memsim._options import running_torch_release
        args += ["--torch", running_torch_release()]
    p = subprocess.run([CLI] + args, cwd=ROOT, capture_output=True, text=True)
    if check:
        assert p.returncode == 0, p.stderr
    return p.stdout, p.stderr, p.returncode


def cli_error(*args):
    """The message `memsim ARGS` fails with (exit code 2): its stderr without the "memsim: " of
    memsim's own errors (option-syntax errors of CLI11 come without it)."""
    _, err, code = run_cli(*args, check=False)
    assert code == 2, err
    return err[len("memsim: "):].rstrip("\n") if err.startswith("memsim: ") else err.rstrip("\n")


def cli_json(*args):
    return json.loads(run_cli(*args)[0])


@pytest.fixture(scope="session")
def resnet18():
    """torchvision's resnet18 (random weights)."""
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None)


@pytest.fixture(scope="session")
def resnet18_file(resnet18, tmp_path_factory):
    """resnet18 exported by the exporter's own writer (what tools/export_torch.py writes)."""
    import memsim_export
    path = tmp_path_factory.mktemp("graphs") / "resnet18.json"
    g = memsim_export.export_model(resnet18, ["batch,3,224,224"], loss="cross_entropy", name="resnet18")
    memsim_export.write_graph(g, str(path))
    return path
