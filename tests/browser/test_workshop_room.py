"""A room of three and its teacher, in Debian's headless chromium on a real workshop (issue 31, "Done when").

``slurmlab workshop up --seats 3`` (gpu cap 1, the form locked to a server without GPUs); three students log in at
once (three browser contexts), each spawns a server and runs lesson 00's first code cells (``%load_ext slurmlab``,
``%slurm sandbox up --if-needed``, ``%sinfo``, copied from the student's own lesson) and takes one GPU with
``%salloc``; the teacher's page at ``/services/workshop/`` shows the three, their servers and their jobs; one
student asks for a second GPU beyond the cap and sees why it waits in words in their notebook, and the teacher's
page shows that student stuck on the cap; another runs a cell that raises (nothing saved) and the teacher's page shows
them stuck with the error of their last cell. A student is refused the teacher's page. Then ``reset`` (no job, no
server left on the page) and ``down`` (the page is gone, no seat in ``/etc/passwd``, no view process).

Marked ``serial``: it adds and removes Unix accounts. Screenshots: build/screenshots/room-*.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from labserver import chromium_browser, require_browser
from notebook_driver import NotebookPage, write_notebook

from slurmlab.cli import main
from slurmlab.testing.sandbox_fixtures import accounting_missing_reason

pytestmark = [
    pytest.mark.browser,
    pytest.mark.sandbox,
    pytest.mark.serial,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="a workshop creates Unix accounts: it needs root"),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="needs runuser (util-linux)"),
    pytest.mark.skipif(
        find_spec("jupyterhub") is None or find_spec("batchspawner") is None,
        reason="pip install 'slurmlab[hub]' (make setup installs it)",
    ),
]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
SEATS = ("student01", "student02", "student03")
OVER = "student03"  # the one who goes over the cap
FAILING = "student02"  # the one whose last cell raises
# in the lessons folder, where the teacher's view looks for each seat's newest notebook
NOTEBOOK = "lessons/room.ipynb"
RAISES = 'raise RuntimeError("the data is not there <yet>")'
TRACEBACK = "Traceback (most recent call last)"
# how often the teacher's page asks Slurm: the shortest a teacher may choose (the default 15 s made this test wait
# 40 s for the view to ask again, measured)
VIEW_EVERY = 5
CAP_WORDS = "your jobs already use the most GPUs (GRES) your QOS allows per user"


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"room-{name}.png"), full_page=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _view_pids(folder: Path) -> list[int]:
    """The teacher's view of the workshop in ``folder`` (another workshop's, a benchmark's, is not this one)."""
    from slurmlab.sandbox import processes

    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            argv = processes.cmdline(int(entry.name))
            if "slurmlab.workshop.view" in argv and str(folder) in argv:
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def room() -> Iterator[dict[str, Any]]:
    missing = accounting_missing_reason()
    if missing:
        pytest.skip(missing)
    from slurmlab.errors import SlurmlabError
    from slurmlab.hub.control import find_proxy

    try:
        find_proxy()
    except SlurmlabError as exc:
        pytest.skip(str(exc))
    require_browser()
    taken = [n for n in SEATS if _user_exists(n)]
    if taken:
        pytest.skip(f"users {taken} exist on this machine: the workshop refuses to take them over")
    base = Path(tempfile.mkdtemp(prefix="slurmlab-room-test-", dir="/tmp"))
    base.chmod(0o755)  # the students must reach their homes inside
    folder = base / "class"
    try:
        settings = base / "form.json"
        # servers without GPUs: each student's one GPU (the cap) is the one their notebook asks for
        settings.write_text(json.dumps({"ngpus": {"value": 0, "locked": True}, "runtime": {"value": "15"}}))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(
                ["workshop", "up", "--seats", "3", "--profile", "seed", "--gpu-cap", "1",
                 "--settings", str(settings), "--dir", str(folder), "--view-every", str(VIEW_EVERY)]
            )  # fmt: skip
        printed = out.getvalue()
        assert code == 0, printed
        shared = re.search(r"^  every seat \(.*\): (\S+)$", printed, re.M)
        teacher = re.search(r"^  log in there as teacher: (\S+)$", printed, re.M)
        view = re.search(r"^the teacher's view of the room: (\S+)$", printed, re.M)
        assert shared and teacher and view, printed
        from slurmlab.workshop import Workshop

        yield {
            "shop": Workshop.find(folder),
            "folder": folder,
            "password": shared.group(1),
            "teacher": teacher.group(1),
            "view": view.group(1),
        }
    finally:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(Exception, SystemExit):
            main(["workshop", "down", "--dir", str(folder)])
        shutil.rmtree(base, ignore_errors=True)


