"""The worked examples of docs/python.md are the outputs of docs/examples/{resnet50,bert}.py: every
number those scripts print is in the doc (the doc is not stale)."""
import os
import re
import subprocess

import pytest

from conftest import ROOT


@pytest.mark.parametrize("script", ["resnet50.py", "bert.py"])
def test_doc_example_outputs_are_in_the_doc(script, tmp_path):
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "docs", "examples", script)], cwd=ROOT,
                       capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    assert p.returncode == 0, p.stderr
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        doc = f.read()
    numbers = set(re.findall(r"\b\d{3,}\b", p.stdout))
    assert len(numbers) > 10
    assert sorted(n for n in numbers if not re.search(r"\b%s\b" % n, doc)) == []
