"""What slurmlab costs the shared controller: RPCs to slurmctld, counted by Slurm's own ``sdiag`` (issue 27).

    python benchmarks/bench_rpc.py [--rows sidebar,watch,salloc,servers] [--seconds 60]

Starts a dgx-h100 sandbox (accounting off: slurmdbd's RPCs are not slurmctld's) with 30 held jobs queued, then
for each row resets the counters (``sdiag -r``), runs the workload for one window and reads ``sdiag``'s "RPC
statistics by message type". Counts, not times, so they hold on a noisy machine; a row's figure is per minute.
``sdiag``'s own REQUEST_STATS_INFO and the slurmds' registrations and pings are left out (nothing of the
workload's), and listed under "left out" in the note.

Rows, each beside its baseline measured in the same run:

* one open sidebar: the server's poller with the site defaults, asked as sidebar.ts asks (status, nodes, my
  queue every 5 s), for one cycle of its cadence (a whole poll, then its timer for the window less 3 s); baseline: the same poller at the cadence it had before issue 27 (everything
  every 5 s, a whole-cluster poll each time).
* ``watch -n 5 squeue``: 12 ``squeue`` a minute (the habit sites ask users to drop), run back to back.
* a plain ``salloc ... sleep`` holding its allocation for half a window: salloc's 0, the physical anchor.
* 10 Jupyter servers of one host with a sidebar each: 10 pollers, each its own runner, reading the host's shared
  poll (``slurmlab cluster-cache serve``'s service, run here in-process as root at its default interval), the
  service's own RPCs counted; beside one server, and beside the same 10 pollers each polling on its own (the
  figure before the shared poll).

The kernel's rows (an idle RUNNING allocation with its panel, 50 panels, 10 kernels) are not measured here yet.
With the default 60 s windows the module takes about 4.5 minutes (within run_all's 420 s for one module).
"""

from __future__ import annotations

import argparse
import asyncio
import re
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

GROUP = "RPCs to slurmctld (sdiag)"
SIDEBAR_EVERY = 5.0  # sidebar.ts DEFAULT_REFRESH_S
QUEUED = 30
CYCLE_MARGIN_S = 3.0  # more than the timer's jitter (10 % of a 30 s tick is +-1.5 s)
# not the workload's: sdiag itself, and what the slurmds send on their own
NOT_OURS = frozenset(
    {
        "REQUEST_STATS_INFO",
        "MESSAGE_NODE_REGISTRATION_STATUS",
        "REQUEST_PING",
        "REQUEST_NODE_REGISTRATION_STATUS",
        "MESSAGE_EPILOG_COMPLETE",
    }
)
_TYPE_LINE = re.compile(r"^\s+([A-Z][A-Z0-9_]+)\s+\(\s*\d+\)\s+count:(\d+)")
ALL_ROWS = ("sidebar", "watch", "salloc", "servers")


def parse_sdiag(text: str) -> Counter[str]:
    """The "Remote Procedure Call statistics by message type" section of ``sdiag``: type -> count."""
    counts: Counter[str] = Counter()
    inside = False
    for line in text.splitlines():
        if "statistics by message type" in line:
            inside = True
            continue
        if inside and ("statistics by user" in line or "Pending RPC" in line):
            break
        m = _TYPE_LINE.match(line) if inside else None
        if m:
            counts[m.group(1)] += int(m.group(2))
    return counts


