"""`make demo` on a real Slurm (the sandbox): ``python -m slurmlab.demo`` builds a course from small notebooks of
this test's own (the real lessons are executed by their own tests), writes one HTML page per lesson and an
index, prints one line per lesson, and leaves nothing running: no kernel, no sandbox daemon, no job; a failing
lesson gives exit 1 and its page with the error; Ctrl-C stops the build cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slurmlab.sandbox.processes import alive
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(slurm_missing_reason() is not None, reason=slurm_missing_reason() or ""),
]

REPO = Path(__file__).resolve().parents[3]

SLURM_CELLS = [
    "%load_ext slurmlab",
    "%sinfo",
    "import os, subprocess\n"
    "print('nodes:', subprocess.run(['sinfo', '-h', '-o', '%D'], capture_output=True, text=True,"
    " timeout=30, check=True).stdout.strip(), 'via', os.environ['SLURM_CONF'])",
    "import sys\nprint('kernel python:', sys.executable)",
]
FIGURE_CELLS = ["import slurmlab\nslurmlab.topology(profile='dgx-h100')"]
BROKEN_CELLS = ["x = 1", "raise ValueError('lesson 01 broke on purpose')", "print('never printed')"]
SLEEPING_CELLS = [
    "import os, pathlib, time\npathlib.Path('sleeping.new').write_text('yes')\nos.replace('sleeping.new', 'sleeping')\n"
    "time.sleep(300)",
    "print('never printed')",
]
# a cell that swallows KeyboardInterrupt and started a process: both end, whatever the kernel does with Ctrl-C.
# 'sleeping' appears whole (written beside, then renamed): the test's Ctrl-C, sent once it exists, never lands
# between the file's creation and its write
DEAF_CELLS = [
    "import os, pathlib, subprocess, time\n"
    "child = subprocess.Popen(['sleep', '300'])\npathlib.Path('sleeping.new').write_text(str(child.pid))\n"
    "os.replace('sleeping.new', 'sleeping')\n"
    "for _ in range(300):\n    try:\n        time.sleep(1)\n    except KeyboardInterrupt:\n        pass"
]


def _notebook(folder: Path, name: str, title: str, cells: list[str]) -> None:
    nbformat = pytest.importorskip("nbformat")
    v4 = nbformat.v4
    nb = v4.new_notebook(cells=[v4.new_markdown_cell(f"# {title}"), *(v4.new_code_cell(c) for c in cells)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / f"{name}.ipynb"))


def _demo(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurmlab.demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def _left_running(*paths: Path) -> list[str]:
    """Processes that name one of ``paths`` on their command line or work in one of them (kernels do)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(str(p) in argv or cwd.startswith(str(p)) for p in paths):
            found.append(f"{proc.name}: {argv} (cwd {cwd})")
    return found


def _gone(pid: int | None) -> bool:
    return pid is None or not alive(pid)


def _record(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "course.json").read_text())
    return data


