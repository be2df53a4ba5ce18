"""The allocation panel as a user sees it in JupyterLab (headless Debian chromium through Playwright).

One JupyterLab server for the module, on a free port with ``port_retries=0``, a token, a fresh
workspace folder, and the sandbox's SLURM_CONF in its environment. The story: ``%salloc`` a GPU
while another job holds them all, so it pends; cancel that job from outside the notebook; the panel
turns RUNNING by itself (no other cell runs) within 3 s; ``%%srun`` output appears line by line while
the step runs; the panel's Cancel button releases the allocation. Screenshots go to build/screenshots/.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import CHROMIUM, CHROMIUM_ARGS, require_browser, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
NOTEBOOK = "allocate.ipynb"

CELLS = [
    "%load_ext slurmlab",
    "%salloc --gpus=1 -t 5",
    "%%srun -n1\necho first-line\nsleep 6\necho last-line",
]


def _notebook(path: Path) -> None:
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"c{i}",
            "metadata": {},
            "outputs": [],
            "source": src,
        }
        for i, src in enumerate(CELLS)
    ]
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def lab(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    require_browser()
    base = tmp_path_factory.mktemp("lab")
    (base / "root").mkdir()
    _notebook(base / "root" / NOTEBOOK)
    with running_lab(base, slurm_sandbox.env()) as server:
        yield server.url, server.token


@pytest.fixture(scope="module")
def page(lab: tuple[str, str]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    url, token = lab
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.goto(f"{url}/lab/tree/{NOTEBOOK}?token={token}", timeout=60_000)
            # "idle" shows before a kernel is attached: wait for the kernel's name too
            pg.locator(".jp-Notebook").first.wait_for(timeout=60_000)
            pg.get_by_text("Python 3 (ipykernel)").first.wait_for(timeout=60_000)
            pg.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=60_000)
            yield pg
        finally:
            browser.close()


class _StateWatcher(threading.Thread):
    """When Slurm itself reports the job RUNNING (to tell Slurm's delay from the panel's in a failure)."""

    def __init__(self, runner: Any, job_id: str) -> None:
        super().__init__(daemon=True)
        self.runner, self.job_id = runner, job_id
        self.running_at: float | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set() and self.running_at is None:
            res = self.runner.run(["squeue", "-h", "-j", self.job_id, "-o", "%T"], check=False)
            if res.stdout.strip() == "RUNNING":
                self.running_at = time.monotonic()
            self._stop_event.wait(0.1)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)


def _run_cell(page: Any, index: int) -> None:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_pending_panel_turns_running_by_itself_and_cancel_releases(page: Any, slurm_sandbox: Any) -> None:
    from slurmlab.slurm import queries
    from slurmlab.slurm.allocation import Allocation

    runner = slurm_sandbox.runner()
    n_nodes = len(slurm_sandbox.nodes)
    blocker = Allocation.submit(
        [f"-N{n_nodes}", "--gpus-per-node=8", "-t", "5"], runner=runner, release_at_exit=True
    )
    job_id = None
    try:
        blocker.wait("RUNNING", timeout=30)
        _run_cell(page, 0)
        _run_cell(page, 1)
        panel = page.locator(".slurmlab-allocation").first
        badge = panel.locator(".slurmlab-badge")
        badge.filter(has_text="PENDING").wait_for(timeout=30_000)
        header = panel.inner_text()
        job_id = re.search(r"allocation (\d+)", header).group(1)  # type: ignore[union-attr]
        page.wait_for_function(
            "() => document.querySelector('.slurmlab-allocation') && "
            "document.querySelector('.slurmlab-allocation').innerText.includes('Waiting')",
            timeout=15_000,
        )
        assert (
            "waiting for resources" in panel.inner_text().lower() or "waiting in line" in panel.inner_text()
        )
        _shot(page, "01-pending.png")

        # free the GPUs from outside the notebook; no cell runs from here until RUNNING shows
        watcher = _StateWatcher(runner, job_id)
        queries.cancel_job(blocker.job_id, runner)
        freed = time.monotonic()
        watcher.start()
        badge.filter(has_text="RUNNING").wait_for(timeout=10_000)
        took = time.monotonic() - freed
        watcher.join(10)  # it ends when it has seen RUNNING
        watcher.stop()
        # Slurm itself starts the waiting job 1-3 s after the scancel (the node finishes the cancelled
        # job, then the scheduler runs): the 3 s are counted from when Slurm reports it RUNNING
        assert watcher.running_at is not None, "Slurm never reported the job RUNNING"
        panel_lag = took - (watcher.running_at - freed)
        assert panel_lag < 3.0, (
            f"the panel showed RUNNING {panel_lag:.1f} s after Slurm started the job "
            f"({took:.1f} s after the scancel)"
        )
        page.get_by_text(re.compile(r"Time left:")).first.wait_for(timeout=5_000)
        _shot(page, "02-running.png")

        # a step: its first line shows while it still runs
        _run_cell(page, 2)
        output = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-OutputArea").first
        output.get_by_text("first-line").wait_for(timeout=20_000)
        assert "last-line" not in output.inner_text()
        _shot(page, "03-step-streaming.png")
        output.get_by_text("last-line").wait_for(timeout=30_000)

        # the Cancel button ends the allocation: the badge says so and squeue no longer has it active
        panel.locator("button.slurmlab-cancel").click()
        badge.filter(has_text="CANCELLED").wait_for(timeout=15_000)
        _shot(page, "04-cancelled.png")
        states = queries.brief_states([job_id], runner)
        assert job_id not in states or states[job_id].state not in ("PENDING", "RUNNING")
        active = runner.run(["squeue", "-h", "-t", "PD,R,CG", "-j", job_id], check=False).stdout.strip()
        assert active == ""
    except BaseException:
        _shot(page, "failure.png")
        raise
    finally:
        blocker.cancel()
        if job_id is not None:
            runner.run(["scancel", job_id], check=False)


def test_chromium_is_debians_not_a_downloaded_one() -> None:
    assert shutil.which("chromium") == CHROMIUM or Path(CHROMIUM).exists()
