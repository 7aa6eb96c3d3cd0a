"""The tail the generated-report scripts share (validate.py, robustness_report.py): write the
Markdown report, print it, and fail with the list of failures."""
import sys


def finish(name, lines, failures, out):
    """Appends the failures to |lines|, writes them to |out| (if given) and stdout; returns the
    exit code: 1 with the failures on stderr, else 0."""
    if failures:
        lines += ["", "Failures:", ""] + ["- " + f for f in failures]
    text = "\n".join(lines) + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    print(text)
    if failures:
        print("%s: FAILED\n" % name + "\n".join(failures), file=sys.stderr)
        return 1
    return 0