class Counted:
    """``sdiag -r`` before, ``sdiag`` after: the RPCs of what ran in between, by type (ours only)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def reset(self) -> None:
        self.runner.run(["sdiag", "-r"])

    def read(self) -> tuple[Counter[str], Counter[str]]:
        counts = parse_sdiag(self.runner.run(["sdiag"]).stdout)
        ours = Counter({k: v for k, v in counts.items() if k not in NOT_OURS})
        left = Counter({k: v for k, v in counts.items() if k in NOT_OURS})
        return ours, left

    @contextmanager
    def window(self) -> Iterator[dict[str, Counter[str]]]:
        got: dict[str, Counter[str]] = {}
        self.reset()
        yield got
        got["ours"], got["left"] = self.read()


def by_type(counts: Counter[str]) -> str:
    return ", ".join(f"{v} {k.removeprefix('REQUEST_')}" for k, v in counts.most_common()) or "none"


# ---- the workloads -----------------------------------------------------------------------------------
async def _sidebars(
    runners: list[Any], seconds: float, counted: Counted, service: Any = None, **cadence: Any
) -> None:
    """Pollers (one per runner: one Jupyter server each), each asked as one open sidebar asks. The counters are
    reset after a first round (the first polls fetch every job's detail once: a start-up cost, not a minute's).
    With ``service`` (a SharedPollService) the pollers read its files; it polls once at the window's start and
    then on its own timer, as the pollers do, and its RPCs are counted with theirs."""
    from slurmlab.server.data import ClusterSource
    from slurmlab.server.poller import ClusterPoller
    from slurmlab.server.worker import PollWorker

    # no shared poll unless one is measured (a directory that cannot exist)
    where = str(service.directory) if service is not None else "/nonexistent/slurmlab-bench-no-shared-poll"
    pollers = [
        ClusterPoller(ClusterSource(r, user="root", worker=PollWorker("thread"), shared=where), **cadence)
        for r in runners
    ]
    stop = threading.Event()

    async def round_of(p: ClusterPoller) -> None:
        p.start()
        await p.ensure_data()  # status
        await p.ensure_data(whole=True)  # nodes: the GPU map
        await p.ensure_data()  # queue?scope=mine

    try:
        for p in pollers:
            await round_of(p)
            await p.refresh(whole=False)  # the own listing's first poll too
        # One cycle of the cadence, counted from a whole poll: every poller's whole poll now, then its timer's
        # (started above, a moment earlier) for a little less than the window, so that the whole poll one
        # cluster_interval later falls outside it (a 60 s window that ends on it would count it or not by chance).
        counted.reset()
        end = time.monotonic() + seconds - CYCLE_MARGIN_S
        if service is not None:
            await asyncio.get_running_loop().run_in_executor(None, service.once)
            threading.Thread(target=_service_timer, args=(service, stop), daemon=True).start()
        for p in pollers:
            await p.refresh(whole=True)
        while time.monotonic() < end:
            for p in pollers:
                await round_of(p)
            await asyncio.sleep(min(SIDEBAR_EVERY, max(0.0, end - time.monotonic())))
    finally:
        stop.set()
        for p in pollers:
            p.stop()
    if service is not None:
        assert all(p.source.shared_reads for p in pollers), "a poller did not use the shared poll"
        assert not any(r.calls for r in runners), "a poller sent Slurm a command of its own"


def _service_timer(service: Any, stop: threading.Event) -> None:
    while not stop.wait(service.interval):
        service.once()


def sidebar_minute(
    sb: Any, seconds: float, counted: Counted, servers: int = 1, shared: bool = False, **cadence: Any
) -> None:
    runners = [sb.runner(timeout=60) for _ in range(servers)]
    if not shared:
        asyncio.run(_sidebars(runners, seconds, counted, **cadence))
        return
    from slurmlab.server.shared_poll import SharedPollService

    with tempfile.TemporaryDirectory(prefix="slurmlab-bench-poll-") as d:
        service = SharedPollService(Path(d) / "poll", runner=sb.runner(timeout=60))
        service.prepare()
        service.once()  # its first listing (every job's detail, PrivateData) before the window, as the pollers'
        asyncio.run(_sidebars(runners, seconds, counted, service=service, **cadence))


def watch_squeue(sb: Any, seconds: float) -> None:
    """``watch -n 5 squeue`` for the window: one squeue per 5 s, run back to back (the count is the cost)."""
    runner = sb.runner(timeout=60)
    for _ in range(round(seconds / 5)):
        runner.run(["squeue"])


@contextmanager
def salloc_held(sb: Any, seconds: float) -> Iterator[None]:
    """A plain ``salloc`` holding an allocation: granted before the block (its request is not counted), ended
    after it (its release neither)."""
    env = {**sb.env(), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
    proc = subprocess.Popen(
        ["salloc", "-N1", "--gpus=1", "-t", "10", "sleep", str(int(seconds) + 120)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    job = None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "Granted job allocation" in line:
                job = line.split("Granted job allocation", 1)[1].split()[0]
                break
        yield
    finally:
        # salloc leaves on the revocation slurmctld pushes to it (what its 0 RPCs rely on)
        if job is not None:
            sb.runner(timeout=60).run(["scancel", job], check=False)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def _measure_rows(sb: Any, rows: tuple[str, ...], seconds: float) -> list[Row]:
    from slurmlab.server.poller import DEFAULT_CLUSTER_INTERVAL, DEFAULT_INTERVAL

    counted = Counted(sb.runner(timeout=60))
    per_min = 60.0 / seconds
    size = f"{QUEUED} jobs queued, Slurm {sb.version[0]}.{sb.version[1]:02d}, {seconds:g} s windows"
    out: list[Row] = []

    def run(what: Callable[[], None]) -> tuple[float, Counter[str], Counter[str]]:
        with counted.window() as got:
            what()
        return sum(got["ours"].values()) * per_min, got["ours"], got["left"]

    if "sidebar" in rows or "servers" in rows:
        old, old_by, _ = run(lambda: sidebar_minute(sb, seconds, counted, interval=5, cluster_interval=5))
        new, new_by, left = run(lambda: sidebar_minute(sb, seconds, counted))
        whole_jobs = new_by.get("REQUEST_JOB_INFO", 0) * per_min
        out.append(
            Row(
                GROUP,
                f"one open sidebar, per minute (own jobs every {DEFAULT_INTERVAL:g} s, from the cluster's "
                f"listing where an own listing costs a whole one (22.05-26.05); cluster every "
                f"{DEFAULT_CLUSTER_INTERVAL:g} s)",
                new,
                "RPCs",
                target=6,
                baseline=old,
                baseline_name="the pre-issue-27 cadence (all every 5 s)",
                size=size,
                note=f"{by_type(new_by)}; baseline {by_type(old_by)}; left out: {by_type(left)}",
            )
        )
        out.append(
            Row(
                GROUP,
                "one open sidebar: whole-cluster job listings per minute",
                whole_jobs,
                "listings",
                target=1,
                baseline=old_by.get("REQUEST_JOB_INFO", 0) * per_min,
                baseline_name="pre-issue-27 cadence",
                size=size,
            )
        )
        if "servers" in rows:
            alone, alone_by, _ = run(lambda: sidebar_minute(sb, seconds, counted, servers=10))
            ten, ten_by, _ = run(lambda: sidebar_minute(sb, seconds, counted, servers=10, shared=True))
            out.append(
                Row(
                    GROUP,
                    "10 Jupyter servers of one host, a sidebar each, reading the host's shared poll, per minute "
                    "(x one server)",
                    ten / new if new else float("inf"),
                    "x",
                    target=1.5,
                    baseline=alone / new if new else float("inf"),
                    baseline_name="10 servers each polling on its own (x one server)",
                    size=size,
                    note=f"{ten:g} RPCs, the service's: {by_type(ten_by)}; one server {new:g}; "
                    f"each on its own {alone:g}: {by_type(alone_by)}",
                )
            )
    if "watch" in rows:
        watch, watch_by, _ = run(lambda: watch_squeue(sb, seconds))
        out.append(
            Row(
                GROUP,
                "`watch -n 5 squeue`, per minute (the habit sites ask users to drop)",
                watch,
                "RPCs",
                size=size,
                note=by_type(watch_by),
            )
        )
    if "salloc" in rows:
        # half a window: whatever it is, salloc asks nothing while it holds (counted per minute all the same)
        half = seconds / 2
        with salloc_held(sb, half), counted.window() as got:
            time.sleep(half)
        held, held_by = sum(got["ours"].values()) * 60.0 / half, got["ours"]
        out.append(
            Row(
                GROUP,
                "a plain salloc holding its allocation, per minute (the physical anchor)",
                held,
                "RPCs",
                size=size,
                note=by_type(held_by),
            )
        )
    return out


def run(rows: tuple[str, ...] = ALL_ROWS, seconds: float = 60.0) -> list[Row]:
    from slurmlab.sandbox import Sandbox

    with tempfile.TemporaryDirectory(prefix="slurmlab-bench-rpc-") as d:
        sb = Sandbox.up(profile="dgx-h100", directory=d, accounting=False)
        try:
            runner = sb.runner(timeout=120)
            for _ in range(QUEUED):
                runner.run(["sbatch", "--parsable", "-H", "-t", "5", "-o", "/dev/null", "--wrap", "true"])
            return _measure_rows(sb, rows, seconds)
        finally:
            sb.down()


def measure(quick: bool = False) -> list[Row]:
    """The RPC rows on a real sandbox (skipped in --quick: no Slurm there)."""
    if quick:
        return [Row(GROUP, "skipped in --quick (starts a real Slurm)", 0.0, "", note="skipped")]
    return run()


def command_line(
    doc: str | None, run_rows: Callable[[tuple[str, ...], float], list[Row]], rows: tuple[str, ...]
) -> int:
    """``--rows a,b --seconds N`` for a module of sdiag rows: runs them and prints one line a row."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    ap.add_argument("--rows", default=",".join(rows))
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    for row in run_rows(tuple(r.strip() for r in args.rows.split(",") if r.strip()), args.seconds):
        print(
            f"{row.name}: {row.value:g} {row.unit} (baseline {row.baseline} {row.baseline_name}) {row.note}"
        )
    return 0


def main() -> int:
    return command_line(__doc__, run, ALL_ROWS)


if __name__ == "__main__":
    sys.exit(main())
