"""Record what ``why()`` asks a real Slurm while a QOS or association limit holds a job, for the unit tests of
the limit arithmetic and of ``why()`` replayed (issue 25, point 8).

    python scripts/record_limits.py 22.05
    bash scripts/in-slurm-root.sh 24.11 python scripts/record_limits.py 24.11

Starts a seed sandbox with accounting (2 nodes × 4 GPUs; QOS ``normal`` caps each user at 4 GPUs, ``debug`` too,
with 30 minutes at most) and, through a Runner that writes down every command ``why()`` runs (argv, exit code,
stdout, stderr), records these scenes into ``tests/data/slurm/<version>/limits/``:

- ``q*``: the user's running job holds 4 GPUs in QOS normal; a second asks for 2 and waits (QOSMaxGRESPerUser).
  ``qx*``: ``sbatch --test-only`` of a shorter time says "would start" all the same: it applies no QOS limit.
  ``k*``: ``slurmlab doctor --job`` of that job. ``d*``: the same why() with slurmdbd stopped: the limits
  cannot be read.
- ``a*``: the user's association in ``research`` allows one running job (MaxJobs=1), the account ``teaching``
  two GPUs in all (GrpTRES), QOS ``debug`` more limits of its own; a second job in ``research`` waits
  (AssocMaxJobsLimit).
- ``o*``: a sandbox without accounting, a job waiting for Resources behind a full node: sacctmgr says accounting
  is off; the changes ``--test-only`` answers start after the job's own expected start.

After each ``why()`` every change it offered is taken for real (sbatch) and its state a few seconds later is
recorded (``*t*_taken_*``): the evidence that what is offered starts. Paths are rewritten to /srv/sandbox and
/home/user and the host name to ``vm``; ``commands.txt`` lists each file with its argv and exit code (FakeRunner's
``recorded``)."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _recording import DATA, REPO, emptied, rewrite, sandbox, scratch, version_parser, write_commands

from slurmlab.sandbox import Sandbox
from slurmlab.slurm.allocation.pending import PendingWhy, why
from slurmlab.slurm.doctor import doctor
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.runner import Runner, RunResult


@dataclass
class Sink:
    out: Path
    rewrites: list[tuple[str, str]]
    prefix: str = ""
    lines: list[str] = field(default_factory=list)
    n: int = 0

    def clean(self, text: str) -> str:
        return rewrite(text, self.rewrites)

    def save(self, argv: Sequence[str], rc: int, out: str, err: str, name: str = "") -> str:
        self.n += 1
        slug = "_".join(a.strip("-").replace("/", "") for a in argv[:3] if a.strip("-"))[:40]
        name = name or f"{self.prefix}{self.n:02d}_{slug}.txt"
        stem = name.rpartition(".")[0]
        if out:
            (self.out / name).write_text(self.clean(out))
        if err:
            (self.out / f"{stem}.stderr").write_text(self.clean(err))
        self.lines.append(f"{name}\trc={rc}\t{self.clean(shlex.join(argv))}")
        return name


@dataclass
class RecordingRunner(Runner):
    """A Runner that writes down every command run through it, as FakeRunner replays them."""

    sink: Sink | None = None

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        res = super().run(argv, timeout=timeout, check=False, input=input, env=env)
        if self.sink is not None:
            self.sink.save(list(argv), res.returncode, res.stdout, res.stderr)
        if check and res.returncode != 0:
            raise classify_failure(list(argv), res.returncode, res.stderr or res.stdout)
        return res


def _plain(sb: Sandbox) -> Runner:
    return sb.runner(30.0)


def submit(r: Runner, *options: str) -> str:
    """A job of ``options`` that keeps what it gets (sleep 3000): its id."""
    return r.run(["sbatch", "--parsable", "-o", "/dev/null", *options, "--wrap", "sleep 3000"]).stdout.strip()


def recording(sb: Sandbox, sink: Sink, prefix: str) -> RecordingRunner:
    """A RecordingRunner on ``sb`` whose files are named ``<prefix>01_…``, ``<prefix>02_…``."""
    sink.prefix, sink.n = prefix, 0
    return RecordingRunner(slurm_conf=str(sb.conf_path), timeout=30.0, sink=sink)


def recorded_why(rec: RecordingRunner, job: str) -> PendingWhy:
    """why(job) through ``rec``, after the ``sinfo --version`` a replay answers first; what it said printed."""
    rec.run(["sinfo", "--version"])
    got = why(job, rec)
    print(got.text())
    return got


def _wait(r: Runner, job: str, want: str, seconds: float = 60) -> str:
    end = time.monotonic() + seconds
    said = ""
    while time.monotonic() < end:
        said = r.run(["squeue", "-h", "-j", job, "-o", "%T|%r"], check=False).stdout.strip()
        if said.startswith(want):
            return said
        time.sleep(0.5)
    raise SystemExit(f"job {job} never got to {want}: {said}")


def _scene(sb: Sandbox, sink: Sink, prefix: str, job: str) -> None:
    """why(job) through the recording runner, then every offered change taken for real."""
    got = recorded_why(recording(sb, sink, prefix), job)
    sink.prefix, sink.n = prefix + "t", 0
    plain = _plain(sb)
    for alt in got.sooner:
        taken = submit(plain, *alt.variant.options)
        time.sleep(5)  # the scheduler passes every second here (bf_interval=1)
        argv = ["squeue", "-h", "-j", taken, "-o", "%T|%r"]
        res = plain.run(argv, check=False)
        sink.save(
            argv, res.returncode, res.stdout, res.stderr, name=f"{prefix}t{sink.n + 1:02d}_taken_state.txt"
        )
        print("taken:", alt.variant.change, "->", res.stdout.strip())
        plain.run(["scancel", taken], check=False)


def _with_accounting(base: Path, sink: Sink) -> None:
    with sandbox("seed", base / "on", nodes=2, accounting=True) as sb:
        r = _plain(sb)
        first = submit(r, "--gpus=4", "-t", "60", "-J", "cap")
        _wait(r, first, "RUNNING")
        over = submit(r, "--gpus=2", "-t", "10", "-J", "over")
        _wait(r, over, "PENDING|QOS")
        _scene(sb, sink, "q", over)
        print(
            doctor(recording(sb, sink, "k"), job=over).text()
        )  # the doctor asks the same, and a little more
        sink.prefix, sink.n = "qx", 0
        argv = [
            "sbatch",
            "--test-only",
            "-o",
            "/dev/null",
            "--account=research",
            "--qos=normal",
            "-p",
            "debug",
            "-N",
            "1",
            "--mem=1000M",
            "--gpus=2",
            "-t",
            "5",
            "--wrap=true",
        ]
        res = r.run(argv, check=False)
        sink.save(argv, res.returncode, res.stdout, res.stderr, name="qx01_test_only_ignores_the_qos_cap.txt")
        os.kill(
            sb.pids["slurmdbd"], signal.SIGTERM
        )  # the accounting database gone: the limits cannot be read
        time.sleep(2)
        _scene(sb, sink, "d", over)
        sb.restart()
        r.run(["scancel", first, over], check=False)
        admin = ["sacctmgr", "-i", "modify"]
        r.run([*admin, "user", "where", "name=root", "account=research", "set", "MaxJobs=1"])
        r.run([*admin, "account", "where", "name=teaching", "set", "GrpTRES=gres/gpu=2"])
        r.run(
            [
                *admin,
                "qos",
                "where",
                "name=debug",
                "set",
                "MaxJobsPU=4",
                "MaxSubmitJobsPU=10",
                "GrpTRES=gres/gpu=6",
                "MaxTRESPerJob=gres/gpu=4,cpu=16",
            ]
        )
        time.sleep(2)
        first = submit(r, "-A", "research", "--gpus=1", "-t", "60", "-J", "one")
        _wait(r, first, "RUNNING")
        second = submit(r, "-A", "research", "--gpus=2", "-t", "20", "-J", "second")
        _wait(r, second, "PENDING|Assoc")
        _scene(sb, sink, "a", second)
        r.run(["scancel", first, second], check=False)


def _without_accounting(base: Path, sink: Sink) -> None:
    with sandbox("seed", base / "off", nodes=1, accounting=False) as off:
        r = _plain(off)
        first = submit(r, "--gpus=4", "-t", "60", "-J", "full")
        _wait(r, first, "RUNNING")
        second = submit(r, "--gpus=2", "-t", "10", "-J", "waits")
        _wait(r, second, "PENDING|Resources")
        time.sleep(3)  # backfill (every second here) gives it an expected start
        _scene(off, sink, "o", second)
        r.run(["scancel", first, second], check=False)


def record(version: str) -> int:
    out = emptied(DATA / version / "limits")
    with scratch("slsb-lim-") as base:
        rewrites = [
            (str(base / "on"), "/srv/sandbox"),
            (str(base / "off"), "/srv/sandbox"),
            (str(REPO), "/home/user"),
            (socket.gethostname(), "vm"),
        ]
        sink = Sink(out, rewrites)
        sink.lines.append(f"# recorded by scripts/record_limits.py from Slurm {version} sandboxes (seed)")
        _with_accounting(base, sink)
        _without_accounting(base, sink)
    write_commands(out, sink.lines)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return record(version_parser(__doc__, "limits").parse_args(argv).version)


if __name__ == "__main__":
    sys.exit(main())
