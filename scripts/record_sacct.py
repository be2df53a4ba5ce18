#!/usr/bin/env python3
"""Record ``sacct`` (and the ``scontrol show job`` fallback) of the Slurm installed here, for the sacct parser.

Run inside a version's root, e.g.::

    bash scripts/in-slurm-root.sh 24.11 python scripts/record_sacct.py tests/data/slurm/24.11/sacct

It starts a 2-node ``seed`` sandbox with accounting, runs jobs that end every way a sandbox can end them
(completed, exit 3, steps with their own exit codes, a GPU job, a real ``--mem`` overrun, a time limit reached,
cancelled by the user, a ``salloc --no-shell`` allocation with steps, a name with ``|`` and a newline), waits
until accounting has them, and writes ``a01_sacct_jobs.txt`` (the jobs with their steps), ``a02_sacct_recent.txt``
(the user's jobs since an hour ago), ``a03_scontrol_show_job_*.txt`` (ended jobs the controller still remembers)
with ``commands.txt``; then a sandbox without accounting gives ``a04_sacct_disabled``. Paths become
/srv/sandbox, the host name ``vm``. Both sandboxes are stopped at the end, failure included.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from _recording import parser, rewrite, sandbox, scratch, write_commands

from slurmlab.core.slurm.sacct import SACCT_FIELDS
from slurmlab.sandbox import Sandbox

FORMAT = "--format=" + ",".join(SACCT_FIELDS)
OOM = "import time; x = b'x' * (600 << 20); time.sleep(30)"
JOBS = {
    "done": ["-t", "5", "--wrap", "true"],
    "fail": ["-t", "5", "--wrap", "exit 3"],
    "steps": ["-t", "5", "--wrap", "srun -J ok true; srun -J bad sh -c 'exit 2'; exit 0"],
    "gpu": ["-t", "5", "--gpus=1", "--wrap", "sleep 3"],
    "oom": ["-t", "5", "--mem=200M", "--wrap", f"srun -J eat python3 -c {shlex.quote(OOM)}"],
    "timeout": ["-t", "1", "--wrap", "sleep 300"],
    "cancelme": ["-t", "5", "--wrap", "sleep 300"],
    "we|ird\nname=x": ["-t", "5", "--wrap", "true"],
}


def run(sb: Sandbox, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=60, env={**os.environ, **sb.env()}, cwd="/tmp"
    )
    if check and r.returncode != 0:
        raise SystemExit(f"{argv}: rc={r.returncode}: {r.stderr}")
    return r


def active(sb: Sandbox, ids: list[str]) -> list[str]:
    out = run(sb, "squeue", "-h", "-o", "%i", "-j", ",".join(ids), check=False).stdout
    return out.split()


def workload(sb: Sandbox, out: Path) -> dict[str, str]:
    ids = {}
    for name, args in JOBS.items():
        ids[name] = run(sb, "sbatch", "--parsable", "-J", name, "-o", "/dev/null", *args).stdout.strip()
    alloc = run(sb, "salloc", "--no-shell", "-J", "alloc", "-t", "5").stderr
    ids["alloc"] = alloc.split("Granted job allocation")[1].split()[0]
    run(sb, "srun", f"--jobid={ids['alloc']}", "--overlap", "-J", "hello", "true")
    run(sb, "srun", f"--jobid={ids['alloc']}", "--overlap", "-J", "four", "sh", "-c", "exit 4", check=False)
    time.sleep(3)
    run(sb, "scancel", ids["cancelme"])
    run(sb, "scancel", ids["alloc"])
    deadline = time.monotonic() + 240
    while active(sb, list(ids.values())) and time.monotonic() < deadline:
        time.sleep(2)
    for name in ("timeout", "oom", "cancelme"):
        r = run(sb, "scontrol", "show", "job", ids[name], check=False)
        (out / f"a03_scontrol_show_job_{name}.txt").write_text(r.stdout)
    time.sleep(5)  # slurmctld hands the job ends to slurmdbd asynchronously
    return ids


def record(out: Path, work: Path) -> int:
    commands: list[str] = []
    with sandbox("seed", work / "a", nodes=2, accounting=True) as sb:
        ids = workload(sb, out)
        jobs = ["sacct", "--parsable2", "--noheader", FORMAT, "-j", ",".join(ids.values())]
        recent = ["sacct", "--parsable2", "--noheader", FORMAT, "-u", sb.state["user"], "-S", "now-1hours"]
        for name, argv in (("a01_sacct_jobs.txt", jobs), ("a02_sacct_recent.txt", recent)):
            r = run(sb, *argv)
            (out / name).write_text(r.stdout)
            commands.append(f"{name}\trc={r.returncode}\t{shlex.join(argv)}")
        for name in ("timeout", "oom", "cancelme"):
            commands.append(f"a03_scontrol_show_job_{name}.txt\trc=0\tscontrol show job {ids[name]}")
    with sandbox("seed", work / "b", nodes=1, accounting=False) as sb:
        argv = ["sacct", "--parsable2", "--noheader", FORMAT, "-j", "1"]
        r = run(sb, *argv, check=False)
        (out / "a04_sacct_disabled.stderr").write_text(r.stderr)
        if r.stdout:
            (out / "a04_sacct_disabled.txt").write_text(r.stdout)
        commands.append(f"a04_sacct_disabled.txt\trc={r.returncode}\t{shlex.join(argv)}")
    write_commands(out, commands, f"# sacct recorded by scripts/record_sacct.py; jobs {ids}\n")
    rewrites = [
        (str(work / "a"), "/srv/sandbox"),
        (str(work / "b"), "/srv/sandbox"),
        (socket.gethostname(), "vm"),
    ]
    for f in out.iterdir():
        if f.name != "commands.txt":
            f.write_text(rewrite(f.read_text(), rewrites))
    print(f"recorded {len(commands)} commands into {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser(__doc__, "It starts its own sandboxes (minutes) and writes over the files of the same names.")
    ap.add_argument("out", type=Path, help="the folder to write, e.g. tests/data/slurm/24.11/sacct")
    out = ap.parse_args(argv).out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with scratch("slsb-rec-", keep=True) as work:
        return record(out, work)


if __name__ == "__main__":
    raise SystemExit(main())
