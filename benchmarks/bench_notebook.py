"""The notebook side at a real cluster's size (issue 14, point 2): three rows, each beside today's path.

    python benchmarks/bench_notebook.py [--quick]

- **state change -> allocation knows it, after a quiet minute.** The shared poller watches a pending job
  (recorded 24.11 output through a FakeRunner, so the queries and parsers are the real ones) on its own
  simulated clock for 75 s of no change; then the job starts. The latency is the wait the poller had chosen
  (a change may land just after a round: it waits that long to be asked about) plus the measured cost of the
  round that sees it (brief squeue parse + detail fetch and parse). Slurm's own time for the two commands
  (5-40 ms for the brief squeue) is Slurm's delay, not counted. Baseline: the same with the
  poller's former policy, which backed off x1.5 per quiet round to 10 s whatever the watched job's state.
- **``%salloc`` check at 1,000 nodes.** What ``%salloc`` does before it submits (the request checked against
  the cluster, the partition's time limit looked up for the note), with the node and partition lists of
  Slurm 24.11 replicated to 1,000 nodes x 8 GPUs: against the inventory cached per cluster, vs the former
  path that fetched and parsed both lists on every ``%salloc`` (``queries.inventory`` + ``list_partitions``).
  The FakeRunner answers in microseconds, so the baseline's figure is its CPU alone; the note counts the
  Slurm calls each makes.
- **``%load_ext slurmlab`` over bare IPython.** In a fresh interpreter per run (``.pyc`` warm), the time of
  ``%load_ext slurmlab`` after ``InteractiveShell.instance()``; baseline: the same, with what it imported
  before (the allocation machinery, the live panel, the request language) imported eagerly first.

Medians of at least 5 runs; the whole module takes well under 2 minutes on 2 cores.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks._bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row, median_time

NODES = 1000
GOLDEN = "24.11"


# ---- state change after a quiet minute --------------------------------------------------------------
class _SimClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _former_policy(poller: Any) -> None:
    """Give ``poller`` the back-off it had before issue 14: x1.5 per quiet round once quiet for
    ``quiet_after``, up to ``max_interval``, whether or not a watched job was pending or running."""

    def choose(changed: bool) -> float:
        now = poller.clock()
        if poller._failed:
            wait = min(poller.max_interval, max(poller.interval, poller.current_interval * 2))
        elif changed:
            poller._quiet_since, wait = now, poller.interval
        elif now - poller._quiet_since > poller.quiet_after:
            wait = min(poller.max_interval, poller.current_interval * 1.5)
        else:
            wait = poller.current_interval
        poller.current_interval = wait
        poller.intervals.append(wait)
        return float(wait)

    poller._choose_interval = choose


def _state_change_latency(former: bool, quiet: float = 75.0) -> tuple[float, float, float]:
    """(latency s, the wait chosen after the quiet time s, the detecting round's cost s)."""
    from slurmlab.slurm.poller import JobPoller
    from slurmlab.testing import FakeRunner

    fake = FakeRunner()
    try:
        fake.replay(
            f"{GOLDEN}/00_sinfo_version.txt",
            f"{GOLDEN}/l02_squeue_brief_pending.txt",
            f"{GOLDEN}/l02_scontrol_json_show_job_d_pending.json",
        )
        clock = _SimClock()
        poller = JobPoller(fake, clock=clock, interval=1.0, max_interval=10.0, quiet_after=60.0)
        poller.poke = lambda: None  # type: ignore[method-assign]  # rounds are driven here, not by the thread
        if former:
            _former_policy(poller)
        poller.watch(18, lambda update: None)
        wait = 0.0
        while clock.now < quiet:
            wait = poller.step()
            clock.now += wait
        fake.replay(
            f"{GOLDEN}/l06_squeue_brief_running.txt",
            f"{GOLDEN}/l06_scontrol_json_show_job_d_running.json",
            f"{GOLDEN}/l07_sinfo_node_states.txt",
        )
        t0 = time.perf_counter()
        poller.step()
        cost = time.perf_counter() - t0
        last = poller.last(18)
        assert last is not None and last.brief is not None and last.brief.state == "RUNNING"
        return wait + cost, wait, cost
    finally:
        fake.close()


def _latency_rows(repeat: int) -> list[Row]:
    runs = [_state_change_latency(former=False) for _ in range(repeat)]
    before = [_state_change_latency(former=True) for _ in range(repeat)]
    value, wait, cost = (statistics.median(r[i] for r in runs) for i in range(3))
    base = statistics.median(r[0] for r in before)
    return [
        Row(
            "state change -> allocation knows it, after a quiet minute",
            "watched pending job starts after 75 s quiet (worst case: change just after a round)",
            round(value, 3),
            "s",
            1.5,
            round(base, 3),
            "former poller back-off (x1.5 to 10 s)",
            size="1 watched job",
            note=f"wait chosen {wait:.2f} s + round that sees it {cost * 1000:.1f} ms (plus Slurm's own "
            f"5-40 ms per squeue)",
        )
    ]


# ---- %salloc check at 1,000 nodes ---------------------------------------------------------------------
def _replicated_cluster(fake: Any, nodes: int) -> None:
    """Script ``fake`` with 24.11's node and partition JSON, its nodes replicated to ``nodes``."""
    from slurmlab.testing import golden

    node_doc = json.loads(golden(f"{GOLDEN}/s07_scontrol_json_show_node.json"))
    model = node_doc["nodes"][0]
    node_doc["nodes"] = [{**model, "name": f"node{i}", "hostname": f"node{i}"} for i in range(1, nodes + 1)]
    part_doc = json.loads(golden(f"{GOLDEN}/s09_scontrol_json_show_partition.json"))
    part_doc["partitions"][0]["nodes"] = {
        **part_doc["partitions"][0]["nodes"],
        "configured": f"node[1-{nodes}]",
        "total": nodes,
    }
    fake.replay_cluster(GOLDEN)
    fake.on(["scontrol", "--json", "show", "node"], stdout=json.dumps(node_doc))
    fake.on(["scontrol", "--json", "show", "partition"], stdout=json.dumps(part_doc))


_REQUEST = ["--gpus=h100:2", "--cpus-per-gpu=8"]  # no -t: the note looks the partition's limit up too


def _salloc_check_now(fake: Any) -> None:
    from slurmlab.magics.allocate import _time_note, prepare_request

    req, _ = prepare_request(list(_REQUEST), fake)
    _time_note(req)


def _salloc_check_former(fake: Any) -> None:
    from slurmlab.core.request import pipeline
    from slurmlab.magics.salloc_checks import partition_for, time_limit_note
    from slurmlab.slurm import queries
    from slurmlab.slurm.allocation.request import known_version

    req = pipeline.check_request(list(_REQUEST), queries.inventory(fake), version=known_version(fake))
    partitions = list(queries.list_partitions(fake))
    default = queries.default_partition(fake) if not any(p.default for p in partitions) else None
    time_limit_note(req, partition_for(req, partitions, default))


def _salloc_rows(repeat: int) -> list[Row]:
    from slurmlab.slurm.runner import set_runner
    from slurmlab.testing import FakeRunner

    fake = FakeRunner()
    old = set_runner(fake)  # %salloc's time note reads the process-wide runner's cluster
    try:
        _replicated_cluster(fake, NODES)
        base = median_time(lambda: _salloc_check_former(fake), repeat=repeat)
        calls0 = len(fake.history)
        _salloc_check_former(fake)
        former_calls = len(fake.history) - calls0
        value = median_time(lambda: _salloc_check_now(fake), repeat=repeat)  # the warm-up fills the cache
        calls0 = len(fake.history)
        _salloc_check_now(fake)
        now_calls = len(fake.history) - calls0
    finally:
        set_runner(old)
        fake.close()
    return [
        Row(
            "%salloc check at 1,000 nodes",
            "%salloc's checks before submit, cached inventory",
            round(value * 1000, 2),
            "ms",
            200.0,
            round(base * 1000, 2),
            "fetch + parse nodes and partitions every time",
            size=f"{NODES} nodes x 8 GPUs",
            note=f"Slurm calls per %salloc: {now_calls} (former {former_calls}); a refusal re-checks "
            "against a fresh fetch",
        )
    ]


# ---- %load_ext over bare IPython ----------------------------------------------------------------------
_LOAD_EXT = """
import sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
t0 = time.perf_counter()
if "--eager" in sys.argv:  # what %load_ext imported before issue 14
    import slurmlab.slurm.allocation, slurmlab.widgets.panel, slurmlab.core.request.request  # noqa
ip.run_line_magic("load_ext", "slurmlab")
print(time.perf_counter() - t0)
"""


def _load_ext_once(eager: bool) -> float:
    argv = [sys.executable, "-c", _LOAD_EXT] + (["--eager"] if eager else [])
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    return float(out.stdout.strip().splitlines()[-1])


def _load_ext_rows(repeat: int) -> list[Row]:
    _load_ext_once(True)  # compile every .pyc first: the figure is of a warm install
    now = [_load_ext_once(False) for _ in range(repeat)]
    before = [_load_ext_once(True) for _ in range(repeat)]
    value, base = statistics.median(now), statistics.median(before)
    return [
        Row(
            "%load_ext slurmlab over bare IPython",
            "%load_ext slurmlab (fresh interpreter, .pyc warm)",
            round(value * 1000, 1),
            "ms",
            100.0,
            round(base * 1000, 1),
            "with the Slurm layer, panel and request language imported at load (before)",
            note="tests/unit/magics/test_load_ext_imports.py lists what it must not import",
        )
    ]


def measure(quick: bool = False) -> list[Row]:
    repeat = 5 if quick else 9
    return _latency_rows(repeat) + _salloc_rows(repeat) + _load_ext_rows(repeat)


def main() -> int:
    rows = measure(quick="--quick" in sys.argv[1:])
    for r in rows:
        verdict = "ok" if r.ok else "MISSED"
        print(
            f"{r.group}: {r.value:g} {r.unit} (target <= {r.target:g}) | {r.baseline_name}: {r.baseline:g} "
            f"{r.unit} | {r.note} | {verdict}"
        )
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
