"""slurmlab as a JupyterLab tool (issue 28 point 8, and the sidebar's parts of point 9), in a real JupyterLab
driven in Debian's headless chromium: its commands in the command palette and the Launcher, the queue in the
main area with Hold / Release / Cancel, a notification when a job of mine starts or ends, and the sidebar's
layout (8 GPUs on one line in a narrow sidebar, whole node names, one "sandbox" in its header, recent jobs
without the running ones).

Jobs are made and checked from outside with the sandbox's own Slurm commands. Screenshots go to
``build/screenshots/`` (``lab-*.png`` and ``sidebar-*.png``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import chromium_browser, fresh_page, open_sidebar, require_browser, running_lab
from notebook_driver import NotebookPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
SIDEBAR_REFRESH_S = 5  # the sidebar's default refresh interval (schema/plugin.json)
ROUND_MS = (SIDEBAR_REFRESH_S + 6) * 1000  # one sidebar round after the server's 1 s poll, with slack


@pytest.fixture(scope="module")
def lab_server(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (REPO / "slurmlab" / "labextension" / "package.json").exists():
        pytest.skip("the JupyterLab extension is not built: run `make labextension` (needs node and npm)")
    require_browser()
    runtime = tmp_path_factory.mktemp("xdg")
    env = {
        **slurm_sandbox.env(),
        "SLURMLAB_POLL_INTERVAL": "1",
        "SLURMLAB_CLUSTER_POLL_INTERVAL": "1",
        "XDG_RUNTIME_DIR": str(runtime),
    }
    with running_lab(tmp_path_factory.mktemp("lab"), env, ready_path="slurmlab/api/status") as server:
        yield server


@pytest.fixture(scope="module")
def lab(lab_server: Any) -> str:
    return str(lab_server.page_url("lab"))


@pytest.fixture(scope="module")
def chromium(lab: str) -> Iterator[Any]:
    with chromium_browser() as browser:
        yield browser


@pytest.fixture
def page(lab: str, chromium: Any) -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with fresh_page(chromium) as pg:
        open_sidebar(pg, lab)
        pg.wait_for_selector("#slurmlab-sidebar .slurmlab-NodeRow", timeout=30_000)
        yield pg


def _sbatch(sandbox: Any, name: str, *args: str) -> str:
    res = sandbox.runner().run(
        ["sbatch", "--parsable", "-J", name, "-t", "10", "-o", "/dev/null", *args, "--wrap", "sleep 600"]
    )
    return res.stdout.strip().split(";")[0]


def _squeue(sandbox: Any, job: str, fmt: str) -> str:
    return sandbox.runner().run(["squeue", "-h", "-j", job, "-o", fmt], check=False).stdout.strip()


def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.3)


def _palette(page: Any, text: str) -> Any:
    """The command palette, filtered by ``text``; its items."""
    page.keyboard.press("Control+Shift+C")
    box = page.locator(".lm-CommandPalette-input").first
    box.wait_for(timeout=10_000)
    box.fill(text)
    return page.locator(".lm-CommandPalette-item")


def test_slurm_commands_are_in_the_palette_and_the_launcher(page: Any) -> None:
    items = _palette(page, "Slurm:")
    items.first.wait_for(timeout=10_000)
    wanted = {
        "Slurm: open queue",
        "Slurm: new allocation request",
        "Slurm: show the GPU sidebar",
        "Slurm: refresh the GPU sidebar",
    }
    # the palette renders its list again as the filter settles: read every label at once (a count, then the
    # n-th item, can name an item the next render removed), until the four are there
    deadline = time.monotonic() + 20
    labels = items.locator(".lm-CommandPalette-itemLabel").all_inner_texts()
    while not wanted <= set(labels) and time.monotonic() < deadline:
        time.sleep(0.2)
        labels = items.locator(".lm-CommandPalette-itemLabel").all_inner_texts()
    assert wanted <= set(labels), labels
    page.screenshot(path=str(SHOTS / "lab-palette-slurm.png"))
    page.keyboard.press("Escape")
    # the Launcher (the lab's first tab) has a Slurm section with the queue and a new request
    section = page.locator(
        ".jp-Launcher-section", has=page.locator(".jp-Launcher-sectionTitle", has_text="Slurm")
    )
    section.wait_for(timeout=15_000)
    cards = section.locator(".jp-LauncherCard-label")
    assert sorted(cards.nth(i).inner_text() for i in range(cards.count())) == [
        "Slurm allocation",
        "Slurm queue",
    ]
    page.screenshot(path=str(SHOTS / "lab-launcher-slurm.png"))
    # the request: a new notebook whose first cell, run, is the request form
    section.locator(".jp-LauncherCard", has_text="Slurm allocation").click()
    cell = page.locator(".jp-NotebookPanel .jp-Cell").first
    cell.wait_for(timeout=30_000)
    page.wait_for_function(
        "() => (document.querySelector('.jp-NotebookPanel .jp-Cell .jp-InputArea-prompt') || {})"
        ".textContent?.match(/\\[\\d+\\]/)",
        timeout=90_000,
    )
    assert "%salloc --form" in cell.locator(".jp-InputArea-editor").inner_text()
    output = cell.locator(".jp-OutputArea-output")
    output.first.wait_for(timeout=30_000)
    assert "Traceback" not in output.first.inner_text()
    page.screenshot(path=str(SHOTS / "lab-new-allocation-request.png"))


def test_queue_view_holds_releases_and_cancels_my_job(page: Any, slurm_sandbox: Any) -> None:
    job = _sbatch(slurm_sandbox, "queue-view-job", "--gpus=1", "--begin=now+3600")
    try:
        _palette(page, "Slurm: open queue")
        page.keyboard.press("Enter")
        row = page.locator(f'#slurmlab-queue tr.slurmlab-QueueJob[data-job-id="{job}"]')
        row.wait_for(timeout=ROUND_MS)
        assert row.get_attribute("data-state") == "PENDING"
        assert page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text="Slurm queue").count() == 1
        row.locator('button[data-action="hold"]').click()
        error = page.locator("#slurmlab-queue .slurmlab-Error")
        _until(
            lambda: _squeue(slurm_sandbox, job, "%r") == "JobHeldUser",
            20,
            f"job {job} held (the queue view says {error.inner_text()!r})",
        )
        row.locator('button[data-action="release"]').wait_for(timeout=ROUND_MS)
        page.screenshot(path=str(SHOTS / "lab-queue-held.png"))
        row.locator('button[data-action="release"]').click()
        _until(lambda: _squeue(slurm_sandbox, job, "%r") != "JobHeldUser", 20, f"job {job} released")
        row.locator('button[data-action="hold"]').wait_for(timeout=ROUND_MS)
        row.locator('button[data-action="cancel"]').click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=10_000)
        dialog.locator("button.jp-mod-accept").click()
        _until(
            lambda: _squeue(slurm_sandbox, job, "%T") in ("", "CANCELLED", "COMPLETING"),
            20,
            f"job {job} cancelled",
        )
        row.wait_for(state="detached", timeout=ROUND_MS)
        page.screenshot(path=str(SHOTS / "lab-queue-after-cancel.png"))
    finally:
        slurm_sandbox.runner().run(["scancel", job], check=False)


def test_a_notification_says_when_my_job_starts_and_ends(page: Any, slurm_sandbox: Any) -> None:
    # held at submit: pending, and seen pending by the sidebar before it is let go
    job = _sbatch(slurm_sandbox, "notify-me", "--gpus=1", "--hold")
    try:
        page.locator(f'#slurmlab-sidebar tr.slurmlab-Job[data-job-id="{job}"]').wait_for(timeout=ROUND_MS)
        slurm_sandbox.runner().run(["scontrol", "release", job])
        toast = page.locator(".Toastify__toast", has_text=f"Slurm job {job} (notify-me) started")
        toast.wait_for(timeout=ROUND_MS + 20_000)
        page.wait_for_timeout(800)
        page.screenshot(path=str(SHOTS / "lab-notification-started.png"))
        slurm_sandbox.runner().run(["scancel", job])
        ended = page.locator(".Toastify__toast", has_text=f"Slurm job {job} (notify-me) ended")
        ended.wait_for(timeout=ROUND_MS + 20_000)
        page.wait_for_timeout(800)  # the toast slides in
        page.screenshot(path=str(SHOTS / "lab-notification-ended.png"))
    finally:
        slurm_sandbox.runner().run(["scancel", job], check=False)


def test_a_narrow_sidebar_keeps_eight_gpus_on_a_line_and_whole_node_names(
    page: Any, slurm_sandbox: Any
) -> None:
    gpus = len(slurm_sandbox.profile.gpus)
    if gpus != 8:
        pytest.skip(f"profile {slurm_sandbox.profile_name} has {gpus} GPUs a node; this checks 8")
    job = _sbatch(slurm_sandbox, "narrow-sidebar", "--gpus=1")
    try:
        page.locator(f'#slurmlab-sidebar tr.slurmlab-Job[data-job-id="{job}"]').wait_for(timeout=ROUND_MS)
        # the sidebar as narrow as a user drags it (JupyterLab keeps its panels at least this wide)
        page.evaluate(
            "() => { const s = document.querySelector('#slurmlab-sidebar'); s.style.width = '220px'; }"
        )
        page.wait_for_timeout(300)
        lines = page.evaluate(
            "() => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeRow')].map(r =>"
            " new Set([...r.querySelectorAll('.slurmlab-Gpu')].map(c => Math.round(c.getBoundingClientRect().top)))"
            ".size)"
        )
        assert lines and all(n == 1 for n in lines), f"GPU lines per node: {lines}"
        cut = page.evaluate(
            "() => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeName')]"
            ".filter(n => n.scrollWidth > n.clientWidth + 1).map(n => n.textContent)"
        )
        assert cut == [], f"node names cut: {cut}"
        # the cluster's name, and each picker option (other sandboxes of the suite may be listed there), say
        # "sandbox" once each (was "sandbox · sandbox dgx-h100")
        names = page.evaluate(
            "() => [document.querySelector('#slurmlab-sidebar .slurmlab-ClusterName').textContent,"
            " ...[...document.querySelectorAll('#slurmlab-sidebar .slurmlab-ClusterPicker option')]"
            ".map(o => o.textContent)]"
        )
        assert names and all(len(re.findall(r"\bsandbox\b", n)) <= 1 for n in names), names
        # the running job is in the job list, not repeated under "Recent jobs"
        assert page.locator(f'#slurmlab-sidebar .slurmlab-RecentJob[data-job-id="{job}"]').count() == 0
        page.locator("#slurmlab-sidebar").screenshot(path=str(SHOTS / "sidebar-narrow-eight-gpus.png"))
    finally:
        slurm_sandbox.runner().run(["scancel", job], check=False)


def _theme(page: Any, name: str, light: bool) -> None:
    """Switch JupyterLab's theme through the command palette, as a user does."""
    _palette(page, name)
    page.locator(".lm-CommandPalette-item", has_text=name).first.click()
    page.wait_for_function(
        "light => document.body.dataset.jpThemeLight === String(light)", arg=light, timeout=30_000
    )