def test_demo_builds_the_course_runs_the_preflight_and_leaves_nothing(tmp_path: Path) -> None:
    lessons, out, folder = tmp_path / "lessons", tmp_path / "demo", tmp_path / "sb"
    _notebook(lessons, "00-on-slurm", "Slurm from a lesson", SLURM_CELLS)
    _notebook(lessons, "01-figure", "A topology figure", FIGURE_CELLS)
    proc = _demo("--dir", str(folder), "--notebooks", str(lessons), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out_text = proc.stdout
    # the preflight: a 2-node allocation with closest binding, one step, released
    assert "Granted" not in out_text and "granted: job" in out_text
    assert (
        len([line for line in out_text.splitlines() if "GRES=gpu:h100:" in line and "CPU_IDs=" in line]) == 2
    )
    rows = [line.split() for line in out_text.splitlines() if line.strip()[:1].isdigit() and "node" in line]
    assert sorted(int(r[0]) for r in rows) == [0, 1, 2, 3]
    assert len({(r[1], r[3]) for r in rows}) == 4, "tasks did not get distinct GPUs"
    # one line per lesson, then where the index is
    lines = out_text.splitlines()
    assert any(line.startswith("ok   00-on-slurm") and line.endswith(" 4 code cells") for line in lines), (
        out_text
    )
    assert any(line.startswith("ok   01-figure") and line.endswith(" 1 code cell") for line in lines), (
        out_text
    )
    assert f"open {out / 'index.html'}" in out_text
    assert "nothing left running" in out_text
    tail = out_text[out_text.index("next:") :]
    assert "slurmlab sandbox up" in tail and "sandbox env" in tail and "%slurm sandbox up" in tail
    assert "jupyter lab notebooks/" in tail
    # the pages: the lessons ran on the sandbox (its SLURM_CONF, its two nodes), the figure carries BokehJS
    page = (out / "00-on-slurm.html").read_text()
    assert f"nodes: 2 via {folder / 'slurm.conf'}" in page
    assert f"kernel python: {sys.executable}" in page, "the kernel is not the Python that runs the demo"
    figure = (out / "01-figure.html").read_text()
    assert "data-root-id" in figure and "Bokeh" in figure and "cdn.bokeh.org" not in figure
    index = (out / "index.html").read_text()
    assert "href='00-on-slurm.html'" in index and "href='01-figure.html'" in index
    assert "Slurm from a lesson" in index and "dgx-h100" in index
    record = _record(out)
    assert record["ok"] is True and [x["status"] for x in record["lessons"]] == ["ok", "ok"]
    assert record["slurm"].split(".")[0].isdigit()
    # nothing left: the sandbox's daemons, the kernels (by pid and by working folder)
    assert not (folder / "state.json").exists()
    assert all(_gone(x["kernel_pid"]) for x in record["lessons"])
    assert _left_running(folder, out) == []


def test_a_failing_lesson_gives_exit_1_and_its_page_with_the_error_and_the_others_still_run(
    tmp_path: Path,
) -> None:
    lessons, out, folder = tmp_path / "lessons", tmp_path / "demo", tmp_path / "sb"
    _notebook(lessons, "00-fine", "Fine", ["print('lesson 00 ran')"])
    _notebook(lessons, "01-broken", "Broken on purpose", BROKEN_CELLS)
    _notebook(lessons, "02-after", "After the broken one", ["print('lesson 02 ran')"])
    proc = _demo(
        "--dir",
        str(folder),
        "--notebooks",
        str(lessons),
        "--out",
        str(out),
        "--no-preflight",
        "--no-accounting",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "FAIL 01-broken cell 2: ValueError: lesson 01 broke on purpose" in lines
    assert any(line.startswith("ok   02-after") for line in lines), proc.stdout
    assert "course: 2 of 3 lessons ran without an error" in proc.stdout
    broken = (out / "01-broken.html").read_text()
    assert "lesson 01 broke on purpose" in broken and "never printed" in broken  # the source, not an output
    assert broken.count("never printed") == 1
    assert "lesson 02 ran" in (out / "02-after.html").read_text()
    record = _record(out)
    assert [x["status"] for x in record["lessons"]] == ["ok", "FAIL", "ok"] and record["ok"] is False
    assert record["lessons"][1]["failed_cell"] == 2
    assert not (folder / "state.json").exists() and _left_running(folder, out) == []


def test_a_typo_in_lessons_costs_no_sandbox(tmp_path: Path) -> None:
    lessons, folder = tmp_path / "lessons", tmp_path / "sb"
    _notebook(lessons, "00-fine", "Fine", ["1"])
    proc = _demo("--dir", str(folder), "--notebooks", str(lessons), "--lessons", "00,07", timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no lesson numbered 07" in proc.stderr and "00 (00-fine)" in proc.stderr
    assert not folder.exists()


def _interrupt_demo(
    lessons: Path, out: Path, folder: Path, again_after: float | None = None
) -> tuple[int, str, str]:
    """Start the demo, press Ctrl-C once the first lesson's cell wrote ``sleeping`` (and again ``again_after``
    seconds later, as an impatient user would); (exit, stdout, stderr)."""
    # Ctrl-C as a terminal sends it: SIGINT at its default, even where this test itself was started in the
    # background by a shell without job control (which starts its children with SIGINT ignored)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slurmlab.demo",
            "--dir",
            str(folder),
            "--notebooks",
            str(lessons),
            "--out",
            str(out),
            "--no-preflight",
            "--no-accounting",
        ],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 180
        while not (out / "work" / "sleeping").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the lesson never started"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        if again_after is not None:
            time.sleep(again_after)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stdout, stderr


def test_ctrl_c_stops_the_lesson_writes_the_index_and_brings_the_sandbox_down(tmp_path: Path) -> None:
    lessons, out, folder = tmp_path / "lessons", tmp_path / "demo", tmp_path / "sb"
    _notebook(lessons, "00-sleeps", "A long cell", SLEEPING_CELLS)
    _notebook(lessons, "01-later", "Never reached", ["print('no')"])
    code, stdout, stderr = _interrupt_demo(lessons, out, folder)
    assert code == 130, stdout + stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    assert any(line.startswith("STOP 00-sleeps cell 1: interrupted") for line in stdout.splitlines()), stdout
    assert "nothing left running" in stdout
    record = _record(out)
    assert [x["status"] for x in record["lessons"]] == ["interrupted", "not run"]
    assert (out / "00-sleeps.html").exists() and not (out / "01-later.html").exists()
    page = (out / "00-sleeps.html").read_text()
    assert page.count("never printed") == 1, "the next cell ran after Ctrl-C"
    # the demo interrupted the cell itself (not the kernel killed at exit): its page shows the interruption
    assert "KeyboardInterrupt" in page, "the running cell was never interrupted"
    assert _gone(record["lessons"][0]["kernel_pid"])
    assert not (folder / "state.json").exists() and _left_running(folder, out) == []


def test_ctrl_c_ends_a_cell_that_swallows_it_and_what_the_kernel_started(tmp_path: Path) -> None:
    lessons, out, folder = tmp_path / "lessons", tmp_path / "demo", tmp_path / "sb"
    _notebook(lessons, "00-deaf", "A cell that ignores Ctrl-C", DEAF_CELLS)
    # the first Ctrl-C says a second one kills the kernel now; the second does it, well before the grace ends
    code, stdout, stderr = _interrupt_demo(lessons, out, folder, again_after=2.0)
    assert code == 130, stdout + stderr
    assert "Ctrl-C again kills it now" in stderr and "Traceback" not in stderr, stderr
    assert "were killed (a second Ctrl-C)" in stderr, stderr
    assert any(line.startswith("STOP 00-deaf cell 1: interrupted") for line in stdout.splitlines()), stdout
    record = _record(out)
    assert record["lessons"][0]["status"] == "interrupted"
    child = int((out / "work" / "sleeping").read_text())
    assert _gone(record["lessons"][0]["kernel_pid"]) and _gone(child)
    assert not (folder / "state.json").exists() and _left_running(folder, out) == []
