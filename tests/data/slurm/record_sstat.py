"""Record ``sstat`` output of a running allocation from a real sandbox with accounting, for the parser's tests.

    python tests/data/slurm/record_sstat.py 22.05
    bash scripts/in-slurm-root.sh 24.11 python tests/data/slurm/record_sstat.py 24.11

Writes ``u*_sstat_*.txt`` (stdout; ``.stderr`` beside it when sstat said something there) into
``tests/data/slurm/<version>/sstat/`` and lists each command with its exit code in ``sstat_commands.txt``: a job with
no step yet, a step in its first milliseconds (before the gatherer's first reading, when the race is won), a busy
two-task step read twice a few seconds apart (with and without ``--allsteps``), and a job Slurm does not know.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))  # _recording: what the recorders share

from _recording import sandbox, scratch, version_parser, write_commands  # noqa: E402

from slurmlab.core.slurm.sstat import SSTAT_FIELDS  # noqa: E402
from slurmlab.sandbox import Sandbox  # noqa: E402

FORMAT = f"--format={','.join(SSTAT_FIELDS)}"
BUSY = "import time\nt = time.time()\nwhile time.time() - t < 40: pass"


def record(sb: Sandbox, out: Path) -> list[str]:
    """The scenes into ``out``; the commands they ran, as sstat_commands.txt lists them."""
    env = {**os.environ, **sb.env()}
    listed: list[str] = []

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=30, cwd="/")

    def record(name: str, *argv: str) -> None:
        r = run(*argv)
        (out / f"{name}.txt").write_text(r.stdout)
        if r.stderr:
            (out / f"{name}.stderr").write_text(r.stderr)
        listed.append(f"{name}: {' '.join(argv)}  -> exit {r.returncode}")

    busy = None
    try:
        r = run("salloc", "--no-shell", "-N1", "-n2", "--gres=gpu:1", "-t", "5", "-J", "sstat-rec")
        assert r.returncode == 0, r.stderr
        jid = run("squeue", "-h", "-o", "%i", "-n", "sstat-rec").stdout.split()[0]
        record("u00_sstat_no_step", "sstat", "--parsable2", "--noheader", "--allsteps", "-j", jid, FORMAT)
        busy = subprocess.Popen(
            ["srun", f"--jobid={jid}", "--overlap", "-n2", "python3", "-c", BUSY], env=env, cwd="/"
        )
        starting = _readings_before_the_first(run, jid)
        if starting:  # a race with the gatherer's first poll: seen on 24.11, not on every run
            (out / "u05_sstat_step_starting.txt").write_text("".join(starting))
            listed.append(
                "u05_sstat_step_starting: the readings of the step's first 3 s before one with CPU time"
            )
        time.sleep(8)
        record("u01_sstat_busy_step", "sstat", "--parsable2", "--noheader", "--allsteps", "-j", jid, FORMAT)
        time.sleep(4)
        record(
            "u02_sstat_busy_step_later", "sstat", "--parsable2", "--noheader", "--allsteps", "-j", jid, FORMAT
        )
        record("u03_sstat_job_default_step", "sstat", "--parsable2", "--noheader", "-j", jid, FORMAT)
        record(
            "u04_sstat_unknown_job",
            "sstat",
            "--parsable2",
            "--noheader",
            "--allsteps",
            "-j",
            "999999",
            FORMAT,
        )
        write_commands(out, listed, name="sstat_commands.txt")
        run("scancel", jid)
    finally:
        if busy is not None:
            busy.kill()
    return listed


def _readings_before_the_first(run: Callable[..., subprocess.CompletedProcess[str]], jid: str) -> list[str]:
    """sstat as fast as it answers for 3 s of a new step: the step lines without a CPU reading yet."""
    seen: list[str] = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        text = run("sstat", "--parsable2", "--noheader", "--allsteps", "-j", jid, FORMAT).stdout
        if "cpu=" in text:
            break
        seen += [line + "\n" for line in text.splitlines() if line and line + "\n" not in seen]
    return seen


def main(argv: Sequence[str] | None = None) -> int:
    epilog = "It starts its own sandbox (minutes) and writes over the files of the same names."
    version = version_parser(__doc__, "sstat", epilog).parse_args(argv).version
    out = HERE / version / "sstat"  # apart from the outputs `slurmlab parse` reads
    out.mkdir(exist_ok=True)
    with scratch("slsb-sstat-") as base, sandbox("seed", base / "sb", nodes=2, accounting=True) as sb:
        listed = record(sb, out)
    print("\n".join(listed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
