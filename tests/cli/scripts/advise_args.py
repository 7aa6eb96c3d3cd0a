"""Each change `memsim advise --json` proposes, pasted as it prints it: `memsim run` with the
baseline's flags plus the change's `args` (replacing the same flags) gives the same figures as
the change's row. Usage: advise_args.py MEMSIM GRAPH BASELINE-FLAGS..."""
import json
import subprocess
import sys


def merged(base, change):
    """|base| flags with each flag of |change| replacing the baseline's (repeatable ones too)."""
    given = {change[i] for i in range(0, len(change), 2)}
    out, i = [], 0
    while i < len(base):
        if base[i] in given or (base[i] == "--ddp" and ("--world" in given or "--zero" in given)):
            i += 2
            continue
        out.append(base[i])
        i += 1
    return out + change


def main():
    memsim, graph, base = sys.argv[1], sys.argv[2], sys.argv[3:]
    advice = json.loads(subprocess.run([memsim, "advise", graph, *base, "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    rows = advice["changes"] + advice["left_out"]
    if len(rows) < 5:
        sys.exit(f"advise proposed {len(rows)} changes; expected at least 5")
    bad = 0
    for row in rows:
        cmd = [memsim, "run", graph, *merged(base, row["args"]), "--json"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL {row['change']}: {' '.join(cmd)}\n{run.stderr}")
            bad += 1
            continue
        got = json.loads(run.stdout)
        for key in ("peak_live_bytes", "peak_reserved_bytes", "oom"):
            if got[key] != row[key]:
                print(f"FAIL {row['change']}: {key} advise {row[key]}, run {got[key]} ({' '.join(cmd)})")
                bad += 1
        print(f"ok   {row['change']}: {' '.join(row['args'])}")
    sys.exit(1 if bad else 0)


main()
