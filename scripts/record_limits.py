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

import argparse
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "slurm"  # the recordings go to DATA/<version>/limits
sys.path.insert(0, str(REPO))

from slurmlab.sandbox import Sandbox  # noqa: E402
from slurmlab.slurm.allocation.pending import why  # noqa: E402
from slurmlab.slurm.doctor import doctor  # noqa: E402
from slurmlab.slurm.failures import classify_failure  # noqa: E402
from slurmlab.slurm.runner import Runner, RunResult  # noqa: E402


@dataclass
class Sink:
    out: Path
    rewrites: list[tuple[str, str]]
    prefix: str = ""
    lines: list[str] = field(default_factory=list)
    n: int = 0

    def clean(self, text: str) -> str:
        for old, new in self.rewrites:
            text = text.replace(old, new)
        return text

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


def _submit(r: Runner, *options: str) -> str:
    return r.run(["sbatch", "--parsable", "-o", "/dev/null", *options, "--wrap", "sleep 3000"]).stdout.strip()


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
    sink.prefix, sink.n = prefix, 0
    rec = RecordingRunner(slurm_conf=str(sb.conf_path), timeout=30.0, sink=sink)
    rec.run(["sinfo", "--version"])
    got = why(job, rec)
    print(got.text())
    sink.prefix, sink.n = prefix + "t", 0
    plain = _plain(sb)
    for alt in got.sooner:
        taken = _submit(plain, *alt.variant.options)
        time.sleep(5)  # the scheduler passes every second here (bf_interval=1)
        argv = ["squeue", "-h", "-j", taken, "-o", "%T|%r"]
        res = plain.run(argv, check=False)
        sink.save(
            argv, res.returncode, res.stdout, res.stderr, name=f"{prefix}t{sink.n + 1:02d}_taken_state.txt"
        )
        print("taken:", alt.variant.change, "->", res.stdout.strip())
        plain.run(["scancel", taken], check=False)


def _with_accounting(base: Path, sink: Sink) -> None:
    sb = Sandbox.up(profile="seed", nodes=2, directory=base / "on", accounting=True)
    try:
        r = _plain(sb)
        first = _submit(r, "--gpus=4", "-t", "60", "-J", "cap")
        _wait(r, first, "RUNNING")
        over = _submit(r, "--gpus=2", "-t", "10", "-J", "over")
        _wait(r, over, "PENDING|QOS")
        _scene(sb, sink, "q", over)
        sink.prefix, sink.n = "k", 0  # the doctor asks the same, and a little more
        print(doctor(RecordingRunner(slurm_conf=str(sb.conf_path), timeout=30.0, sink=sink), job=over).text())
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
        first = _submit(r, "-A", "research", "--gpus=1", "-t", "60", "-J", "one")
        _wait(r, first, "RUNNING")
        second = _submit(r, "-A", "research", "--gpus=2", "-t", "20", "-J", "second")
        _wait(r, second, "PENDING|Assoc")
        _scene(sb, sink, "a", second)
        r.run(["scancel", first, second], check=False)
    finally:
        sb.down()


def _without_accounting(base: Path, sink: Sink) -> None:
    off = Sandbox.up(profile="seed", nodes=1, directory=base / "off", accounting=False)
    try:
        r = _plain(off)
        first = _submit(r, "--gpus=4", "-t", "60", "-J", "full")
        _wait(r, first, "RUNNING")
        second = _submit(r, "--gpus=2", "-t", "10", "-J", "waits")
        _wait(r, second, "PENDING|Resources")
        time.sleep(3)  # backfill (every second here) gives it an expected start
        _scene(off, sink, "o", second)
        r.run(["scancel", first, second], check=False)
    finally:
        off.down()


def record(version: str) -> int:
    out = DATA / version / "limits"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    base = Path(tempfile.mkdtemp(prefix="slsb-lim-", dir="/tmp"))
    base.chmod(0o711)
    rewrites = [
        (str(base / "on"), "/srv/sandbox"),
        (str(base / "off"), "/srv/sandbox"),
        (str(REPO), "/home/user"),
        (socket.gethostname(), "vm"),
    ]
    sink = Sink(out, rewrites)
    sink.lines.append(f"# recorded by scripts/record_limits.py from Slurm {version} sandboxes (seed)")
    try:
        _with_accounting(base, sink)
        _without_accounting(base, sink)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    (out / "commands.txt").write_text("\n".join(sink.lines) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        epilog="It starts its own sandbox (minutes) and replaces what the folder held before.",
    )
    parser.add_argument(
        "version",
        help="the Slurm version installed here (22.05, 24.11, 26.05): writes tests/data/slurm/VERSION/limits/",
    )
    return record(parser.parse_args(argv).version)


if __name__ == "__main__":
    sys.exit(main())
