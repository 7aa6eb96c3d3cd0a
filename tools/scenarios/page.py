"""The tail the scenario scripts share: write the generated page, or (--check) fail if the
committed page differs from what would be generated."""
import os
import sys


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
