"""`python -m memsim ARGS`: the memsim command line (the `memsim` program installed beside this
package by pip, or the one of the build tree), with the same arguments, output and exit code."""
import os
import shutil
import sys
import sysconfig


def _program():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("MEMSIM_CLI"),
                  os.path.join(sysconfig.get_path("scripts"), "memsim"),
                  os.path.join(here, "..", "..", "memsim"),  # build/python/memsim → build/memsim
                  shutil.which("memsim")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("memsim: the memsim program is not installed beside this package (pip install . installs it; "
             "or set MEMSIM_CLI to its path)")


if __name__ == "__main__":
    program = _program()
    os.execv(program, [program] + sys.argv[1:])
