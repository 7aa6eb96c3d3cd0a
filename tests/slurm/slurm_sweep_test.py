#!/usr/bin/env python3
"""The Slurm path of `memsim sweep`, run for real: starts munge and a single-node Slurm
(slurmctld + slurmd, configured for localhost in a temporary directory, as root), submits
tools/slurm/sweep.sbatch as a 3-task job array, merges the parts with `memsim merge` and compares
the bytes with the unsharded sweep. The daemons it started are stopped (by their pids) and the
directory removed whatever happens. It never skips: missing packages or no root is a failure.

usage: slurm_sweep_test.py MEMSIM SOURCE_DIR
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SWEEP = ["graphs/mlp.json", "--batch", "1,2,3,4,5,6,7", "--optimizer", "sgd,adam", "--profile", "cuda,cpu"]
DAEMONS = ["munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "mungekey"]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, pred, timeout, logs=()):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.2)
    for log in logs:
        if os.path.exists(log):
            print("---- " + log, file=sys.stderr)
            print(open(log, errors="replace").read()[-4000:], file=sys.stderr)
    fail("timed out waiting for " + what)


def main():
    memsim, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    missing = [d for d in DAEMONS if not shutil.which(d, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
    if missing:
        fail("not installed: %s (make deps installs slurmctld, slurmd, slurm-client and munge)" % ", ".join(missing))
    if os.geteuid() != 0:
        fail("this test starts slurmctld, slurmd and munged and must run as root")
    tmp = tempfile.mkdtemp(prefix="memsim-slurm-")
    os.chmod(tmp, 0o755)
    procs = []
    try:
        run_test(memsim, src, tmp, procs)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run_test(memsim, src, tmp, procs):
    sbin = lambda name: shutil.which(name, path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
    # munge: its own key, socket and files in |tmp|.
    mdir = os.path.join(tmp, "munge")
    os.makedirs(mdir, mode=0o700)
    key, sock = os.path.join(mdir, "munge.key"), os.path.join(mdir, "munge.sock")
    subprocess.run([sbin("mungekey"), "--create", "--keyfile", key], check=True)
    os.chmod(key, 0o600)
    mlog = os.path.join(mdir, "munged.log")
    procs.append(subprocess.Popen([sbin("munged"), "--foreground", "--force", "--key-file", key, "--socket", sock,
                                   "--pid-file", os.path.join(mdir, "munged.pid"), "--log-file", mlog,
                                   "--seed-file", os.path.join(mdir, "munged.seed")],
                                  stdout=subprocess.DEVNULL, stderr=open(mlog + ".err", "w")))
    wait_for("munged", lambda: os.path.exists(sock), 20, [mlog])

    host = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    conf = os.path.join(tmp, "slurm.conf")
    state, spool = os.path.join(tmp, "state"), os.path.join(tmp, "spool")
    os.makedirs(state)
    os.makedirs(spool)
    ctl_log, d_log = os.path.join(tmp, "slurmctld.log"), os.path.join(tmp, "slurmd.log")
    with open(conf, "w") as f:
        f.write("\n".join([
            "ClusterName=memsimtest",
            "SlurmctldHost=%s(127.0.0.1)" % host,
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthInfo=socket=%s" % sock,
            "SlurmUser=root",
            "SlurmdUser=root",
            "SlurmctldPort=%d" % free_port(),
            "SlurmdPort=%d" % free_port(),
            "StateSaveLocation=%s" % state,
            "SlurmdSpoolDir=%s" % spool,
            "SlurmctldPidFile=%s" % os.path.join(tmp, "slurmctld.pid"),
            "SlurmdPidFile=%s" % os.path.join(tmp, "slurmd.pid"),
            "SlurmctldLogFile=%s" % ctl_log,
            "SlurmdLogFile=%s" % d_log,
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            "SlurmdTimeout=30",
            "NodeName=%s NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN" % (host, cpus),
            "PartitionName=memsim Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            ""]))
    # slurmd 22.05 reads cgroup.conf even with proctrack/linuxproc when it exists; none here.
    env = dict(os.environ, SLURM_CONF=conf)
    procs.append(subprocess.Popen([sbin("slurmctld"), "-D", "-i", "-f", conf], env=env, stdout=subprocess.DEVNULL,
                                  stderr=open(ctl_log + ".err", "w")))
    procs.append(subprocess.Popen([sbin("slurmd"), "-D", "-f", conf, "-N", host], env=env, stdout=subprocess.DEVNULL,
                                  stderr=open(d_log + ".err", "w")))

    def node_idle():
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
        return r.returncode == 0 and r.stdout.strip() in ("idle", "mixed")
    wait_for("the node to be idle", node_idle, 60, [ctl_log, d_log])

    out = os.path.join(tmp, "out")
    os.makedirs(out)
    job_env = dict(env, MEMSIM=memsim)
    r = subprocess.run(["sbatch", "--wait", "--array=1-3", "--cpus-per-task=1", "--chdir=" + src,
                        "--output=" + os.path.join(out, "task-%a.log"),
                        os.path.join(src, "tools/slurm/sweep.sbatch"), out, "csv"] + SWEEP,
                       env=job_env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        for name in sorted(os.listdir(out)):
            if name.endswith(".log"):
                print("---- " + name + "\n" + open(os.path.join(out, name)).read(), file=sys.stderr)
        fail("sbatch --wait failed (%d): %s %s" % (r.returncode, r.stdout, r.stderr))
    parts = [os.path.join(out, "part-%d.csv" % k) for k in (1, 2, 3)]
    for p in parts:
        if not os.path.exists(p):
            fail(p + " was not written")
    merged = os.path.join(tmp, "merged.csv")
    subprocess.run([memsim, "merge", merged] + parts, check=True, cwd=src)
    whole = os.path.join(tmp, "whole.csv")
    subprocess.run([memsim, "sweep"] + SWEEP + ["--out", whole], check=True, cwd=src)
    if open(merged, "rb").read() != open(whole, "rb").read():
        fail("the merged shards differ from the unsharded sweep")
    print("ok: 3 Slurm array tasks, merged == unsharded (%d bytes)" % os.path.getsize(whole))


if __name__ == "__main__":
    main()
