"""The "Slurm GPUs" sidebar in a real JupyterLab, driven in Debian's headless chromium.

JupyterLab runs as a separate process (``jupyter lab``) pointed at the Slurm sandbox; jobs are
created and checked from outside with the sandbox's own Slurm commands. The lab's default place for
sandboxes (``$XDG_RUNTIME_DIR/slurmlab/sandbox``) is the test session's folder of sandboxes, so a
sandbox the tests start there is one the server finds, as it finds one ``%slurm sandbox up`` starts.
Screenshots go to ``build/screenshots/``.
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
def lab(slurm_sandbox: Any, sandbox_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A JupyterLab server on a known port and token, in a fresh workspace; yields its lab URL."""
    if not (REPO / "slurmlab" / "labextension" / "package.json").exists():
        pytest.skip("the JupyterLab extension is not built: run `make labextension` (needs node and npm)")
    require_browser()
    runtime = tmp_path_factory.mktemp("xdg")
    (runtime / "slurmlab").mkdir()
    (runtime / "slurmlab" / "sandbox").symlink_to(sandbox_factory.base)
    env = {**slurm_sandbox.env(), "SLURMLAB_POLL_INTERVAL": "1", "XDG_RUNTIME_DIR": str(runtime)}
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


def _sbatch(sandbox: Any, name: str, *args: str) -> str:
    """A batch job (it may pend: salloc would wait for it)."""
    res = sandbox.runner().run(["sbatch", "--parsable", "-J", name, "-t", "10", *args, "--wrap", "sleep 600"])
    return res.stdout.strip().split(";")[0]


def test_sidebar_names_its_cluster(page: Any, slurm_sandbox: Any) -> None:
    name = page.locator("#slurmlab-sidebar .slurmlab-ClusterName")
    expected = f"sandbox · sandbox {slurm_sandbox.profile_name}"
    page.wait_for_function("text => document.querySelector('#slurmlab-sidebar .slurmlab-ClusterName')"
                           ".textContent === text", arg=expected, timeout=10_000)
    assert name.get_attribute("data-sandbox") == slurm_sandbox.profile_name
    picker = page.locator("#slurmlab-sidebar select.slurmlab-ClusterPicker")
    assert picker.input_value() == name.get_attribute("data-cluster")


