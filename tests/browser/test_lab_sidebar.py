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
from labserver import chromium_browser, fresh_page, open_sidebar, require_browser, running_lab

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
    env = {
        **slurm_sandbox.env(),
        "SLURMLAB_POLL_INTERVAL": "1",
        "SLURMLAB_CLUSTER_POLL_INTERVAL": "1",
        "XDG_RUNTIME_DIR": str(runtime),
    }
    with running_lab(tmp_path_factory.mktemp("lab"), env, ready_path="slurmlab/api/status") as server:
        yield server.page_url("lab")


@pytest.fixture(scope="module")
def chromium(lab: str) -> Iterator[Any]:
    """One chromium for the module (its event loop ends with the module, before pytest-jupyter's tests)."""
    with chromium_browser() as browser:
        yield browser


@pytest.fixture
def page(lab: str, chromium: Any) -> Iterator[Any]:
    """A fresh page (a context of its own) on the lab page, per test."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    with fresh_page(chromium) as pg:
        open_sidebar(pg, lab)
        try:
            pg.wait_for_selector("#slurmlab-sidebar .slurmlab-NodeRow", timeout=30_000)
        except Exception:
            pg.screenshot(path=str(SHOTS / "sidebar-failed-to-load.png"))
            error = pg.locator("#slurmlab-sidebar .slurmlab-Error").inner_text()
            pytest.fail(f"the sidebar drew no nodes; it shows: {error!r}")
        yield pg


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
        held = page.locator(
            f'#slurmlab-sidebar .slurmlab-Gpu[data-jobs~="{job}"], '
            f'#slurmlab-sidebar .slurmlab-Gpu[data-jobs="{job}"]'
        )
        page.wait_for_function(
            "job => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu')]"
            ".filter(c => (c.dataset.jobs || '').split(',').includes(job)).length === 3",
            arg=job,
            timeout=(SIDEBAR_REFRESH_S + 5) * 1000,
        )
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
            has_text=f"2/{per_gpu}"
        )
        cell.first.wait_for(timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        assert job in (cell.first.get_attribute("data-jobs") or "").split(",")
        page.screenshot(path=str(SHOTS / "sidebar-shards.png"))
    finally:
        slurm_sandbox.runner().run(["scancel", job], check=False)


def _sbatch(sandbox: Any, name: str, *args: str) -> str:
    """A batch job (it may pend: salloc would wait for it)."""
    res = sandbox.runner().run(
        ["sbatch", "--parsable", "-J", name, "-t", "10", "-o", "/dev/null", *args, "--wrap", "sleep 600"]
    )
    return res.stdout.strip().split(";")[0]


def test_sidebar_names_its_cluster(page: Any, slurm_sandbox: Any) -> None:
    name = page.locator("#slurmlab-sidebar .slurmlab-ClusterName")
    expected = f"sandbox {slurm_sandbox.profile_name}"
    page.wait_for_function(
        "text => document.querySelector('#slurmlab-sidebar .slurmlab-ClusterName').textContent === text",
        arg=expected,
        timeout=10_000,
    )
    assert name.get_attribute("data-sandbox") == slurm_sandbox.profile_name
    picker = page.locator("#slurmlab-sidebar select.slurmlab-ClusterPicker")
    assert picker.input_value() == name.get_attribute("data-cluster")


def test_picker_follows_a_sandbox_started_later(page: Any, slurm_sandbox: Any, sandbox_factory: Any) -> None:
    was_running = (sandbox_factory.base / "h200-mig-1n" / "state.json").exists()  # another test's
    mig = sandbox_factory("h200-mig", 1)  # where `%slurm sandbox up` would put it, for this lab
    # its label; where another test of this session runs an h200-mig too, the label names the folder
    mig_label = ["sandbox h200-mig", f"sandbox h200-mig in {mig.directory}"]
    picker = page.locator("#slurmlab-sidebar select.slurmlab-ClusterPicker")
    # the sidebar asks for the list at every refresh: one refresh, plus slack
    try:
        # this test's own sandbox, by the slurm.conf in its folder (the option's title names it): another h200-mig
        # of this session may be listed first under the same label, before the labels name their folders
        found = page.wait_for_function(
            "dir => [...document.querySelectorAll('#slurmlab-sidebar select.slurmlab-ClusterPicker option')]"
            ".find(o => (o.title || '').includes('(' + dir + '/'))?.value",
            arg=str(mig.directory),
            timeout=(SIDEBAR_REFRESH_S + 5) * 1000,
        )
    except Exception:
        page.screenshot(path=str(SHOTS / "sidebar-picker-failed.png"))
        options = page.evaluate(
            "() => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-ClusterPicker "
            "option')].map(o => [o.value, o.textContent])"
        )
        error = page.locator("#slurmlab-sidebar .slurmlab-Error").inner_text()
        pytest.fail(f"no h200-mig sandbox in the picker; it lists {options}; the sidebar says {error!r}")
    if not was_running:  # the sidebar says that a new one runs
        note = page.locator('#slurmlab-sidebar .slurmlab-ClusterNote[data-kind="new"]')
        note.wait_for(timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        assert any(f"{label} is running now" in note.inner_text() for label in mig_label), note.inner_text()
    picker.select_option(found.json_value())
    page.wait_for_function(
        "nodes => { const rows = [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeRow')];"
        " return rows.length === nodes.length && rows.every(r => nodes.includes(r.dataset.node))"
        " && document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu.slurmlab-mod-mig').length > 0; }",
        arg=list(mig.nodes),
        timeout=15_000,
    )
    name = page.locator("#slurmlab-sidebar .slurmlab-ClusterName")
    assert name.inner_text().endswith(tuple(mig_label))
    mig_cell = page.locator("#slurmlab-sidebar .slurmlab-Gpu.slurmlab-mod-mig").first
    assert re.fullmatch(r"\d+g", mig_cell.locator(".slurmlab-MigSlice").inner_text())
    assert "MIG slice" in (mig_cell.get_attribute("title") or "")
    assert page.locator('#slurmlab-sidebar .slurmlab-LegendItem[data-legend="mig"]').count() == 1
    page.screenshot(path=str(SHOTS / "sidebar-picked-sandbox.png"))
    # the choice lasts for the browser session: a reload keeps it
    page.reload()
    page.wait_for_selector("#slurmlab-sidebar .slurmlab-NodeRow", timeout=30_000)
    page.wait_for_function(
        "ends => ends.some(e => (document.querySelector('#slurmlab-sidebar "
        ".slurmlab-ClusterName') || {}).textContent?.endsWith(e))",
        arg=mig_label,
        timeout=15_000,
    )
    # and back to the first one
    picker.select_option(label=f"sandbox {slurm_sandbox.profile_name}")
    page.wait_for_function(
        "nodes => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeRow')]"
        ".map(r => r.dataset.node).sort().join() === nodes.join()",
        arg=sorted(slurm_sandbox.nodes),
        timeout=15_000,
    )


def test_twelve_jobs_differ_with_numbered_gpus_a_legend_and_one_line_names(
    page: Any, slurm_sandbox: Any
) -> None:
    gpus = len(slurm_sandbox.profile.gpus) * len(slurm_sandbox.nodes)
    if gpus < 13:
        pytest.skip(f"profile {slurm_sandbox.profile_name} has {gpus} GPUs; this needs 13")
    long_name = "a-job-name-far-too-long-for-the-sidebar-to-show-on-one-line-"
    jobs = [_salloc(slurm_sandbox, "-N1", "--gpus=1", "-J", f"{long_name}{i:02d}") for i in range(12)]
    waiting = _sbatch(slurm_sandbox, "waits-for-gpus", "-N1", f"--gpus={len(slurm_sandbox.profile.gpus)}")
    try:
        page.wait_for_function(
            "n => document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu[data-state=\"job\"]').length >= n",
            arg=12,
            timeout=(SIDEBAR_REFRESH_S + 5) * 1000,
        )
        colours = page.evaluate(
            "jobs => jobs.map(j => { const c = [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-Gpu')]"
            ".find(c => (c.dataset.jobs || '').split(',').includes(j)); return c ? c.style.background : null; })",
            jobs,
        )
        assert None not in colours and len(set(colours)) == 12, colours
        # every cell is numbered with its GPU index
        numbers = page.evaluate(
            "() => [...document.querySelectorAll('#slurmlab-sidebar .slurmlab-NodeRow .slurmlab-Gpu')]"
            ".map(c => [c.dataset.gpu, c.querySelector('.slurmlab-GpuIndex')?.textContent])"
        )
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
        line_height = page.evaluate(
            "() => parseFloat(getComputedStyle(document.querySelector("
            "'#slurmlab-sidebar .slurmlab-JobName')).fontSize) * 1.6"
        )
        assert name.bounding_box()["height"] <= line_height
        # the pending job says why in words, for how long, and when Slurm expects it to start
        pending = page.locator(f'#slurmlab-sidebar tr.slurmlab-PendingRow[data-job-id="{waiting}"]')
        pending.wait_for(timeout=(SIDEBAR_REFRESH_S + 5) * 1000)
        # Slurm gives a reason at its scheduler's next pass after the submit
        page.wait_for_function(
            "job => (document.querySelector(`#slurmlab-sidebar tr.slurmlab-PendingRow[data-job-id='${job}'] "
            ".slurmlab-Reason`) || {}).textContent?.includes('waiting for resources')",
            arg=waiting,
            timeout=(SIDEBAR_REFRESH_S + 35) * 1000,
        )
        text = pending.inner_text()
        assert "waiting for resources" in text and "pending for" in text, text
        assert pending.locator(".slurmlab-Reason").get_attribute("title") == "Slurm's reason: Resources"
        assert pending.locator(".slurmlab-ExpectedStart").count() == 1
        page.screenshot(path=str(SHOTS / "sidebar-twelve-jobs-legend.png"))
    finally:
        for job in [*jobs, waiting]:
            slurm_sandbox.runner().run(["scancel", job], check=False)


def _large_nodes_answer(nodes: int = 1000, per_node: int = 8, jobs: int = 3121) -> dict[str, Any]:
    """A nodes answer of a real cluster's size (the contract's shape): ``jobs`` GPUs held, one job each."""
    answer = []
    for n in range(nodes):
        gpus = []
        for i in range(per_node):
            k = n * per_node + i
            held = [str(100000 + k)] if k < jobs else []
            gpus.append(
                {
                    "index": i,
                    "type": "h100",
                    "mig": False,
                    "jobs": held,
                    "shards_used": 0,
                    "shards_total": 0,
                    "whole": bool(held),
                }
            )
        answer.append(
            {
                "name": f"gpu{n:04d}",
                "state": "DRAINED" if n == nodes - 1 else "MIXED",
                "partitions": ["gpu"],
                "cpus": 112,
                "alloc_cpus": 8,
                "gres": f"gpu:h100:{per_node}",
                "reason": None,
                "gpus": gpus,
            }
        )
    return {"nodes": answer, "problems": []}


def test_a_large_cluster_is_drawn_on_a_canvas(page: Any, slurm_sandbox: Any) -> None:
    """8,000 GPUs: one canvas and a summary line instead of 8,000 DOM cells; hovering names a GPU."""
    import json

    body = json.dumps(_large_nodes_answer())
    page.route(
        "**/slurmlab/api/nodes*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    canvas = page.locator("#slurmlab-sidebar canvas.slurmlab-GpuCanvas")
    canvas.wait_for(timeout=SIDEBAR_REFRESH_S * 3 * 1000)
    assert canvas.get_attribute("data-gpus") == "8000" and canvas.get_attribute("data-used") == "3121"
    assert page.locator("#slurmlab-sidebar .slurmlab-NodeRow").count() == 0
    summary = page.locator("#slurmlab-sidebar .slurmlab-MapSummary").inner_text()
    assert "1000 nodes" in summary and "8000 GPUs" in summary and "1 node down or drained" in summary
    box = canvas.bounding_box()
    assert box is not None and box["height"] > 20
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    assert re.match(
        r"gpu0000 GPU 0 \(h100\) · another user's job 100000", canvas.get_attribute("title") or ""
    )
    page.screenshot(path=str(SHOTS / "sidebar-large-cluster.png"))


def _large_queue_answer(jobs: int = 10000) -> dict[str, Any]:
    """A queue answer of a real cluster's size (the contract's shape): every third job pending."""
    out = []
    for k in range(jobs):
        pending = k % 3 == 2
        out.append(
            {
                "job_id": str(200000 + k),
                "display_id": str(200000 + k),
                "name": f"train-{k}",
                "user": "someone",
                "mine": False,
                "state": "PENDING" if pending else "RUNNING",
                "reason": "Resources" if pending else None,
                "reason_words": "waiting for GPUs to free up" if pending else None,
                "reason_hint": None,
                "partition": "gpu",
                "nodes": None if pending else f"gpu{k % 1000:04d}",
                "time_limit_s": 3600,
                "submit_time": None,
                "start_time": None,
                "expected_start": None,
                "ends_at": None,
                "gpus": [],
                "gres": "gres/gpu:1",
            }
        )
    return {"scope": "all", "user": "someone", "jobs": out, "problems": []}


def test_a_large_queue_keeps_only_the_rows_in_view_in_the_dom(page: Any, slurm_sandbox: Any) -> None:
    """10,000 jobs: the table is virtualised (a few dozen rows built), and scrolling to the end shows the last."""
    import json

    body = json.dumps(_large_queue_answer())
    page.route(
        "**/slurmlab/api/queue*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    try:
        box = page.locator('#slurmlab-sidebar .slurmlab-JobTableBox[data-virtual="true"]')
        box.wait_for(timeout=SIDEBAR_REFRESH_S * 3 * 1000)
        assert box.get_attribute("data-jobs") == "10000"
        rows = page.locator("#slurmlab-sidebar tr.slurmlab-Job")
        assert 0 < rows.count() < 200
        assert page.locator('#slurmlab-sidebar tr.slurmlab-Job[data-job-id="200000"]').count() == 1
        box.evaluate("node => { node.scrollTop = node.scrollHeight; }")
        last = page.locator('#slurmlab-sidebar tr.slurmlab-Job[data-job-id="209999"]')
        last.wait_for(timeout=5000)
        assert 0 < rows.count() < 200
        assert page.locator('#slurmlab-sidebar tr.slurmlab-Job[data-job-id="200000"]').count() == 0
        page.screenshot(path=str(SHOTS / "sidebar-large-queue.png"))
    finally:
        page.unroute("**/slurmlab/api/queue*")
