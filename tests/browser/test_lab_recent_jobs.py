"""The sidebar's "Recent jobs" in a real JupyterLab (headless chromium): my ended jobs from a sandbox WITH
accounting, their end state coloured and in words, and the one line a Slurm without accounting gets.

Real Slurm and slurmdbd; the jobs are made from outside with the sandbox's own commands.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from labserver import chromium_page, open_sidebar, require_browser, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"


def _lab(sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not (REPO / "slurmlab" / "labextension" / "package.json").exists():
        pytest.skip("the JupyterLab extension is not built: run `make labextension` (needs node and npm)")
    require_browser()
    runtime = tmp_path_factory.mktemp("xdg")
    env = {
        **sandbox.env(),
        "SLURMLAB_POLL_INTERVAL": "1",
        "SLURMLAB_CLUSTER_POLL_INTERVAL": "1",
        "XDG_RUNTIME_DIR": str(runtime),
    }
    return running_lab(tmp_path_factory.mktemp("lab"), env, ready_path="slurmlab/api/status")


@contextmanager
def _sidebar(lab_url: str) -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium_page() as pg:
        open_sidebar(pg, lab_url)
        yield pg


def _ended(sandbox: Any, *sbatch: str) -> str:
    runner = sandbox.runner()
    job = (
        runner.run(["sbatch", "--parsable", "-o", "/dev/null", "-t", "2", *sbatch])
        .stdout.strip()
        .split(";")[0]
    )
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        out = runner.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State"], check=False).stdout.strip()
        if out and out not in ("PENDING", "RUNNING", "COMPLETING"):
            return job
        time.sleep(0.5)
    pytest.fail(f"job {job} did not end in 40 s")


def test_recent_jobs_show_my_ended_jobs_coloured_and_in_words(
    sandbox_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sb = sandbox_factory("seed", 2, accounting=True)
    ok = _ended(sb, "--gres=gpu:1", "-J", "recent-ok", "--wrap", "true")
    bad = _ended(sb, "-J", "recent-fail", "--wrap", "exit 3")
    time.sleep(2)  # the listing selects by eligible time, which reaches slurmdbd a moment after the end
    with _lab(sb, tmp_path_factory) as server:
        with _sidebar(server.page_url("lab")) as pg:
            rows = pg.locator("#slurmlab-sidebar .slurmlab-RecentJob")
            pg.wait_for_selector(
                f'#slurmlab-sidebar .slurmlab-RecentJob[data-job-id="{bad}"]', timeout=60_000
            )
            pg.screenshot(path=str(SHOTS / "sidebar-recent-jobs.png"))
            failed = pg.locator(f'.slurmlab-RecentJob[data-job-id="{bad}"]')
            assert failed.get_attribute("data-family") == "failed"
            assert "ended with an error" in failed.inner_text() and "exit 3" in failed.inner_text()
            done = pg.locator(f'.slurmlab-RecentJob[data-job-id="{ok}"]')
            assert done.get_attribute("data-state") == "COMPLETED" and "1 GPU" in done.inner_text()
            assert "GPU-hours" in done.locator(".slurmlab-RecentEfficiency").inner_text()
            colours = {
                el.get_attribute("data-job-id"): el.locator(".slurmlab-RecentState").evaluate(
                    "n => getComputedStyle(n).color"
                )
                for el in (done, failed)
            }
            assert colours[ok] != colours[bad]  # COMPLETED and FAILED look different
            assert rows.count() >= 2


def test_without_accounting_the_section_says_how_to_turn_it_on(
    sandbox_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    plain = sandbox_factory("seed", 1, accounting=False)
    with _lab(plain, tmp_path_factory) as server:
        with _sidebar(server.page_url("lab")) as pg:
            line = pg.locator("#slurmlab-sidebar .slurmlab-RecentMessage")
            line.wait_for(timeout=60_000)
            assert line.get_attribute("data-accounting") == "false"
            assert "--accounting" in line.inner_text()
