"""Record what Slurm's client commands print and return when slurmctld rate-limits a user (issue 27, point 3).

    bash scripts/in-slurm-root.sh 24.11 python scripts/record_rate_limit.py 24.11
    bash scripts/in-slurm-root.sh 26.05 python scripts/record_rate_limit.py 26.05

Needs root and Slurm 23.02 or later (22.05 has no ``SlurmctldParameters=rl_enable``). slurmctld exempts its
SlurmUser and root from the limit, and a sandbox started by root runs its daemons as root, so every command is
run as a second Unix user (:mod:`slurmlab.testing.other_user`), admitted to the sandbox's munged.

Starts a seed sandbox (accounting where the machine has slurmdbd and MariaDB) whose slurmctld allows that user a
bucket of 3 requests and 1 more each second, then for each of squeue, scontrol, sacct, srun, salloc and scancel:

- ``seq``: the command run 6 times back to back;
- ``par``: 8 at once (more than the bucket: some must wait);
- ``v``: once with ``-v`` while 6 squeue of the same user are asking (what the client says it does).

``ping``: ``scontrol ping`` the same way, which slurmlab's runner asks about a command that has not answered in
2 s (:mod:`slurmlab.slurm.stall`). ``--only ping`` records one scene again and keeps the others.

Every run goes to ``tests/data/slurm/<version>/rate_limit/`` (stdout as ``.txt``, stderr as ``.stderr``);
``commands.txt`` lists name, exit code, argv and the seconds it took (``s=``), the format FakeRunner's
``recorded`` reads. ``slurmctld-rate-limit.log`` keeps slurmctld's own lines about the limit. Host name and
folders are rewritten (``vm``, ``/srv/sandbox``), the second user's name to ``user``."""

from __future__ import annotations

import shlex
import shutil
import socket
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from _recording import DATA, rewrite, sandbox, scratch, version_parser, write_commands

from slurmlab.sandbox import RateLimit, Sandbox
from slurmlab.slurm.runner import Runner, RunResult
from slurmlab.testing.other_user import OTHER_USER, admit, as_user, ensure_user

SCENES = ("squeue", "scontrol", "sacct", "srun", "salloc", "scancel", "ping")
LIMIT = RateLimit(bucket_size=3, refill_rate=1, refill_period=1)
TIMEOUT = 180.0  # a throttled client may sleep and retry for long; a hang still ends


@dataclass
class Sink:
    out: Path
    rewrites: list[tuple[str, str]]
    lines: list[str] = field(default_factory=list)
    wanted: set[str] = field(default_factory=set)

    def clean(self, text: str) -> str:
        return rewrite(text, self.rewrites)

    def save(self, name: str, res: RunResult, argv: Sequence[str]) -> None:
        if res.stdout:
            (self.out / f"{name}.txt").write_text(self.clean(res.stdout))
        if res.stderr:
            (self.out / f"{name}.stderr").write_text(self.clean(res.stderr))
        self.lines.append(
            f"{name}.txt\trc={res.returncode}\t{self.clean(shlex.join(argv))}\ts={res.duration:.2f}"
        )
        first = (res.stderr.strip().splitlines() or [""])[0][:100]
        print(f"{name}: rc={res.returncode} {res.duration:.2f}s {self.clean(first)}", flush=True)


def _as(argv: Sequence[str]) -> list[str]:
    return as_user(OTHER_USER, argv)


def _submit(r: Runner) -> str:
    res = r.run(_as(["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 3000"]), timeout=TIMEOUT)
    return res.stdout.strip().split(";")[0]


def _while_busy(r: Runner, verbose: Sequence[str]) -> RunResult:
    """``verbose`` run while 6 squeue of the same user are asking: it meets an empty bucket."""
    with ThreadPoolExecutor(6) as pool:
        for _ in range(6):
            pool.submit(r.run, _as(["squeue", "--me", "-h"]), timeout=TIMEOUT, check=False)
        time.sleep(0.3)
        return r.run(_as(verbose), timeout=TIMEOUT, check=False)


def _rest(seconds: float = 5.0) -> None:
    time.sleep(seconds)  # the bucket refills (1 a second, 3 at most)


def _same(argv: Sequence[str]) -> list[list[str]]:
    return [list(argv)] * 8