def _lesson00_first_cells(home: Path) -> list[str]:
    """The code cells of the student's own copy of lesson 00 before its first ``%salloc`` (at most 3: loading
    slurmlab, finding the class's Slurm, looking at it): the rest asks for GPUs, which the test does itself."""
    lesson = json.loads((home / "lessons" / "00-quickstart.ipynb").read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in lesson["cells"] if c["cell_type"] == "code"]
    first = []
    for cell in code[:3]:
        if "%salloc" in cell:
            break
        first.append(cell)
    assert first[:1] == ["%load_ext slurmlab"], first
    return first


def _write_notebooks(shop: Any) -> int:
    """Each seat's notebook: lesson 00's first cells, one GPU, then a second beyond the cap (run by one only).
    The index of the first ``%salloc`` cell."""
    first: list[str] = []
    for name in SEATS:
        home = shop.home(name)
        first = _lesson00_first_cells(home)
        cells = [
            *first,
            'a = %salloc --gpus=1 -t 10\na.wait("RUNNING", timeout=120)\nprint("granted", a.job_id)',
            "b = %salloc --new --gpus=1 -t 10\nb",  # a second GPU: beyond the seat's cap of 1
            RAISES,  # run by one only: an error in their last cell
        ]
        path = home / NOTEBOOK
        write_notebook(path, cells)
        entry = pwd.getpwnam(name)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return len(first)


def _log_in(page: Any, url: str, name: str, password: str) -> None:
    page.goto(f"{url}/hub/login", timeout=60_000)
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r"/hub/(spawn|home)|/user/"), timeout=60_000)


def _row(page: Any, seat: str) -> Any:
    return page.locator(f'tr.seat[data-seat="{seat}"]')


def _reload_until(
    page: Any, url: str, ok: Any, timeout: float = 75.0, before: Callable[[], None] | None = None
) -> None:
    """Reload the teacher's page until ``ok(page)``; it asks Slurm at most once every VIEW_EVERY s. ``before``
    runs before each load."""
    deadline = time.monotonic() + timeout
    while True:
        if before is not None:
            before()
        page.goto(url, timeout=60_000)
        if ok(page):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the teacher's page never showed it: {page.locator('body').inner_text()}")
        time.sleep(3)


def _output_until(nb: NotebookPage, index: int, needle: str, timeout: float = 90.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        shown = nb.output_text(index)
        if needle in shown or time.monotonic() > deadline:
            return shown
        time.sleep(1)


def _over_the_cap(nb: NotebookPage, cell: int) -> str:
    """A second ``%salloc`` of one GPU: the allocation's panel says why it waits, in words."""
    nb.wait(cell, nb.start(cell), timeout=90)
    return _output_until(nb, cell, "QOSMaxGRESPerUser")


def _students_at_work(
    browser: Any, url: str, password: str, cells: int
) -> tuple[dict[str, Any], dict[str, NotebookPage]]:
    """The three log in and ask for their servers at once, then run lesson 00's first cells and take one GPU each
    (every kernel at once); their pages and notebooks."""
    pages = {n: browser.new_context(viewport={"width": 1400, "height": 900}).new_page() for n in SEATS}
    for name, page in pages.items():
        _log_in(page, url, name, password)
        page.goto(f"{url}/hub/spawn", timeout=60_000)
        page.locator("#spawn_form [type=submit]").click()
    for name, page in pages.items():
        page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=180_000)
    notebooks = {n: NotebookPage(p, f"{url}/user/{n}", "", NOTEBOOK) for n, p in pages.items()}
    for cell in range(cells):
        started = {n: nb.start(cell) for n, nb in notebooks.items()}
        for name, nb in notebooks.items():
            shown = nb.wait(cell, started[name], timeout=150)
            assert TRACEBACK not in shown, f"{name}, cell {cell}: {shown}"
    return pages, notebooks


