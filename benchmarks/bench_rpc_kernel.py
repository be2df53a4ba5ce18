"""What an allocation's life costs the shared controller, and how soon its panel knows (issue 27, the kernel's rows).

    python benchmarks/bench_rpc_kernel.py [--rows idle,panels,kernels,latency] [--seconds 60]

Starts a dgx-h100 sandbox (accounting off; SlurmdTimeout 10 s so that a killed slurmd is noticed in the window
of this module), then measures with slurmlab's own :class:`~slurmlab.slurm.allocation.Allocation` and the
kernel's job poller at its defaults, each allocation with the usage sampler its panel starts. RPCs are counted by
Slurm's ``sdiag`` (:class:`benchmarks.bench_rpc.Counted`: reset, one window, read, the slurmds' own traffic left
out); latencies are wall-clock seconds from Slurm's own record of the event to the allocation's callback.

Rows, each beside its baseline measured in the same run:

* an idle RUNNING allocation with its panel, per minute; baseline: the same job watched where no push reaches it
  (a batch job attached by id, polled);
* 50 panels in one kernel (50 allocations, one poller), per minute;
* 10 kernels of one user (10 processes, an allocation and its panel each), per minute;
* the minute after cancelling them (the release follower, which catches a cancel a restarted controller lost);
* ``scancel`` -> the panel knows (median of 5); baseline: the attached, polled job;
* a time limit -> the panel knows (a ``-t 1`` allocation, from Slurm's EndTime);
* a killed slurmd -> the panel knows (from Slurm's EndTime of the job it took down);
* pending -> RUNNING known (from Slurm's StartTime of the job).

No counted window follows a cancel of this process: the release follower checks the user's live jobs for 5.5
minutes after one (its own row). Slurm writes StartTime and EndTime to the second, so a latency here may read up to 1 s high, never low.
With 60 s windows the module takes about 6 minutes.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row
from benchmarks.bench_rpc import GROUP, Counted, by_type, command_line

ROOT = Path(__file__).resolve().parents[1]
ALL_ROWS = ("idle", "panels", "kernels", "latency")
SETTLE_S = 8.0  # past the rounds that follow a grant and the sampler's first looks
PANELS = 50
KERNELS = 10
SCANCELS = 5
ENDED = (
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
)
LATENCY_GROUP = "event -> panel (issue 27)"

# One kernel of the "10 kernels" row: an allocation with its panel's sampler, held until stdin closes.
KERNEL_SCRIPT = """
import sys
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import Runner

