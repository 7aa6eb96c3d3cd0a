"""Every plan on the front `memsim plan --json` reports, pasted as it prints it into `memsim run`
(its `args`), gives the same peak live and reserved bytes and the same verdict: the plan's
figures are the simulator's. Usage: plan_args.py MEMSIM GRAPH PLAN-FLAGS..."""
import json
import subprocess
import sys


def main():
    memsim, graph, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    plan = json.loads(subprocess.run([memsim, "plan", graph, *flags, "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    rows = plan["front"]
    if not rows or plan["chosen"] is None:
        sys.exit("plan found no plan that fits")
    bad = 0
    for row in rows:
        cmd = [memsim, "run", graph, *row["args"], "--json", "--top", "0"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL {row['plan']}: {' '.join(cmd)}\n{run.stderr}")
            bad += 1
            continue
        got = json.loads(run.stdout)
        for key in ("peak_live_bytes", "peak_reserved_bytes", "peak_device_used_bytes", "oom", "verdict"):
            if got[key] != row["figures"][key]:
                print(f"FAIL {row['plan']}: {key} plan {row['figures'][key]}, run {got[key]} ({' '.join(cmd)})")
                bad += 1
        print(f"ok   {row['plan']}: {row['run']}")
    sys.exit(1 if bad else 0)


main()