def _scenes(r: Runner, sink: Sink, stem: str, argvs: Sequence[Sequence[str]], verbose: Sequence[str]) -> None:
    """``argvs``: 8 command lines (seq uses the first 6, par all 8); ``verbose``: the -v one. Only the scenes
    of ``sink.wanted``."""
    if stem not in sink.wanted:
        return
    _rest()
    for k, argv in enumerate(argvs[:6]):
        sink.save(f"{stem}_seq{k + 1}", r.run(_as(argv), timeout=TIMEOUT, check=False), _as(argv))
    _rest()
    with ThreadPoolExecutor(len(argvs)) as pool:
        results = list(pool.map(lambda a: r.run(_as(a), timeout=TIMEOUT, check=False), argvs))
    for k, (argv, res) in enumerate(zip(argvs, results, strict=True)):
        sink.save(f"{stem}_par{k + 1}", res, _as(argv))
    _rest()
    sink.save(f"{stem}_v", _while_busy(r, verbose), _as(verbose))


def _keep_others(out: Path, only: set[str]) -> list[str]:
    """Drop the recorded files of the scenes in ``only`` (about to be recorded again); the other scenes' lines."""
    for path in out.iterdir():
        if path.name.split("_")[0] in only:
            path.unlink()
    listed = (out / "commands.txt").read_text().splitlines() if (out / "commands.txt").is_file() else []
    return [line for line in listed if line.split("_")[0] not in only]


def _record(sb: Sandbox, sink: Sink, only: set[str] | None) -> None:
    """The jobs the scenes need, the scenes of ``only`` (all when None), and what slurmctld logged of them."""
    ensure_user(OTHER_USER)
    admit(sb, OTHER_USER)
    r = sb.runner(TIMEOUT)
    _rest()
    job = _submit(r)
    _rest()
    cancels = []
    for _ in range(9):
        cancels.append(_submit(r))
        time.sleep(1.2)
    print(f"jobs: {job} (kept), {cancels} (to cancel)", flush=True)
    sink.wanted = only or set(SCENES)
    # what the runner asks about a command that has not answered in 2 s (slurmlab.slurm.stall)
    _scenes(r, sink, "ping", _same(["scontrol", "ping"]), ["scontrol", "-v", "ping"])
    _scenes(r, sink, "squeue", _same(["squeue", "--me", "-h", "-o", "%i|%T"]), ["squeue", "-v", "--me", "-h"])
    _scenes(
        r,
        sink,
        "scontrol",
        _same(["scontrol", "show", "job", job]),
        ["scontrol", "-v", "show", "job", job],
    )
    _scenes(
        r,
        sink,
        "sacct",
        _same(["sacct", "-X", "-n", "-j", job, "-o", "JobID,State"]),
        ["sacct", "-v", "-X", "-n", "-j", job],
    )
    _scenes(
        r,
        sink,
        "srun",
        _same(["srun", "-n1", "-t", "1", "true"]),
        ["srun", "-v", "-n1", "-t", "1", "true"],
    )
    _scenes(
        r,
        sink,
        "salloc",
        _same(["salloc", "-n1", "-t", "1", "true"]),
        ["salloc", "-v", "-n1", "-t", "1", "true"],
    )
    _scenes(r, sink, "scancel", [["scancel", j] for j in cancels[:8]], ["scancel", "-v", cancels[8]])
    log = (sb.directory / "log" / "slurmctld.log").read_text(errors="replace")
    said = [line for line in log.splitlines() if "rate limit" in line.lower() or "rpc limit" in line.lower()]
    (sink.out / "slurmctld-rate-limit.log").write_text(sink.clean("\n".join(said[:40]) + "\n"))
    print(f"slurmctld logged {len(said)} rate-limit lines; first: {said[:1]}", flush=True)


def record(version: str, accounting: bool | None, only: set[str] | None = None) -> None:
    out = DATA / version / "rate_limit"
    if only is None and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    kept = _keep_others(out, only) if only else []
    with (
        scratch("slurmlab-rl-", mode=0o755, parent=None) as folder,
        sandbox("seed", folder / "sb", rate_limit=LIMIT, accounting=accounting) as sb,
    ):
        sink = Sink(
            out,
            [(str(folder / "sb"), "/srv/sandbox"), (socket.gethostname(), "vm"), (OTHER_USER, "user")],
            kept,
        )
        try:
            _record(sb, sink, only)
        finally:
            write_commands(out, sink.lines)


def main() -> None:
    ap = version_parser(
        __doc__,
        "rate_limit",
        "It starts its own sandbox (minutes) and replaces what the folder held before (with --only: the files "
        "of those scenes).",
    )
    ap.add_argument(
        "--no-accounting", action="store_true", help="no slurmdbd (sacct then says accounting is off)"
    )
    ap.add_argument(
        "--only",
        action="append",
        choices=SCENES,
        help="record these scenes again, keep the others (repeatable)",
    )
    args = ap.parse_args()
    record(args.version, False if args.no_accounting else None, set(args.only) if args.only else None)


if __name__ == "__main__":
    main()