runner = Runner(timeout=60)
poller = JobPoller(runner)
alloc = Allocation.submit(["-n1", "-t", "10"], runner=runner, poller=poller)
alloc.wait(timeout=120)
alloc.usage()
print("ready", alloc.job_id, flush=True)
sys.stdin.read()
alloc.cancel()
poller.stop()
"""


def _slurm_time(text: str) -> float | None:
    """``2026-12-05T01:02:03`` (local time, as scontrol prints it) -> epoch seconds; None for Unknown/None."""
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _job_times(runner: Any, job_id: str) -> dict[str, float | None]:
    """StartTime and EndTime of a job from ``scontrol show job`` (the controller's record, to the second)."""
    out = runner.run(["scontrol", "-o", "show", "job", str(job_id)], check=False).stdout
    fields = dict(tok.split("=", 1) for tok in out.split() if "=" in tok)
    return {k: _slurm_time(fields.get(k, "")) for k in ("StartTime", "EndTime")}


def _when(alloc: Any, states: tuple[str, ...]) -> Callable[[], float | None]:
    """A clock of the first moment ``alloc`` reports one of ``states`` (wall time), read after the fact."""
    seen: list[float] = []
    lock = threading.Lock()

    def callback(a: Any) -> None:
        with lock:
            if not seen and a.state in states:
                seen.append(time.time())

    alloc.subscribe(callback)
    callback(alloc)
    return lambda: seen[0] if seen else None


def _wait_for(clock: Callable[[], float | None], timeout: float) -> float | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = clock()
        if t is not None:
            return t
        time.sleep(0.01)
    return None


class Kit:
    """The sandbox, a runner and a poller at the kernel's defaults, and the allocations made (all ended after)."""

    def __init__(self, sb: Any) -> None:
        from slurmlab.slurm.poller import JobPoller

        self.sb = sb
        self.runner = sb.runner(timeout=60)
        self.poller = JobPoller(self.runner)
        self.made: list[Any] = []

    def allocation(self, *request: str, panel: bool = True) -> Any:
        from slurmlab.slurm.allocation import Allocation

        alloc = Allocation.submit(list(request), runner=self.runner, poller=self.poller)
        self.made.append(alloc)
        if panel:
            alloc.wait(timeout=120)
            alloc.usage()  # what the panel starts for a running allocation
        return alloc

    def attached(self, *request: str) -> Any:
        """A job watched by id: its salloc (``--no-shell``: no step, like an idle allocation) has returned, so
        nothing is pushed to this process and the poller reads it."""
        from slurmlab.slurm.allocation import Allocation

        made = self.runner.run(["salloc", "--no-shell", *request])
        granted = re.search(r"Granted job allocation (\d+)", made.stderr)
        if granted is None:
            raise RuntimeError(f"salloc --no-shell granted nothing: {made.stderr.strip()[-300:]}")
        alloc = Allocation.attach(granted.group(1), runner=self.runner, poller=self.poller)
        alloc.wait(timeout=120)
        alloc.usage()
        return alloc

    def end_quietly(self, alloc: Any) -> None:
        """End an attached job with a plain scancel, which starts no release follower (a cancel through the
        allocation does: it checks the user's jobs for 5.5 minutes, which must not fall into a later window)."""
        self.runner.run(["scancel", str(alloc.job_id)], check=False)
        alloc.wait("ENDED", timeout=60)

    def end_all(self) -> None:
        for alloc in self.made:
            try:
                alloc.cancel()
            except (
                Exception
            ):  # one that ended by itself, or a node that is down: cancel the rest all the same
                pass
        self.made.clear()

    def close(self) -> None:
        self.end_all()
        self.poller.stop()


def _count(counted: Counted, seconds: float, settle: float = SETTLE_S) -> Counter[str]:
    time.sleep(settle)
    with counted.window() as got:
        time.sleep(seconds)
    return got["ours"]


def _per_minute(counts: Counter[str], seconds: float) -> float:
    return sum(counts.values()) * 60.0 / seconds


def _rpc_row(
    name: str,
    ours: Counter[str],
    seconds: float,
    size: str,
    *,
    target: float | None = None,
    baseline: float | None = None,
    baseline_name: str = "",
    note: str = "",
) -> Row:
    """A row of RPCs a minute from one counted window of ``seconds``; its note: the counts by type, then ``note``."""
    return Row(
        GROUP,
        name,
        _per_minute(ours, seconds),
        "RPCs",
        target=target,
        baseline=baseline,
        baseline_name=baseline_name,
        size=size,
        note="; ".join(part for part in (by_type(ours), note) if part),
    )


def _latency_row(name: str, seconds: float, size: str, note: str, **baseline: Any) -> Row:
    """A row of how soon the panel knows, against the issue's 1.5 s."""
    return Row(LATENCY_GROUP, name, seconds, "s", target=1.5, size=size, note=note, **baseline)


def _late(seen: float | None, since: float | None) -> float:
    """Seconds from Slurm's record of an event (to the second) to the panel's; inf where either is missing."""
    return float("inf") if seen is None or since is None else max(0.0, seen - since)


def idle_rows(kit: Kit, counted: Counted, seconds: float, size: str) -> list[Row]:
    kit.allocation("--gpus=1", "-t", "10")  # kept (idle: it costs nothing) until the rows that cancel
    ours = _count(counted, seconds)
    attached = kit.attached("--gpus=1", "-t", "10")
    polled = _count(counted, seconds)
    kit.end_quietly(attached)
    return [
        _rpc_row(
            "an idle RUNNING allocation with its panel, per minute (salloc held: Slurm pushes)",
            ours,
            seconds,
            size,
            target=1,
            baseline=_per_minute(polled, seconds),
            baseline_name="the same job attached by id (no push reaches it: polled)",
            note=f"baseline {by_type(polled)}",
        )
    ]


def panels_row(kit: Kit, counted: Counted, seconds: float, size: str, one: float | None) -> Row:
    for _ in range(PANELS):
        kit.allocation("-n1", "-t", "10", panel=False)
    for alloc in kit.made:
        alloc.wait(timeout=180)
        alloc.usage()
    return _rpc_row(
        f"{PANELS} panels in one kernel ({PANELS} idle RUNNING allocations, one poller), per minute",
        _count(counted, seconds),
        seconds,
        size,
        baseline=one,
        baseline_name="one allocation's panel",
    )


@contextmanager
def kernels(sb: Any, n: int) -> Iterator[list[str]]:
    """``n`` processes, each an allocation with its panel (the job poller and sampler of its own kernel)."""
    env = {**os.environ, **sb.env(), "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", KERNEL_SCRIPT],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(n)
    ]
    jobs = []
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().split()
            if line[:1] != ["ready"]:
                raise RuntimeError(f"a kernel of the bench did not get its allocation (exit {p.poll()})")
            jobs.append(line[1])
        yield jobs
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


