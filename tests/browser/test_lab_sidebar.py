"""The "Slurm GPUs" sidebar in a real JupyterLab, driven in Debian's headless chromium.

JupyterLab runs as a separate process (``jupyter lab``) pointed at the Slurm sandbox; jobs are
created and checked from outside with the sandbox's own Slurm commands. Screenshots go to
``build/screenshots/``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import CHROMIUM, CHROMIUM_ARGS, require_browser, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
SIDEBAR_REFRESH_S = 5  # the sidebar's default refresh interval (schema/plugin.json)


@pytest.fixture(scope="module")
def lab(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A JupyterLab server on a known port and token, in a fresh workspace; yields its lab URL."""
    if not (REPO / "slurmlab" / "labextension" / "package.json").exists():
        pytest.skip("the JupyterLab extension is not built: run `make lab` (needs node and npm)")
    require_browser()
    env = {**slurm_sandbox.env(), "SLURMLAB_POLL_INTERVAL": "1"}
    with running_lab(tmp_path_factory.mktemp("lab"), env, ready_path="slurmlab/api/status") as server:
        yield server.page_url("lab")


@pytest.fixture
def page(lab: str) -> Iterator[Any]:
    """A fresh chromium on the lab page, per test: Playwright's sync API runs its own event loop,
    which must not outlive a test (pytest-jupyter closes each test's loop, see tests/integration/server)."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 900})
            # reset: each test starts from the default layout, not the one the last test left open
            pg.goto(f"{lab}&reset")
            pg.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
            tab = pg.locator('.jp-SideBar [data-id="slurmlab-sidebar"]')
            tab.wait_for(timeout=30_000)
            if not pg.locator("#slurmlab-sidebar").is_visible():
                tab.click()
            try:
                pg.wait_for_selector("#slurmlab-sidebar .slurmlab-NodeRow", timeout=30_000)
            except Exception:
                pg.screenshot(path=str(SHOTS / "sidebar-failed-to-load.png"))
                error = pg.locator("#slurmlab-sidebar .slurmlab-Error").inner_text()
                pytest.fail(f"the sidebar drew no nodes; it shows: {error!r}")
            yield pg
        finally:
            browser.close()


def _salloc(sandbox: Any, *args: str) -> str:
    res = sandbox.runner().run(["salloc", "--no-shell", "-J", "browser-test", "-t", "10", *args])
    found = re.search(r"Granted job allocation (\d+)", res.stderr)
    assert found, res.stderr
    return found.group(1)


def _in_squeue(sandbox: Any, job: str) -> bool:
    out = sandbox.runner().run(["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout.strip()
    return out in {"RUNNING", "PENDING", "CONFIGURING"}


def test_sidebar_shows_the_sandbox_gpu_map(page: Any, slurm_sandbox: Any) -> None:
    rows = page.locator("#slurmlab-sidebar .slurmlab-NodeRow")
    names = sorted(rows.nth(i).get_attribute("data-node") for i in range(rows.count()))
    assert names == sorted(slurm_sandbox.nodes)
    gpus = len(slurm_sandbox.profile.gpus)
    for name in names:
        cells = page.locator(f'#slurmlab-sidebar .slurmlab-NodeRow[data-node="{name}"] .slurmlab-Gpu')
        assert cells.count() == gpus
    status = page.locator("#slurmlab-sidebar .slurmlab-Status")
    assert status.get_attribute("data-reachable") == "true"
    assert "controller up" in status.inner_text()
    page.screenshot(path=str(SHOTS / "sidebar-gpu-map.png"))


def test_outside_job_appears_and_cancel_removes_it(page: Any, slurm_sandbox: Any) -> None:
    job = _salloc(slurm_sandbox, "-N1", "--gpus=3")
    try:
        row = page.locator(f'#slurmlab-sidebar tr.slurmlab-Job[data-job-id="{job}"]')
        # the server polls every 1 s, the sidebar asks every SIDEBAR_REFRESH_S: allow both plus slack
        row.wait_for(timeout=(SIDEBAR_REFRESH_S + 1 + 4) * 1000)
        assert "RUNNING" in row.locator(".slurmlab-JobState").inner_text()
        held = page.locator(f'#slurmlab-sidebar .slurmlab-Gpu[data-jobs~="{job}"], '
                            f'#slurmlab-sidebar .slurmlab-Gpu[data-jobs="{job}"]')
        page.wait_for_function(
            "job => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu')]"
            ".filter(c => (c.dataset.jobs || '').split(',').includes(job)).length === 3",
            arg=job, timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        assert held.count() >= 1
        page.screenshot(path=str(SHOTS / "sidebar-job-running.png"))

        row.locator("button.slurmlab-Cancel").click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=10_000)
        assert job in dialog.inner_text()
        page.screenshot(path=str(SHOTS / "sidebar-cancel-dialog.png"))
        dialog.locator("button.jp-mod-accept").click()

        deadline = time.monotonic() + 30
        while _in_squeue(slurm_sandbox, job):
            assert time.monotonic() < deadline, f"job {job} still in squeue after cancel in the sidebar"
            time.sleep(0.5)
        row.wait_for(state="detached", timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        page.screenshot(path=str(SHOTS / "sidebar-after-cancel.png"))
    finally:
        slurm_sandbox.runner().run(["scancel", job], check=False)



def test_shards_are_drawn_as_a_fraction(page: Any, slurm_sandbox: Any) -> None:
    per_gpu = slurm_sandbox.profile.shards_per_gpu
    if not per_gpu:
        pytest.skip("this sandbox profile has no shards")
    job = _salloc(slurm_sandbox, "-N1", "--gres=shard:2")
    try:
        cell = page.locator("#slurmlab-sidebar .slurmlab-Gpu", has=page.locator(".slurmlab-Shards")).filter(
            has_text=f"2/{per_gpu}")
        cell.first.wait_for(timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        assert job in (cell.first.get_attribute("data-jobs") or "").split(",")
        page.screenshot(path=str(SHOTS / "sidebar-shards.png"))
    finally:
        slurm_sandbox.runner().run(["scancel", job], check=False)
