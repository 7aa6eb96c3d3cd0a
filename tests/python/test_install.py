"""`cmake --install` (make install) puts memsim and memsim_export where Debian's Python finds them."""
import os
import subprocess

from conftest import ROOT

BUILD = os.environ.get("MEMSIM_BUILD", os.path.join(ROOT, "build"))


def test_install_tree_imports(tmp_path):
    p = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(tmp_path), "--component", "python"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    site = next((tmp_path / "lib").glob("python3.*/dist-packages"))
    assert sorted(f.name for f in (site / "memsim").iterdir() if f.suffix == ".py") == [
        "__init__.py", "__main__.py", "_api.py", "_options.py", "_plot.py", "_replay.py", "_report.py"]
    assert any(f.name.startswith("_core.cpython-") for f in (site / "memsim").iterdir())
    assert (site / "memsim_export" / "exporter.py").exists()
    code = ("import memsim, memsim_export; assert memsim.__file__.startswith(%r), memsim.__file__; "
            "print(memsim.simulate('graphs/mlp.json', batch=4).peak_live_bytes)" % str(site))
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run(["/usr/bin/python3", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 0
