"""Issue 30's "done when" in a browser: a kernel of slurmlab's provisioner started from JupyterLab's sidebar runs in
a step of its own Slurm job on the sandbox, as a person sees it in Debian's headless chromium.

A notebook is opened with the kernel from the sidebar's "kernels on GPU nodes" button (the kernel spec installed
by ``slurmlab kernel install --prefix`` where the lab looks); a cell prints the job id, ``CUDA_VISIBLE_DEVICES`` and
the task's CPU mask, compared with ``scontrol show job -d``; the sidebar's row names the job and its step; the
Kernel menu's interrupt stops a sleeping cell, its restart keeps the job (a new step), its shutdown ends the job;
``squeue`` says the job's state after each. The second test fills the cluster first: the sidebar's row and the
notebook's toolbar, beside JupyterLab's kernel indicator, say why the kernel's job waits ("Waiting for GPUs (job
…): …"); the kernel starts once the GPUs are free, and the toolbar's words go.

One JupyterLab and one chromium for the module; the session's sandbox (2 nodes x 8 GPUs). Each test ends its
kernels and cancels its jobs. Screenshots: build/screenshots/kernel-*.png.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from labserver import Lab, chromium_browser, fresh_page, open_sidebar, require_browser, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
SPEC = "slurmlab-gpu"
# one line: typed into the cell as it is (no auto-indent, no closing brackets added)
REPORT = (
    "import json, os; print('REPORT', json.dumps({k: os.environ.get(k) for k in ('SLURM_JOB_ID', 'SLURM_STEP_ID',"
    " 'SLURMD_NODENAME', 'CUDA_VISIBLE_DEVICES')} | {'mask': sorted(os.sched_getaffinity(0))}))"
)


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"kernel-{name}.png"), full_page=True)


def _api(lab: Lab, method: str, path: str) -> Any:
    req = urllib.request.Request(f"{lab.url}/{path}?token={lab.token}", method=method)
    with urllib.request.urlopen(req, timeout=30) as res:
        body = res.read()
    return json.loads(body) if body else None


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.3)


def _state(sandbox: Any, job: str) -> str:
    """squeue's state of the job ("" once it is no longer listed)."""
    return str(sandbox.runner().run(["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout).strip()


def _my_jobs(sandbox: Any) -> list[str]:
    out = sandbox.runner().run(["squeue", "-h", "--me", "-t", "PD,R,CF", "-o", "%i"], check=False).stdout
    return str(out).split()


def _cpu_ids(detail: str, node: str) -> list[int]:
    found = re.search(rf"Nodes={node} CPU_IDs=(\S+)", detail)
    assert found, detail
    cpus: list[int] = []
    for part in found.group(1).split(","):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def _gpu_idx(detail: str, node: str) -> str:
    found = re.search(rf"Nodes={node} .*GRES=gpu:\w+:\d+\(IDX:([^)]+)\)", detail)
    assert found, detail
    return found.group(1)


@pytest.fixture(scope="module")
def lab(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_browser()
    if not any(
        ep.name == "slurmlab-provisioner" for ep in entry_points(group="jupyter_client.kernel_provisioners")
    ):
        pytest.fail("the provisioner's entry point is not installed: pip install -e . (make setup) again")
    base = tmp_path_factory.mktemp("lab-kernel")
    prefix = base / "prefix"
    installed = subprocess.run(
        [sys.executable, "-m", "slurmlab", "kernel", "install", "--name", SPEC, "--gpus", "2", "--time", "10",
         "--prefix", str(prefix)],
        capture_output=True, text=True, timeout=60, env={**os.environ, **slurm_sandbox.env()},
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    env = {
        **slurm_sandbox.env(),
        "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
        "SLURMLAB_POLL_INTERVAL": "1",
        "SLURMLAB_CLUSTER_POLL_INTERVAL": "1",
    }
    with running_lab(base, env) as server:
        yield server


@pytest.fixture(scope="module")
def chromium(lab: Lab) -> Iterator[Any]:
    with chromium_browser() as launched:
        yield launched


@pytest.fixture
def page(lab: Lab, chromium: Any, slurm_sandbox: Any) -> Iterator[Any]:
    """The lab with the sidebar open; afterwards every kernel is shut down and no job of this user is left."""
    runner = slurm_sandbox.runner()
    mine = ["scancel", "--user", getpass.getuser()]
    runner.run(mine, check=False)
    try:
        with fresh_page(chromium, 1400, 1000) as pg:
            open_sidebar(pg, lab.page_url("lab"))
            yield pg
    finally:
        for session in _api(lab, "GET", "api/sessions"):
            _api(lab, "DELETE", f"api/sessions/{session['id']}")
        runner.run(mine, check=False)
        _until(lambda: not _my_jobs(slurm_sandbox), 30, "the user's jobs ending")


def _start_from_sidebar(page: Any) -> None:
    button = page.locator(f'#slurmlab-sidebar .slurmlab-KernelStart[data-kernel-name="{SPEC}"]')
    button.wait_for(timeout=30_000)
    button.click()
    page.locator(".jp-NotebookPanel:visible .jp-Notebook").first.wait_for(timeout=30_000)


def _kernel_row(page: Any, phase: str, timeout: float = 60) -> Any:
    row = page.locator(f'#slurmlab-sidebar .slurmlab-KernelRow[data-phase="{phase}"]').first
    row.wait_for(timeout=timeout * 1000)
    return row


def _kernels(lab: Lab) -> list[dict[str, Any]]:
    return list(_api(lab, "GET", "slurmlab/api/kernels")["kernels"])


def _idle(page: Any, timeout: float = 90) -> None:
    page.locator(
        ".jp-NotebookPanel:visible .jp-Notebook-ExecutionIndicator[data-status='idle']"
    ).first.wait_for(timeout=timeout * 1000)


def _cell(page: Any, index: int) -> Any:
    return page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell").nth(index)


def _type_and_run(page: Any, index: int, code: str) -> None:
    """Put ``code`` in cell ``index`` (a new one below the last when there is none) and run it."""
    cells = page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")
    while cells.count() <= index:
        cells.last.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Escape")
        page.keyboard.press("b")
    editor = _cell(page, index).locator(".jp-InputArea-editor")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(code)
    page.keyboard.press("Control+Enter")


def _output(page: Any, index: int, needle: str, timeout: float = 90) -> str:
    out = _cell(page, index).locator(".jp-OutputArea").first
    _until(
        lambda: needle in (out.inner_text() if out.count() else ""), timeout, f"{needle!r} in cell {index}"
    )
    return str(out.inner_text())


def _kernel_menu(page: Any, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Kernel$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}")).first.click()
    from playwright.sync_api import TimeoutError as NoDialog

    accept = page.locator(".jp-Dialog .jp-mod-accept")
    try:
        accept.wait_for(timeout=3_000)
    except NoDialog:  # no confirmation asked: nothing to accept
        return
    accept.click()


def _report(page: Any, index: int) -> dict[str, Any]:
    _type_and_run(page, index, REPORT)
    text = _output(page, index, "REPORT")
    return dict(json.loads(text.split("REPORT", 1)[1].strip().splitlines()[0]))


def _matches_slurm(seen: dict[str, Any], sandbox: Any) -> str:
    """What the cell saw is what Slurm says of its job: its GPUs, its CPUs. The job id."""
    job = seen["SLURM_JOB_ID"]
    detail = str(sandbox.runner().run(["scontrol", "show", "job", "-d", job]).stdout)
    node = seen["SLURMD_NODENAME"]
    assert seen["CUDA_VISIBLE_DEVICES"] == _gpu_idx(detail, node), (seen, detail)
    assert len(seen["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    assert seen["mask"] == _cpu_ids(detail, node), (seen, detail)
    return str(job)


def test_kernel_started_from_the_sidebar_runs_in_its_job_and_the_job_follows_it(
    lab: Lab, page: Any, slurm_sandbox: Any
) -> None:
    _start_from_sidebar(page)
    row = _kernel_row(page, "running", timeout=120)
    _idle(page)
    seen = _report(page, 0)
    job = _matches_slurm(seen, slurm_sandbox)
    assert _state(slurm_sandbox, job) == "RUNNING"
    # the sidebar's row: the notebook, the job, its step, the time left; no cancel for it
    assert row.get_attribute("data-job-id") == job
    words = " ".join(row.inner_text().split())
    step = f"{job}.{seen['SLURM_STEP_ID']}"
    assert (
        row.locator(".slurmlab-KernelName").inner_text() == "Untitled.ipynb"
    )  # as the file browser names it
    assert f"job {job} running" in words and f"(step {step})" in words, words
    assert re.search(r"\d+ min left", words), words
    assert row.locator("button").count() == 0
    assert "releases it" in page.locator("#slurmlab-sidebar .slurmlab-KernelsWords").inner_text()
    _shot(page, "running")

    # interrupt from the Kernel menu: the sleeping cell on the node ends in KeyboardInterrupt, the job stays
    _type_and_run(page, 1, "import time; print('sleeping', flush=True); time.sleep(30)")
    _output(page, 1, "sleeping")
    _kernel_menu(page, "Interrupt Kernel")
    _output(page, 1, "KeyboardInterrupt", timeout=20)
    _idle(page)
    assert _state(slurm_sandbox, job) == "RUNNING"

    # restart: the same job, a new step
    _kernel_menu(page, "Restart Kernel")
    _until(
        lambda: any(k["step"] not in (None, step) and k["phase"] == "running" for k in _kernels(lab)),
        120,
        "the kernel's new step",
    )
    _idle(page)
    again = _report(page, 2)
    assert again["SLURM_JOB_ID"] == job and again["SLURM_STEP_ID"] != seen["SLURM_STEP_ID"], (seen, again)
    assert _state(slurm_sandbox, job) == "RUNNING"
    _until(lambda: f"step {job}.{again['SLURM_STEP_ID']}" in row.inner_text(), 30, "the row's new step")

    # shutdown: the job ends with the kernel, and the row goes
    _kernel_menu(page, "Shut Down Kernel")
    _until(lambda: _state(slurm_sandbox, job) in ("", "COMPLETING", "CANCELLED"), 60, f"job {job} ending")
    _until(lambda: not _kernels(lab), 30, "the kernel leaving the list")
    page.locator(f'#slurmlab-sidebar .slurmlab-KernelRow[data-job-id="{job}"]').wait_for(
        state="detached", timeout=30_000
    )


def _wait_words(item: Any, why: str) -> str:
    """The wait item's words once they give ``why`` ("" before)."""
    said = " ".join(item.inner_text().split())
    return said if why in said else ""


def test_a_full_cluster_shows_why_the_kernel_waits_then_it_starts(
    lab: Lab, page: Any, slurm_sandbox: Any
) -> None:
    runner = slurm_sandbox.runner()
    said = runner.run(
        ["salloc", "--no-shell", "-J", "fill", "-t", "10", "-N2", "--gpus-per-node=8"], timeout=30
    ).stderr
    found = re.search(r"Granted job allocation (\d+)", said)
    assert found, said
    filler = found.group(1)
    _start_from_sidebar(page)
    row = _kernel_row(page, "pending", timeout=60)
    job = str(row.get_attribute("data-job-id"))
    assert job and _state(slurm_sandbox, job) == "PENDING"
    [pending] = _kernels(lab)
    assert pending["reason"] == "Resources" and pending["why"], pending
    words = " ".join(row.inner_text().split())
    assert f"job {job} pending: {pending['why']}" in words, words
    assert row.locator("button").count() == 0
    # the notebook's own toolbar, beside JupyterLab's kernel indicator (which says only that it waits): why
    status = page.locator(".jp-NotebookPanel:visible .jp-Toolbar .slurmlab-KernelWait").first
    _until(
        lambda: status.is_visible() and status.get_attribute("data-phase") == "pending", 30, "the wait item"
    )
    said = _until(lambda: _wait_words(status, pending["why"]), 30, "the reason beside the kernel's status")
    assert re.fullmatch(
        rf"Waiting for GPUs \(job {job}(, expected (\w{{3}} \d+ )?\d\d:\d\d)?\): {re.escape(pending['why'])}",
        said,
    ), said
    assert status.get_attribute("data-job-id") == job
    indicator = page.locator(".jp-NotebookPanel:visible .jp-Notebook-ExecutionIndicator").first
    assert indicator.get_attribute("data-status") not in ("idle", "busy")
    _shot(page, "pending")

    runner.run(["scancel", filler])
    _kernel_row(page, "running", timeout=120)
    assert _state(slurm_sandbox, job) == "RUNNING"
    _idle(page)
    # the kernel runs: nothing left to say beside its status
    status.wait_for(state="hidden", timeout=30_000)
    # hidden and empty, or gone with a toolbar JupyterLab drew again (then an inner_text() of nothing waits out
    # its timeout: the fresh-clone CI run)
    assert status.count() == 0 or status.inner_text(timeout=5_000).strip() == ""
