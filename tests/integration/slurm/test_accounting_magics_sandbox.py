"""%sacct, %sshare and the sidebar's recent jobs on a real sandbox WITH accounting (slurmdbd and MariaDB), and
the one-line errors on a sandbox without it.

Real daemons only. Another Slurm: ``bash scripts/in-slurm-root.sh 24.11 python -m pytest -q -p no:cacheprovider
tests/integration/slurm/test_accounting_magics_sandbox.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

from slurmlab.server.recent import recent_answer
from slurmlab.slurm.runner import set_runner
from slurmlab.testing.sandbox_fixtures import accounting_missing_reason

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(accounting_missing_reason() is not None, reason=accounting_missing_reason() or ""),
]


def eventually(check: Callable[[], Any], seconds: float = 40) -> Any:
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    pytest.fail(f"not seen within {seconds:g} s (last: {last!r})")


@pytest.fixture(scope="module")
def accounted(sandbox_factory: Any) -> Iterator[dict[str, Any]]:
    """A sandbox with accounting, two finished jobs of mine (one ok with a GPU, one failing) in sacct."""
    sb = sandbox_factory("seed", 2, accounting=True)
    runner = sb.runner()
    old = set_runner(runner)
    try:
        ok = (
            runner.run(
                [
                    "sbatch",
                    "--parsable",
                    "--gres=gpu:1",
                    "-t",
                    "2",
                    "-J",
                    "hb-ok",
                    "-o",
                    "/dev/null",
                    "--wrap",
                    "srun true",
                ]
            )
            .stdout.strip()
            .split(";")[0]
        )
        bad = (
            runner.run(
                ["sbatch", "--parsable", "-t", "2", "-J", "hb-fail", "-o", "/dev/null", "--wrap", "exit 3"]
            )
            .stdout.strip()
            .split(";")[0]
        )

        def ended() -> bool:
            out = runner.run(["sacct", "-X", "-n", "-P", "-j", f"{ok},{bad}", "-o", "JobID,State"]).stdout
            return {f"{ok}|COMPLETED", f"{bad}|FAILED"} <= set(out.split())

        eventually(ended)
        yield {"sandbox": sb, "ok": ok, "bad": bad}
    finally:
        set_runner(old)


@pytest.fixture
def shell(accounted: dict[str, Any]) -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")
    try:
        yield ip
    finally:
        ip.run_line_magic("unload_ext", "slurmlab.magics")


def test_sacct_shows_my_jobs_with_plain_states_gpus_and_efficiency(
    shell: Any, accounted: dict[str, Any]
) -> None:
    # the plain listing selects by eligible time, which slurmctld sends slurmdbd a moment after the end
    table = eventually(
        lambda: (
            (t := shell.run_line_magic("sacct", "--since 2h"))
            and {accounted["ok"], accounted["bad"]} <= {r["job"] for r in t.rows}
            and t
        )
    )
    rows = {r["job"]: r for r in table.rows}
    ok, bad = rows[accounted["ok"]], rows[accounted["bad"]]
    assert ok["state"] == "COMPLETED: finished, exit 0" and ok["gpus"] == "1" and ok["name"] == "hb-ok"
    assert bad["state"].startswith("FAILED: ended with an error") and bad["gpus"] == "-"
    assert ok["elapsed"].endswith("of 00:02:00")
    assert "GPU-hours" in ok["efficiency"] and "CPU" in bad["efficiency"]


def test_sacct_one_job_lists_its_steps_with_exit_codes(shell: Any, accounted: dict[str, Any]) -> None:
    table = shell.run_line_magic("sacct", accounted["bad"])
    steps = {r["step"]: r for r in table.rows}
    assert steps["(job)"]["exit"] == "3" and steps["batch"]["exit"] == "3"
    assert table.notes[-1].startswith(f"Efficiency of job {accounted['bad']}")
    assert table.notes[0].startswith("failed") and "exit code 3" in table.notes[0]
    ok = shell.run_line_magic("sacct", accounted["ok"])
    assert "0" in {r["step"] for r in ok.rows}  # the srun step inside the batch job


def test_sshare_explains_my_share_per_account(shell: Any, accounted: dict[str, Any]) -> None:
    table = shell.run_line_magic("sshare", "")
    accounts = {r["account"]: r for r in table.rows}
    assert {"research", "teaching"} <= set(accounts)
    assert all(0 <= float(r["fair_share"]) <= 1 for r in table.rows)
    text = table.text()
    assert "research: you have" in text and "fair-share factor" in text


def test_the_sidebars_recent_jobs_are_mine_from_sacct(accounted: dict[str, Any]) -> None:
    runner = accounted["sandbox"].runner()
    answer = eventually(
        lambda: (
            (a := recent_answer(runner, os.geteuid()))
            and {accounted["ok"], accounted["bad"]} <= {j["job_id"] for j in a["jobs"]}
            and a
        )
    )
    assert answer["accounting"] is True and answer["message"] is None
    jobs = {j["job_id"]: j for j in answer["jobs"]}
    assert jobs[accounted["bad"]]["exit_code"] == 3 and jobs[accounted["ok"]]["gpus"] == 1
    assert (jobs[accounted["ok"]]["efficiency"] or "").startswith(f"Efficiency of job {accounted['ok']}")
    # another uid sees none of them
    assert not {j["job_id"] for j in recent_answer(runner, os.geteuid() + 4242)["jobs"]} & set(jobs)


def test_without_accounting_each_says_how_to_turn_it_on(sandbox_factory: Any) -> None:
    from IPython.testing.globalipapp import get_ipython

    sb = sandbox_factory("seed", 1, accounting=False)
    old = set_runner(sb.runner())
    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")
    try:
        for magic in ("sacct", "sshare"):
            with pytest.raises(UsageError) as info:
                ip.run_line_magic(magic, "")
            assert "accounting" in str(info.value) and "--accounting" in str(info.value), str(info.value)
        answer = recent_answer(sb.runner(), os.geteuid())
        assert answer["accounting"] is False and "--accounting" in (answer["message"] or "")
    finally:
        ip.run_line_magic("unload_ext", "slurmlab.magics")
        set_runner(old)
