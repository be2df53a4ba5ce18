"""The first hour in a JupyterHub deployment (issue 29 point 4), in Debian's headless chromium on the real hub.

Log in to the hub on the sandbox (JupyterHub + configurable-http-proxy + batchspawner), ask the spawn form for
2 GPUs, see the sidebar's first row "this session: job N on node, 2 × TYPE, M min left" (and no cancel button for
that job), open a notebook in the server that job runs, see "this session: job N" from ``%slurm``, make a second
allocation with ``%salloc`` and run a step there that sees its 1 GPU; then stop the server from the hub's control
panel: the session's job ends, the allocation the notebook made is released, no hub job is left.
Screenshots: build/screenshots/hub-*.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from labserver import chromium_browser, fresh_page, require_browser
from notebook_driver import NotebookPage, write_notebook

from slurmlab.testing.other_user import ensure_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="the hub runs as root to submit each user's job as that user"
    ),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="needs runuser (util-linux)"),
    pytest.mark.skipif(
        find_spec("jupyterhub") is None or find_spec("batchspawner") is None,
        reason="pip install 'slurmlab[hub]' (make setup installs it)",
    ),
]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
HUB_USER = "slurmlabhub"
NOTEBOOK = "hub-session.ipynb"
TRACEBACK = "Traceback (most recent call last)"


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"hub-{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    with chromium_browser() as launched:
        yield launched


@pytest.fixture(scope="module")
def hub(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from slurmlab.errors import SlurmlabError
    from slurmlab.hub import Hub
    from slurmlab.hub.control import find_proxy

    try:
        find_proxy()
    except SlurmlabError as exc:
        pytest.skip(str(exc))
    ensure_user(HUB_USER, home=True)
    started = Hub.up(slurm_sandbox, tmp_path_factory.mktemp("hub-browser") / "hub", users=[HUB_USER])
    try:
        yield started
    finally:
        started.down()


def _write_user_notebook(cells: list[str]) -> None:
    """The notebook in the user's home (the server's root), the user's own file."""
    entry = pwd.getpwnam(HUB_USER)
    path = Path(entry.pw_dir) / NOTEBOOK
    write_notebook(path, cells)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _state(sandbox: Any, job_id: str) -> str:
    return str(sandbox.runner().run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False).stdout.strip())


def _ends(sandbox: Any, job_id: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _state(sandbox, job_id) in ("", "COMPLETED", "CANCELLED"):
            return True
        time.sleep(0.5)
    return False


def _see_the_session_in_the_sidebar(page: Any, sandbox: Any, session_job: str) -> None:
    """The sidebar's first row is the job the server runs in, with its node, its GPUs and the time left; its
    line in the jobs table offers no cancel."""
    node = sandbox.runner().run(["squeue", "-h", "-j", session_job, "-o", "%N"]).stdout.strip()
    tab = page.locator('.jp-SideBar [data-id="slurmlab-sidebar"]')
    tab.wait_for(timeout=30_000)
    if not page.locator("#slurmlab-sidebar").is_visible():
        tab.click()
    row = page.locator("#slurmlab-sidebar .slurmlab-Session")
    row.locator(".slurmlab-SessionLine").wait_for(timeout=60_000)
    line = row.locator(".slurmlab-SessionLine").inner_text()
    # 2 GPUs and 10 minutes asked in the form: "9 min left" a moment after the start
    assert re.fullmatch(
        rf"this session: job {session_job} on {re.escape(node)}, 2 × \S+, [0-9] min left", line
    ), line
    assert "never cancels it" in row.locator(".slurmlab-SessionWords").inner_text()
    job_row = page.locator(f'#slurmlab-sidebar tr.slurmlab-Job[data-job-id="{session_job}"]')
    job_row.wait_for(timeout=30_000)
    assert job_row.locator(".slurmlab-Cancel").count() == 0
    assert "this session" in job_row.inner_text()
    _shot(page, "3-sidebar-this-session")


def test_log_in_spawn_two_gpus_see_the_session_job_salloc_and_stop(
    browser: Any, hub: Any, slurm_sandbox: Any
) -> None:
    _write_user_notebook(
        [
            "%load_ext slurmlab",
            "%slurm",
            "a = %salloc --gpus=1 -t 5\na.wait('RUNNING', timeout=60)",
            "%srun nvidia-smi -L",
        ]
    )
    with fresh_page(browser) as page:
        page.goto(f"{hub.url}/hub/login", timeout=60_000)
        page.fill("#username_input", HUB_USER)
        page.fill("#password_input", hub.password)
        _shot(page, "1-login")
        page.click("#login_submit")

        # the spawn form: GPUs, time, partition
        page.goto(f"{hub.url}/hub/spawn", timeout=60_000)
        page.fill("#ngpus", "2")
        page.fill("#runtime", "10")
        page.select_option("#partition", "gpu")
        _shot(page, "2-spawn-form")
        page.locator("#spawn_form [type=submit]").click()
        # the hub waits for batchspawner's job, then sends the browser to JupyterLab in it
        page.wait_for_url(re.compile(rf"/user/{HUB_USER}/lab"), timeout=150_000)
        page.locator("#jp-main-dock-panel").wait_for(timeout=90_000)
        session_job = str(hub.user(HUB_USER)["servers"][""]["state"]["job_id"])
        assert _state(slurm_sandbox, session_job) == "RUNNING"
        _see_the_session_in_the_sidebar(page, slurm_sandbox, session_job)

        nb = NotebookPage(page, f"{hub.url}/user/{HUB_USER}", "", NOTEBOOK)
        loaded = nb.run(0)
        assert TRACEBACK not in loaded, loaded
        shown = nb.run(1, timeout=60)
        assert TRACEBACK not in shown, shown
        # Allocation.own: the server's own job, first, with its two GPUs
        assert re.search(rf"this session: job {session_job}\b", shown), shown
        _shot(page, "4-this-session")

        granted = nb.run(2, timeout=90)
        assert TRACEBACK not in granted, granted
        found = re.search(r"[Aa]llocation (\d+)", granted)
        assert found, granted
        second = found.group(1)
        assert second != session_job
        smi = nb.run(3, timeout=60)
        # the step of the second allocation sees its one GPU, not the session's two
        assert len(re.findall(r"^GPU \d+:", smi, re.M)) == 1, smi
        assert "more than the job's" not in smi, smi
        _shot(page, "5-salloc-srun")

        # stop the server from the hub's control panel
        page.goto(f"{hub.url}/hub/home", timeout=60_000)
        page.wait_for_load_state("networkidle")  # the button's handler is attached by the page's script
        _shot(page, "6-control-panel")
        page.locator("#stop").click()
        # the hub hides the button once the server is stopped (batchspawner has cancelled its job)
        page.locator("#stop").wait_for(state="hidden", timeout=90_000)
        assert "Start My Server" in page.locator("#start").inner_text()
        _shot(page, "7-stopped")

    assert _ends(slurm_sandbox, session_job), (
        f"the session's job {session_job}: {_state(slurm_sandbox, session_job)}"
    )
    assert _ends(slurm_sandbox, second), (
        f"the notebook's allocation {second}: {_state(slurm_sandbox, second)}"
    )
    assert hub.jobs() == []
