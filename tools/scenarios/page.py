"""The tail the scenario scripts share: write the generated page, or (--check) fail if the
committed page differs from what would be generated."""
import json
import os
import subprocess
import sys


def memsim_json(cmd, cwd):
    """The JSON report of one memsim command (|cmd| ends with --json); a failure raises with its stderr."""
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + out.stderr.strip())
    return json.loads(out.stdout)


def quoted(args):
    """Command-line arguments as a user types them (globs quoted)."""
    return " ".join("'%s'" % a if "*" in a else a for a in args)


def write_or_check(script, lines, out, check):
    """Returns the exit code: with |check|, 1 if |out| is out of date, else writes |out|."""
    text = "\n".join(lines) + "\n"
    if check:
        old = open(out).read() if os.path.exists(out) else ""
        if old != text:
            print("%s: %s is out of date; regenerate it with tools/scenarios/%s" % (script, out, script),
                  file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    print("%s: wrote %s" % (script, out))
    return 0
