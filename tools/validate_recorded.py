"""The recorded-rules table of tools/validate.py (Note [Recorded rules] in docs/op-rules.md): the
traces of graphs/recorded_models.py (tests/oracle/record_recorded.sh; ops with no memsim rule,
exported with --trace auto, which measures them) against memsim on the graphs exported beside each
set. Each peak within 1 %; the recorded ops' own allocations within 5 % per phase: memsim's
(`recorded_rules.allocated` of its report) against the trace's bytes allocated in that phase less
what memsim allocates there for every other op (whose rules are exact)."""
import os
import subprocess
import tempfile

import validate as V

MAX_PEAK_ERR, MAX_OWN_ERR = 1.0, 5.0
SETS = ("traces_recorded_2_13", "traces_recorded_1_13")


def trace_allocated(path):
    """Bytes allocated per phase of a trace (the kit's PHASE marks)."""
    phase, out = None, {}
    for line in open(path):
        t = line.split(maxsplit=3)
        if t[0] == "M" and t[2] == "PHASE":
            phase = t[3].strip()
        elif t[0] == "A":
            out[phase] = out.get(phase, 0) + int(t[2])
    return out


def memsim_allocated(memsim, graph, cfg):
    """(report, bytes allocated per phase) of memsim run with --events."""
    cmd, _ = V.run_memsim(memsim, graph, cfg)
    with tempfile.TemporaryDirectory() as d:
        ev = os.path.join(d, "events")
        out = subprocess.run(cmd + ["--events", ev], capture_output=True, text=True, check=True)
        per = {}
        for line in open(ev):
            t = line.split()
            if t[0] == "A":
                per[t[1]] = per.get(t[1], 0) + int(t[2])
    import json
    return json.loads(out.stdout), per


def section(memsim, failures):
    lines = ["", "## Recorded rules (PyTorch 2.13 and 1.13)", "",
             "Small models built around ops memsim has no rule for (`graphs/recorded_models.py`: torch.special",
             "erfcx / i0e / log_ndtr, cumprod, logcumsumexp, cummax, a user's autograd.Function), exported with",
             "`--trace auto`, which measures each such op into a recorded rule (Note [Recorded rules]); recorded by",
             "`tests/oracle/record_recorded.sh` into `tests/data/traces_recorded_2_13/` and `traces_recorded_1_13/`,",
             "each against the graph exported under the same release. Tolerance: every peak within %.1f %%; the" % MAX_PEAK_ERR,
             "recorded ops' own allocations (memsim's, against the trace's less memsim's for every other op) within",
             "%.1f %% per phase." % MAX_OWN_ERR, "",
             "| trace | recorded ops | peak measured | peak predicted | error | share of peak | own fwd: trace / memsim | own bwd: trace / memsim |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for sub in SETS:
        d = os.path.join(V.ROOT, "tests", "data", sub)
        for name in sorted(n for n in os.listdir(d) if n.endswith(".trace")):
            path = os.path.join(d, name)
            cfg, _, peak, _ = V.summarize(path)
            graph = os.path.join(d, "graphs", cfg["model"] + ".json")
            rep, m_alloc = memsim_allocated(memsim, graph, cfg)
            t_alloc = trace_allocated(path)
            rec = rep["recorded_rules"]
            e_peak = V.err(rep["peak_live_bytes"], peak)
            if abs(e_peak) > MAX_PEAK_ERR:
                failures.append("%s (%s): peak error %.3f %%" % (name, sub, e_peak))
            own = []
            for ph in ("forward", "backward"):
                mine = rec["allocated"][ph]
                theirs = t_alloc.get(ph, 0) - (m_alloc.get(ph, 0) - mine)
                e = V.err(mine, theirs)
                if abs(e) > MAX_OWN_ERR:
                    failures.append("%s (%s): recorded ops' own %s allocations error %.3f %% (memsim %d, trace %d)"
                                    % (name, sub, ph, e, mine, theirs))
                own.append("%d / %d (%+.2f %%)" % (theirs, mine, e))
            lines.append("| %s (%s) | %d | %d | %d | %+.3f %% | %.1f %% | %s | %s |" % (
                name[:-6], "2.13" if sub.endswith("2_13") else "1.13", len(rec["ops"]), peak, rep["peak_live_bytes"],
                e_peak, 100 * rec["share_of_peak"], own[0], own[1]))
    return lines
