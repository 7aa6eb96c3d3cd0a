#!/usr/bin/env python3
"""`memsim sweep` at scale, end to end (Note [Sweep files] in docs/sweeps.md):

  threads  one sweep with 1 and 2 threads gives the same bytes (CSV, JSONL, --out files)
  resume   a sweep killed with SIGKILL at several moments, resumed each time, equals an
           uninterrupted run byte for byte; --resume refuses a file of another sweep
  shards   3 shards merged == the unsharded file; merge fails on a missing or duplicated shard
           or configuration
  memory   a 10-million-row sweep: the resident memory does not grow with the rows written
  files    --out is locked against a second writer; CSV fields are quoted (RFC 4180); --resume
           checks every row; every output follows one rule for symlinks and devices

usage: sweep_cli_test.py MEMSIM SOURCE_DIR MODE
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

MID = ["graphs/mlp.json", "--batch", ",".join(str(b) for b in range(1, 401)), "--optimizer", "sgd,adam,adamw",
       "--profile", "cuda,cpu", "--gpu", "T4"]
# Long enough (~24,000 configurations, a few seconds) to be killed in the middle.
LONG = ["graphs/mlp.json", "--batch", ",".join(str(b) for b in range(1, 4001)), "--optimizer", "sgd,adam,adamw",
        "--profile", "cuda,cpu", "--gpu", "T4"]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(memsim, args, **kw):
    r = subprocess.run([memsim] + args, capture_output=True, **kw)
    if r.returncode != 0:
        fail("memsim %s exited %d: %s" % (" ".join(args[:3]), r.returncode, r.stderr.decode()[-2000:]))
    return r.stdout


def expect_error(memsim, args, needle):
    r = subprocess.run([memsim] + args, capture_output=True, text=True)
    if r.returncode != 2 or needle not in r.stderr:
        fail("expected exit 2 with %r from memsim %s, got %d: %s" % (needle, " ".join(args[:2]), r.returncode, r.stderr))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def threads(memsim, tmp):
    for fmt in (["--csv"], ["--jsonl"], []):
        one = run(memsim, ["sweep"] + MID + fmt + ["--threads", "1"])
        two = run(memsim, ["sweep"] + MID + fmt + ["--threads", "2"])
        if one != two:
            fail("sweep %s: 1 and 2 threads differ" % fmt)
    for ext in ("csv", "jsonl"):
        a, b = os.path.join(tmp, "one." + ext), os.path.join(tmp, "two." + ext)
        run(memsim, ["sweep"] + MID + ["--threads", "1", "--out", a])
        run(memsim, ["sweep"] + MID + ["--threads", "2", "--out", b])
        if read(a) != read(b):
            fail("--out %s: 1 and 2 threads differ" % ext)
        rows = read(a).count(b"\n") - (2 if ext == "csv" else 1)
        if rows != 400 * 3 * 2:
            fail("--out %s: %d rows, expected 2400" % (ext, rows))
    print("ok: 1 and 2 threads give the same bytes")
    # The progress bar: on stderr when it is a terminal, nothing otherwise.
    r = subprocess.run([memsim, "sweep"] + MID + ["--csv"], capture_output=True)
    if r.stderr:
        fail("stderr is not a terminal, yet the sweep wrote to it: %r" % r.stderr[:200])
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen([memsim, "sweep"] + MID + ["--csv"], stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    p.wait()
    os.close(master)
    if b"configurations/s" not in shown or b"ETA" not in shown or b"2400/2400" not in shown:
        fail("no progress bar on a terminal: %r" % shown[-300:])
    print("ok: progress bar on a terminal only")


def resume(memsim, tmp):
    for ext in ("csv", "jsonl"):
        whole = os.path.join(tmp, "whole." + ext)
        t0 = time.perf_counter()
        run(memsim, ["sweep"] + LONG + ["--out", whole])
        elapsed = time.perf_counter() - t0
        total = read(whole).count(b"\n")
        part = os.path.join(tmp, "killed." + ext)
        midway = 0
        # Kill at several moments: at once (maybe before the header), then after some rows. Each
        # attempt resumes the last, so each gets a tenth of an uninterrupted run's time (whatever
        # the speed of memsim and of the machine) and the file grows a little each time.
        for delay in [0.0] + [0.1 * elapsed] * 5:
            p = subprocess.Popen([memsim, "sweep"] + LONG + ["--out", part, "--resume", "--threads", "2"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(delay)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
            lines = read(part).count(b"\n") if os.path.exists(part) else 0
            if p.returncode == -signal.SIGKILL and 3 < lines < total:
                midway += 1
        if midway < 2:
            fail("%s: only %d kills landed in the middle of the sweep" % (ext, midway))
        run(memsim, ["sweep"] + LONG + ["--out", part, "--resume"])
        if read(part) != read(whole):
            fail("%s: killed %d times midway and resumed, the file differs from an uninterrupted run" % (ext, midway))
        # Resuming a finished file adds nothing.
        run(memsim, ["sweep"] + LONG + ["--out", part, "--resume"])
        if read(part) != read(whole):
            fail("%s: resuming a finished sweep changed it" % ext)
        # A half-written last row (what a kill inside write(2) would leave) is dropped and redone.
        data = read(whole)
        cut = data.rfind(b"\n", 0, len(data) // 2) + 7
        with open(part, "wb") as f:
            f.write(data[:cut])
        run(memsim, ["sweep"] + LONG + ["--out", part, "--resume"])
        if read(part) != data:
            fail("%s: a partial last row was not redone" % ext)
        print("%s: killed %d times midway, resumed == uninterrupted" % (ext, midway))
    expect_error(memsim, ["sweep", "graphs/mlp.json", "--batch", "1,2", "--out", part, "--resume"],
                 "holds the rows of another sweep")
    # Any option, and the graph's content, are part of a sweep's identity; the refusal names the
    # difference (the same axes with one more option: same model and row count).
    expect_error(memsim, ["sweep"] + LONG + ["--steps", "2", "--out", part, "--resume"],
                 "options: this sweep has --steps=2, it does not")
    changed = os.path.join(tmp, "changed_graph.json")
    with open(LONG[0], "rb") as f:
        text = f.read()
    with open(changed, "wb") as f:
        f.write(text.replace(b'"provenance": "', b'"provenance": "(a copy) ', 1))
    expect_error(memsim, ["sweep", changed] + LONG[1:] + ["--out", part, "--resume"],
                 "the same options on a graph file whose content differs")
    print("ok: SIGKILL + --resume == an uninterrupted run")


def shards(memsim, tmp):
    for ext in ("csv", "jsonl"):
        whole = os.path.join(tmp, "whole." + ext)
        run(memsim, ["sweep"] + MID + ["--out", whole])
        parts = [os.path.join(tmp, "part-%d.%s" % (k, ext)) for k in (1, 2, 3)]
        for k, p in enumerate(parts, 1):
            run(memsim, ["sweep"] + MID + ["--shard", "%d/3" % k, "--out", p])
        merged = os.path.join(tmp, "merged." + ext)
        run(memsim, ["merge", merged, parts[2], parts[0], parts[1]])
        if read(merged) != read(whole):
            fail("%s: 3 shards merged differ from the unsharded sweep" % ext)
        os.remove(merged)
        expect_error(memsim, ["merge", merged, parts[0], parts[1]], "shard 3/3 is missing")
        expect_error(memsim, ["merge", merged, parts[0], parts[1], parts[2], parts[1]], "given twice")
        data = read(parts[1])
        with open(parts[1], "wb") as f:  # the last rows of shard 2 lost
            f.write(data[:data.rfind(b"\n", 0, len(data) - 1) + 1])
        expect_error(memsim, ["merge", merged, parts[0], parts[1], parts[2]], "is missing")
        with open(parts[1], "wb") as f:  # one row twice
            lines = data.splitlines(keepends=True)
            f.write(b"".join(lines[:5] + lines[4:]))
        expect_error(memsim, ["merge", merged, parts[0], parts[1], parts[2]], "is duplicated")
        if os.path.exists(merged):
            fail("a failed merge left " + merged)
        # A shard of the same axes from a job script with one more flag is another sweep.
        other = os.path.join(tmp, "other-3." + ext)
        run(memsim, ["sweep"] + MID + ["--shard", "3/3", "--steps", "2", "--out", other])
        with open(parts[1], "wb") as f:
            f.write(data)
        expect_error(memsim, ["merge", merged, parts[0], parts[1], other],
                     "(options: it has --steps=2, this sweep does not)")
    expect_error(memsim, ["sweep"] + MID + ["--shard", "4/3", "--csv"], "--shard: '4' is out of range [1, 3]")
    print("ok: 3 shards merged == unsharded; merge refuses missing and duplicated rows")



def files(memsim, tmp):
    import csv
    import io
    # RFC 4180: an error row whose message holds commas is one quoted field.
    out = run(memsim, ["sweep", "graphs/mlp.json", "--batch", "1,2", "--optimizer", "sgd,recorded", "--csv"])
    rows = list(csv.reader(io.StringIO(out.decode())))
    errors = [r[-1] for r in rows[1:] if r[-1]]
    if (len(rows) != 5 or rows[0][-1] != "error" or any(len(r) != len(rows[0]) for r in rows) or len(errors) != 2
            or "," not in errors[0] or "has no recorded optimizer" not in errors[0]):
        fail("the error rows are not whole rows with one quoted error field: %r" % rows)
    print("ok: CSV error messages quoted")
    # A second writer of the same --out fails at once; the first one's rows are intact.
    path = os.path.join(tmp, "locked.csv")
    p = subprocess.Popen([memsim, "sweep"] + LONG + ["--out", path, "--threads", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(200):
        if os.path.exists(path) and os.path.getsize(path) > 0:
            break
        time.sleep(0.05)
    expect_error(memsim, ["sweep"] + LONG + ["--out", path, "--resume"], "another memsim process is writing this file")
    expect_error(memsim, ["sweep"] + LONG + ["--out", path], "another memsim process is writing this file")
    p.send_signal(signal.SIGKILL)
    p.wait()
    print("ok: --out locked against a second writer")
    # --resume checks each row, not only its index: a row cut to fewer columns is refused.
    whole = os.path.join(tmp, "rows.csv")
    run(memsim, ["sweep"] + MID + ["--out", whole])
    lines = read(whole).split(b"\n")
    lines[5] = lines[5].rsplit(b",", 2)[0]
    with open(whole, "wb") as f:
        f.write(b"\n".join(lines))
    expect_error(memsim, ["sweep"] + MID + ["--out", whole, "--resume"], "line 6 is not the row of configuration 3")
    print("ok: --resume validates rows")
    # One rule for every output: a symlink is followed (its target replaced, the link kept), a
    # device is written in place, a directory is refused.
    target, link = os.path.join(tmp, "target.csv"), os.path.join(tmp, "link.csv")
    with open(target, "w") as f:
        f.write("old")
    os.symlink("target.csv", link)
    run(memsim, ["sweep", "graphs/mlp.json", "--batch", "1,2", "--out", link])
    if not os.path.islink(link) or not read(target).startswith(b"# memsim sweep"):
        fail("sweep --out through a symlink did not write its target")
    with open(target, "w") as f:
        f.write("old")
    part = os.path.join(tmp, "part.csv")
    run(memsim, ["sweep", "graphs/mlp.json", "--batch", "1,2", "--out", part])
    run(memsim, ["merge", link, part])
    if not os.path.islink(link) or read(target) != read(part):
        fail("merge onto a symlink did not replace its target: %r" % read(target)[:80])
    tl_target, tl_link = os.path.join(tmp, "t.html"), os.path.join(tmp, "tl.html")
    with open(tl_target, "w") as f:
        f.write("old")
    os.symlink("t.html", tl_link)
    run(memsim, ["run", "graphs/mlp.json", "--timeline", tl_link])
    if not os.path.islink(tl_link) or read(tl_target) == b"old":
        fail("--timeline onto a symlink did not replace its target")
    d = os.path.join(tmp, "dir.csv")
    os.mkdir(d)
    expect_error(memsim, ["sweep", "graphs/mlp.json", "--batch", "1,2", "--out", d], "is a directory")
    expect_error(memsim, ["merge", d, part], "is a directory")
    print("ok: one rule for symlinks, devices and directories")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def memory(memsim, tmp):
    # 10 million configurations of a two-op graph: 1000 batches x 10000 widths.
    args = ["sweep", "tests/data/sweep_tiny.json", "--batch", ",".join(str(b) for b in range(1, 1001)),
            "--set", "width=" + ",".join(str(w) for w in range(1, 10001)), "--profile", "cpu", "--torch", "1.13", "--optimizer", "none",
            "--allocator", "ideal", "--csv"]
    p = subprocess.Popen([memsim] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rows, samples, t0 = 0, [], time.time()
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        rows += chunk.count(b"\n")
        if rows > 500000 and (not samples or rows - samples[-1][0] > 1000000):
            samples.append((rows, rss_kib(p.pid)))
    p.wait()
    if p.returncode != 0:
        fail("the 10-million-row sweep failed: " + p.stderr.read().decode()[-2000:])
    if rows != 10_000_000 + 1:
        fail("%d lines, expected 10,000,001" % rows)
    first, last = samples[0][1], max(s[1] for s in samples)
    print("rows, RSS KiB:", samples, "%.0f s" % (time.time() - t0))
    if last > first + 16 * 1024:
        fail("RSS grew from %d KiB to %d KiB while writing 10 million rows" % (first, last))
    print("ok: 10 million rows, RSS %d -> %d KiB" % (first, last))


def main():
    memsim, src, mode = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.chdir(src)
    with tempfile.TemporaryDirectory(prefix="memsim-sweep-") as tmp:
        {"threads": threads, "resume": resume, "shards": shards, "memory": memory, "files": files}[mode](memsim, tmp)


if __name__ == "__main__":
    main()