def _mean_luminance(png: bytes) -> float:
    import io

    from PIL import Image, ImageStat

    return float(ImageStat.Stat(Image.open(io.BytesIO(png)).convert("L")).mean[0])


def test_a_figure_turns_dark_with_the_dark_theme(lab_server: Any, chromium: Any) -> None:
    """Issue 28: Bokeh figures stayed white in the dark theme. The topology figure of lesson 03, drawn in a
    notebook, is dark once JupyterLab's theme is, and light again with the light theme."""
    pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")
    write_notebook(
        lab_server.root / "dark-figure.ipynb", ['import slurmlab\nslurmlab.topology(profile="dgx-h100")']
    )
    with fresh_page(chromium) as page:
        nb = NotebookPage(page, lab_server.url, lab_server.token, "dark-figure.ipynb")
        nb.run(0, timeout=90)
        figure = nb.output(0).locator("[data-root-id] > *").first
        figure.wait_for(timeout=30_000)
        nb.output(0).locator("canvas").first.wait_for(state="attached", timeout=30_000)
        page.wait_for_timeout(1000)  # Bokeh paints after the canvas is in the page
        light = _mean_luminance(figure.screenshot())
        try:
            _theme(page, "JupyterLab Dark", light=False)
            page.wait_for_timeout(500)
            dark = _mean_luminance(figure.screenshot())
            page.screenshot(path=str(SHOTS / "lab-figure-dark-theme.png"))
        finally:
            _theme(page, "JupyterLab Light", light=True)
        assert light > 150 and dark < 110, (light, dark)
