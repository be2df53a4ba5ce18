"""An allocation's whole life in its panel, as a user sees it in JupyterLab (issue 17's browser check).

One story on the sandbox (accounting on where slurmdbd and MariaDB are installed, as ``make test`` has them):
``%salloc`` a GPU while another job holds every GPU, so it pends; the panel explains why it waits (its findings
name the blocking job) without another cell running; the blocker goes, the allocation runs with five minutes
or less left, so the panel turns amber and the cell prints the warning once; the panel's Cancel button ends it
and the panel says how it ended (CANCELLED by you) from Slurm accounting. Screenshots go to build/screenshots/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import chromium_page, require_browser, running_lab
from notebook_driver import NotebookPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
NOTEBOOK = "life.ipynb"
CELLS = ["%load_ext slurmlab", "%salloc --gpus=1 -t 5"]


@pytest.fixture(scope="module")
def nb(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotebookPage]:
    require_browser()
    base = tmp_path_factory.mktemp("lab-life")
    (base / "root").mkdir()
    write_notebook(base / "root" / NOTEBOOK, CELLS)
    with running_lab(base, slurm_sandbox.env()) as server, chromium_page(height=1200) as pg:
        yield NotebookPage(pg, server.url, server.token, NOTEBOOK)


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_the_panel_explains_the_wait_warns_amber_and_says_how_it_ended(
    nb: NotebookPage, slurm_sandbox: Any
) -> None:
    from slurmlab.slurm import queries
    from slurmlab.slurm.allocation import Allocation

    if not slurm_sandbox.state.get("accounting"):
        pytest.skip(
            f"the sandbox runs without accounting ({slurm_sandbox.state.get('accounting_off')}): "
            "the ended explanation needs sacct"
        )
    runner = slurm_sandbox.runner()
    blocker = Allocation.submit(
        [f"-N{len(slurm_sandbox.nodes)}", "--gpus-per-node=8", "-t", "5", "-J", "blocker"],
        runner=runner,
        release_at_exit=True,
    )
    job_id = None
    page = nb.page
    try:
        blocker.wait("RUNNING", timeout=30)
        nb.run(0)
        nb.start(1)
        panel = page.locator(".slurmlab-allocation").first
        panel.locator(".slurmlab-badge[data-state='PENDING']").wait_for(timeout=30_000)
        job_id = re.search(r"allocation (\d+)", panel.inner_text()).group(1)  # type: ignore[union-attr]

        # pending, explained: the findings come by themselves (no cell runs) and name the job in the way
        why = panel.locator(".slurmlab-why[data-state='done']")
        why.wait_for(timeout=45_000)
        findings = why.locator(".slurmlab-why-finding")
        assert findings.count() >= 1, why.inner_text()
        assert blocker.job_id in why.inner_text(), (
            f"the blocking job {blocker.job_id} is not named: {why.inner_text()}"
        )
        _shot(page, "life-01-pending-why.png")

        # running with at most five minutes left: amber panel, the warning in the panel and once in the cell
        queries.cancel_job(blocker.job_id, runner)
        panel.locator(".slurmlab-badge[data-state='RUNNING']").wait_for(timeout=30_000)
        warning = panel.locator(".slurmlab-time-warning[data-level='five-minutes']")
        warning.wait_for(timeout=15_000)
        assert "save your work" in warning.inner_text()
        page.locator(".slurmlab-allocation.slurmlab-Panel-warn").first.wait_for(timeout=10_000)
        assert page.locator(".slurmlab-why").count() == 0, "the pending explanation stayed after it started"
        nb.output(1).get_by_text(re.compile(rf"allocation {job_id}: Time almost up")).wait_for(timeout=10_000)
        _shot(page, "life-02-running-amber.png")

        # ended, explained from accounting: the Cancel button, then CANCELLED by the user who pressed it
        panel.locator("button.slurmlab-cancel").click()
        ended = panel.locator(".slurmlab-ended[data-state='CANCELLED']")
        ended.wait_for(timeout=60_000)
        assert "by you" in ended.inner_text(), ended.inner_text()  # the kernel's user pressed it
        assert page.locator(".slurmlab-allocation.slurmlab-Panel-warn").count() == 0, (
            "still amber after it ended"
        )
        active = runner.run(["squeue", "-h", "-t", "PD,R,CG", "-j", job_id], check=False).stdout.strip()
        assert active == ""
        _shot(page, "life-03-ended.png")
    except BaseException:
        _shot(page, "life-failure.png")
        raise
    finally:
        blocker.cancel()
        if job_id is not None:
            runner.run(["scancel", job_id], check=False)