def kernels_row(sb: Any, counted: Counted, seconds: float, size: str, one: float | None) -> Row:
    with kernels(sb, KERNELS):
        ours = _count(counted, seconds)
    return _rpc_row(
        f"{KERNELS} kernels of one user (an idle allocation and its panel each), per minute",
        ours,
        seconds,
        size,
        baseline=one,
        baseline_name="one kernel's",
    )


def after_cancel_row(kit: Kit, counted: Counted, seconds: float, size: str) -> Row:
    """The minute after the kernel cancels its allocations: the release follower reads the user's live jobs (one
    squeue for all of them within FIRST_CHECK of the first cancel, then one every FOLLOW_INTERVAL, for 5.5 minutes
    after the last cancel) so that a cancel a restarted controller lost is caught, and the watches follow each job
    to its end."""
    from slurmlab.slurm.allocation.release import FIRST_CHECK, FOLLOW_INTERVAL

    cancelled = len(kit.made)
    kit.end_all()
    return _rpc_row(
        f"the minute after cancelling {cancelled} allocations (the release follower's checks), per minute",
        _count(counted, seconds, settle=0.0),
        seconds,
        size,
        note=(
            f"the follower looks {FIRST_CHECK:g} s after a cancel, then every {FOLLOW_INTERVAL:g} s, and stops 5.5 "
            "minutes after the last cancel"
        ),
    )


def _scancel_latency(kit: Kit, alloc: Any) -> float:
    time.sleep(2)  # past the rounds that follow a grant: only a push (or the slow poll) can tell from here
    ended = _when(alloc, ENDED)
    t0 = time.time()
    kit.runner.run(["scancel", str(alloc.job_id)])
    t = _wait_for(ended, 120)
    return float("inf") if t is None else t - t0