def test_picker_follows_a_sandbox_started_later(page: Any, slurm_sandbox: Any, sandbox_factory: Any) -> None:
    was_running = (sandbox_factory.base / "h200-mig-1n" / "state.json").exists()  # another test's
    mig = sandbox_factory("h200-mig", 1)  # where `%slurm sandbox up` would put it, for this lab
    picker = page.locator("#slurmlab-sidebar select.slurmlab-ClusterPicker")
    # the sidebar asks for the list at every refresh: one refresh, plus slack
    try:
        found = page.wait_for_function(
            "() => [...document.querySelectorAll('#slurmlab-sidebar select.slurmlab-ClusterPicker option')]"
            ".find(o => o.textContent.endsWith('sandbox h200-mig'))?.value",
            timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
    except Exception:
        page.screenshot(path=str(SHOTS / "sidebar-picker-failed.png"))
        options = page.evaluate("() => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-ClusterPicker "
                                "option')].map(o => [o.value, o.textContent])")
        error = page.locator("#slurmlab-sidebar .slurmlab-Error").inner_text()
        pytest.fail(f"no h200-mig sandbox in the picker; it lists {options}; the sidebar says {error!r}")
    if not was_running:  # the sidebar says that a new one runs
        note = page.locator('#slurmlab-sidebar .slurmlab-ClusterNote[data-kind="new"]')
        note.wait_for(timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        assert "sandbox h200-mig is running now" in note.inner_text()
    picker.select_option(found.json_value())
    page.wait_for_function(
        "nodes => { const rows = [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeRow')];"
        " return rows.length === nodes.length && rows.every(r => nodes.includes(r.dataset.node))"
        " && document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu.slurmlab-mod-mig').length > 0; }",
        arg=list(mig.nodes), timeout=15_000)
    name = page.locator("#slurmlab-sidebar .slurmlab-ClusterName")
    assert name.inner_text().endswith("sandbox h200-mig")
    mig_cell = page.locator("#slurmlab-sidebar .slurmlab-Gpu.slurmlab-mod-mig").first
    assert re.fullmatch(r"\d+g", mig_cell.locator(".slurmlab-MigSlice").inner_text())
    assert "MIG slice" in (mig_cell.get_attribute("title") or "")
    assert page.locator('#slurmlab-sidebar .slurmlab-LegendItem[data-legend="mig"]').count() == 1
    page.screenshot(path=str(SHOTS / "sidebar-picked-sandbox.png"))
    # the choice lasts for the browser session: a reload keeps it
    page.reload()
    page.wait_for_selector("#slurmlab-sidebar .slurmlab-NodeRow", timeout=30_000)
    page.wait_for_function("() => (document.querySelector('#slurmlab-sidebar .slurmlab-ClusterName') || {})"
                           ".textContent?.endsWith('sandbox h200-mig')", timeout=15_000)
    # and back to the first one
    picker.select_option(label=f"sandbox · sandbox {slurm_sandbox.profile_name}")
    page.wait_for_function(
        "nodes => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeRow')]"
        ".map(r => r.dataset.node).sort().join() === nodes.join()",
        arg=sorted(slurm_sandbox.nodes), timeout=15_000)


def test_twelve_jobs_differ_with_numbered_gpus_a_legend_and_one_line_names(page: Any, slurm_sandbox: Any) -> None:
    gpus = len(slurm_sandbox.profile.gpus) * len(slurm_sandbox.nodes)
    if gpus < 13:
        pytest.skip(f"profile {slurm_sandbox.profile_name} has {gpus} GPUs; this needs 13")
    long_name = "a-job-name-far-too-long-for-the-sidebar-to-show-on-one-line-"
    jobs = [_salloc(slurm_sandbox, "-N1", "--gpus=1", "-J", f"{long_name}{i:02d}") for i in range(12)]
    waiting = _sbatch(slurm_sandbox, "waits-for-gpus", "-N1", f"--gpus={len(slurm_sandbox.profile.gpus)}")
    try:
        page.wait_for_function(
            "n => document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu[data-state=\"job\"]').length >= n",
            arg=12, timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        colours = page.evaluate(
            "jobs => jobs.map(j => { const c = [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu')]"
            ".find(c => (c.dataset.jobs || '').split(',').includes(j)); return c ? c.style.background : null; })",
            jobs)
        assert None not in colours and len(set(colours)) == 12, colours
        # every cell is numbered with its GPU index
        numbers = page.evaluate("() => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeRow .slurmlab-Gpu')]"
                                ".map(c => [c.dataset.gpu, c.querySelector('.slurmlab-GpuIndex')?.textContent])")
        assert numbers and all(a == b for a, b in numbers), numbers
        # the legend names each job beside its colour, and the kinds of cells
        legend = page.locator("#slurmlab-sidebar .slurmlab-Legend")
        for job in jobs:
            assert legend.locator(f'.slurmlab-LegendItem[data-job-id="{job}"]').count() == 1
        for kind in ("free", "other", "down"):
            assert legend.locator(f'.slurmlab-LegendItem[data-legend="{kind}"]').count() == 1
        # a long name stays on one line, cut with an ellipsis, the whole name in its title
        name = page.locator(f'#slurmlab-sidebar tr.slurmlab-Job[data-job-id="{jobs[0]}"] .slurmlab-JobName')
        assert name.get_attribute("title") == f"{long_name}00"
        line_height = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector("
                                    "'#slurmlab-sidebar .slurmlab-JobName')).fontSize) * 1.6")
        assert name.bounding_box()["height"] <= line_height
        # the pending job says why in words, for how long, and when Slurm expects it to start
        pending = page.locator(f'#slurmlab-sidebar tr.slurmlab-PendingRow[data-job-id="{waiting}"]')
        pending.wait_for(timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        # Slurm gives a reason at its scheduler's next pass after the submit
        page.wait_for_function(
            "job => (document.querySelector(`#slurmlab-sidebar tr.slurmlab-PendingRow[data-job-id='${job}'] "
            ".slurmlab-Reason`) || {}).textContent?.includes('waiting for resources')",
            arg=waiting, timeout=(SIDEBAR_REFRESH_S + 35) * 1000)
        text = pending.inner_text()
        assert "waiting for resources" in text and "pending for" in text, text
        assert pending.locator(".slurmlab-Reason").get_attribute("title") == "Slurm's reason: Resources"
        assert pending.locator(".slurmlab-ExpectedStart").count() == 1
        page.screenshot(path=str(SHOTS / "sidebar-twelve-jobs-legend.png"))
    finally:
        for job in [*jobs, waiting]:
            slurm_sandbox.runner().run(["scancel", job], check=False)