def _stuck_on_an_error(shop: Any, teacher: Any, view: str, nb: NotebookPage, cell: int) -> None:
    """A student's last cell raises: the teacher sees them stuck on it at the view's next look, with nothing
    saved (the kernel's word on the cell, not JupyterLab's autosave two minutes later)."""
    shown = nb.run(cell, timeout=60)
    assert "the data is not there" in shown, shown

    def failing_stuck(p: Any) -> bool:
        return "stuck" in (_row(p, FAILING).get_attribute("class") or "")

    _reload_until(teacher, view, failing_stuck)
    why = _row(teacher, FAILING).locator(".stuck-why")
    assert "room.ipynb: RuntimeError: the data is not there <yet>" in why.inner_text(), why.inner_text()
    assert "&lt;yet&gt;" in why.inner_html()  # the student's words, escaped
    _shot(teacher, "4b-teacher-stuck-on-an-error")


def test_three_students_and_their_teacher(room: dict[str, Any]) -> None:
    shop, url, view = room["shop"], room["shop"].hub().url, room["view"]
    assert view == f"{url}/services/workshop/"
    salloc = _write_notebooks(shop)
    with chromium_browser() as browser:
        pages, notebooks = _students_at_work(browser, url, room["password"], salloc + 1)
        granted = {n: re.search(r"granted (\d+)", nb.output_text(salloc)) for n, nb in notebooks.items()}
        assert all(granted.values()), {n: nb.output_text(salloc) for n, nb in notebooks.items()}
        _shot(pages[OVER], "1-student-lesson00")

        # a student is refused the teacher's page (JupyterHub's OAuth, then the view's own check)
        answer = pages[SEATS[0]].goto(view, timeout=60_000)
        assert answer is not None and answer.status == 403, answer and answer.status

        teacher = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        _log_in(teacher, url, "teacher", room["teacher"])
        teacher.goto(view, timeout=60_000)
        assert teacher.url.rstrip("/") == view.rstrip("/"), teacher.url
        assert teacher.locator('meta[http-equiv="refresh"]').get_attribute("content") == str(VIEW_EVERY)

        def all_three_running(p: Any) -> bool:
            return all(
                _row(p, n).locator(".server").inner_text() == "running"
                and f'data-job-id="{granted[n].group(1)}"' in _row(p, n).inner_html()  # type: ignore[union-attr]
                and _row(p, n).locator(".gpus").inner_text() == "1 of 1"
                for n in SEATS
            )

        _reload_until(teacher, view, all_three_running)
        for name in SEATS:
            row = _row(teacher, name)
            assert "active" in row.locator(".activity").inner_text()
            server_job = str(shop.hub().user(name)["servers"][""]["state"]["job_id"])
            assert f'data-job-id="{server_job}"' in row.inner_html()
            assert "stuck" not in (row.get_attribute("class") or "")
        assert "the class holds 3 GPU(s)" in teacher.locator(".summary").inner_text()
        _shot(teacher, "2-teacher-three")

        # one student over the cap: the notebook says why in words, the teacher sees them stuck on the cap
        shown = _over_the_cap(notebooks[OVER], salloc + 1)
        assert CAP_WORDS in shown and "QOSMaxGRESPerUser" in shown, shown
        _shot(pages[OVER], "3-student-over-the-cap")

        def over_stuck(p: Any) -> bool:
            return "stuck" in (_row(p, OVER).get_attribute("class") or "")

        _reload_until(teacher, view, over_stuck)
        why = _row(teacher, OVER).locator(".stuck-why").inner_text()
        assert CAP_WORDS in why and "QOSMaxGRESPerUser" in why, why
        assert all("stuck" not in (_row(teacher, n).get_attribute("class") or "") for n in SEATS[:2])
        _shot(teacher, "4-teacher-stuck")
        _stuck_on_an_error(shop, teacher, view, notebooks[FAILING], salloc + 2)

        # reset: every server stopped and every job of the class cancelled, as the page says
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["workshop", "reset", "--dir", str(room["folder"])]) == 0

        def empty_room(p: Any) -> bool:
            return all(
                _row(p, n).locator(".server").inner_text() == "none"
                and _row(p, n).locator(".jobs").inner_text().strip() == "no job"
                for n in SEATS
            )

        _reload_until(teacher, view, empty_room)
        _shot(teacher, "5-teacher-after-reset")

    # down: the page is gone with the hub, no seat is left, nor the view's process
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["workshop", "down", "--dir", str(room["folder"])]) == 0
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(view, timeout=10)
    passwd = Path("/etc/passwd").read_text()
    assert not [n for n in SEATS if re.search(rf"^{n}:", passwd, re.M)]
    assert _view_pids(room["folder"]) == []