def latency_rows(kit: Kit, size: str) -> list[Row]:
    rows = []
    # a time limit runs out while the scancel samples are taken
    limited = kit.allocation("-n1", "-t", "1", panel=False)
    limit_ended = _when(limited, ENDED)
    ours = [_scancel_latency(kit, kit.allocation("-n1", "-t", "10")) for _ in range(SCANCELS)]
    polled = [_scancel_latency(kit, kit.attached("-n1", "-t", "10")) for _ in range(SCANCELS)]
    rows.append(
        _latency_row(
            f"`scancel` -> the panel knows (median of {SCANCELS}, from scancel's start)",
            statistics.median(ours),
            size,
            ", ".join(f"{x * 1000:.0f} ms" for x in ours),
            baseline=statistics.median(polled),
            baseline_name="the attached job (polled)",
        )
    )
    t = _wait_for(limit_ended, 200)
    end = _job_times(kit.runner, limited.job_id)["EndTime"]
    rows.append(
        _latency_row(
            "a time limit -> the panel knows (from Slurm's EndTime, to the second)",
            _late(t, end),
            size,
            f"ended {limited.state}",
        )
    )
    rows.append(_pending_row(kit, size))
    rows.append(_slurmd_row(kit, size))
    return rows


def _pending_row(kit: Kit, size: str) -> Row:
    nodes = len(kit.sb.nodes)
    blocker = kit.allocation(f"-N{nodes}", "--exclusive", "-t", "10")
    waiting = kit.allocation("--gpus=1", "-t", "10", panel=False)
    running = _when(waiting, ("RUNNING",))
    state = waiting.state
    blocker.cancel()
    t = _wait_for(running, 120)
    start = _job_times(kit.runner, waiting.job_id)["StartTime"]
    kit.end_all()
    return _latency_row(
        "pending -> RUNNING known (from Slurm's StartTime, to the second)",
        _late(t, start),
        size,
        f"was {state} behind an exclusive job on every node",
    )


def _slurmd_row(kit: Kit, size: str) -> Row:
    alloc = kit.allocation("-n1", "-t", "10")
    ended = _when(alloc, ENDED)
    node = alloc.nodes[0]
    pid = kit.sb.pids.get(f"slurmd:{node}")
    if pid is None:
        return Row(
            LATENCY_GROUP, "a killed slurmd -> the panel knows", float("inf"), "s", note="no slurmd pid"
        )
    os.kill(pid, signal.SIGKILL)
    try:
        t = _wait_for(ended, 120)
        end = _job_times(kit.runner, alloc.job_id)["EndTime"]
        state = alloc.state
    finally:
        kit.sb.restart()
    return _latency_row(
        "a killed slurmd -> the panel knows (from Slurm's EndTime of its job, to the second)",
        _late(t, end),
        size,
        f"ended {state}; Slurm notices after SlurmdTimeout=10 s",
    )


def run(rows: tuple[str, ...] = ALL_ROWS, seconds: float = 60.0) -> list[Row]:
    from slurmlab.sandbox import Sandbox

    with tempfile.TemporaryDirectory(prefix="slurmlab-bench-kernel-") as d:
        sb = Sandbox.up(profile="dgx-h100", directory=d, accounting=False, slurmd_timeout=10)
        kit = Kit(sb)
        try:
            counted = Counted(kit.runner)
            size = f"Slurm {sb.version[0]}.{sb.version[1]:02d}, {seconds:g} s windows"
            out: list[Row] = []
            one = None
            if "idle" in rows:
                out += idle_rows(kit, counted, seconds, size)
                one = out[-1].value
            if "panels" in rows:
                out.append(panels_row(kit, counted, seconds, size, one))
            if "kernels" in rows:
                out.append(kernels_row(sb, counted, seconds, size, one))
            if kit.made:
                out.append(after_cancel_row(kit, counted, seconds, size))
            if "latency" in rows:
                kit.end_all()  # the pending row's blocker takes every node whole
                out += latency_rows(kit, size)
            return out
        finally:
            kit.close()
            sb.down()


def measure(quick: bool = False) -> list[Row]:
    """The kernel's RPC and latency rows on a real sandbox (skipped in --quick: no Slurm there)."""
    if quick:
        return [Row(GROUP, "kernel rows skipped in --quick (starts a real Slurm)", 0.0, "", note="skipped")]
    return run()


def main() -> int:
    return command_line(__doc__, run, ALL_ROWS)


if __name__ == "__main__":
    sys.exit(main())
