"""Record what a held salloc prints (``salloc … cat``, as slurmlab holds an allocation) on a sandbox, with the
runner's calls of the same session: ``session.json`` in ``<out>/<Slurm version>/``.

    python tests/unit/slurm/data/held_salloc/record.py SANDBOX_DIR OUT [--down]
    bash scripts/in-slurm-root.sh 24.11 python tests/unit/slurm/data/held_salloc/record.py /tmp/sb OUT --down

Four scenes on a dgx-h100 sandbox: a job granted at once, then cancelled from outside (``scancel``); a job pending
behind a blocker, then granted; the same cancelled through the API; a job ended by its time limit (``-t 1``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurmlab.sandbox.control import Sandbox
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller


def _until(check: Callable[[], object], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def main(directory: str, out: str, *, down: bool = False) -> None:
    sb = Sandbox.up(profile="dgx-h100", directory=Path(directory), accounting=False)
    runner = sb.runner()
    calls: list[dict[str, Any]] = []
    real_run = runner.run

    def run(argv: Any, *a: Any, **k: Any) -> Any:
        result = real_run(argv, *a, **k)
        calls.append(
            {"argv": list(argv), "stdout": result.stdout, "stderr": result.stderr, "rc": result.returncode}
        )
        return result

    runner.run = run  # type: ignore[method-assign]
    poller = JobPoller(runner)
    major, minor = sb.version
    res: dict[str, Any] = {"version": f"{major}.{minor:02d}"}
    first_calls = _cancelled_from_outside(runner, real_run, poller, res, calls)
    _granted_later(runner, real_run, poller, res)
    _time_limit(runner, poller, res)
    _save(res, calls[:first_calls], Path(out))
    if down:  # in a Slurm root: nothing may be left running
        sb.down()


def _cancelled_from_outside(
    runner: Any, real_run: Any, poller: JobPoller, res: dict[str, Any], calls: list[dict[str, Any]]
) -> int:

    a = Allocation.submit(["--gpus=1", "-t", "10"], runner=runner, poller=poller)
    a.wait(timeout=30)
    assert a._salloc is not None
    res["argv"] = a._salloc.argv
    res["granted_lines"] = list(a.salloc_messages)
    a.usage()
    time.sleep(3)
    n, first_calls = len(a.salloc_messages), len(calls)
    t0 = time.monotonic()
    real_run(["scancel", str(a.job_id)])
    res["scancel_seen_s"] = time.monotonic() - t0 if _until(lambda: a.state == "CANCELLED", 10) else None
    _until(lambda: a._salloc is not None and a._salloc.returncode is not None, 10)
    res["revoked_lines"] = list(a.salloc_messages[n:])
    res["job1"] = a.job_id
    return first_calls


def _granted_later(runner: Any, real_run: Any, poller: JobPoller, res: dict[str, Any]) -> None:
    blocker = Allocation.submit(["-N2", "--gpus-per-node=8", "-t", "5"], runner=runner, poller=poller)
    blocker.wait(timeout=30)
    w = Allocation.submit(["--gpus=2", "-t", "10"], runner=runner, poller=poller)
    time.sleep(2)
    res["pending_lines"], res["pending_state"] = list(w.salloc_messages), w.state
    n = len(w.salloc_messages)
    t0 = time.monotonic()
    real_run(["scancel", str(blocker.job_id)])
    res["grant_seen_s"] = time.monotonic() - t0 if _until(lambda: w.state == "RUNNING", 15) else None
    time.sleep(1)
    res["granted_later_lines"] = list(w.salloc_messages[n:])
    res["job2"] = w.job_id
    n = len(w.salloc_messages)
    w.cancel()
    time.sleep(1)
    res["api_cancel_lines"], res["api_cancel_state"] = list(w.salloc_messages[n:]), w.state


def _time_limit(runner: Any, poller: JobPoller, res: dict[str, Any]) -> None:
    t = Allocation.submit(["--gpus=1", "-t", "1"], runner=runner, poller=poller)
    t.wait(timeout=30)
    res["timeout_granted_lines"] = list(t.salloc_messages)
    n = len(t.salloc_messages)
    _until(lambda: t.ended, 150)
    time.sleep(1)
    res["timeout_lines"], res["timeout_state"], res["job3"] = list(t.salloc_messages[n:]), t.state, t.job_id


def _save(res: dict[str, Any], calls: list[dict[str, Any]], out: Path) -> None:
    # the queries of the first job while it ran, each argv's first answer: what a FakeRunner replays
    seen: set[tuple[str, ...]] = set()
    res["calls"] = []
    for call in calls:
        key = tuple(call["argv"])
        if key not in seen and call["argv"][0] != "salloc":
            seen.add(key)
            res["calls"].append(call)
    folder = out / res["version"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "session.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "calls"}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], down="--down" in sys.argv[3:])
