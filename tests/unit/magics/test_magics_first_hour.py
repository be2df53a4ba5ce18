"""Issue 13, the magics' part: re-run cells, requests without a GPU or a time limit, the default allocation is
the newest live one, jobs left by earlier kernels, and one-line errors instead of tracebacks.

Fast: recorded Slurm 22.05 output (FakeRunner) or stand-in allocations; the sandbox twin of the main paths is
tests/integration/notebook/test_first_hour_magics.py.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fake_slurm import JOB, SALLOC, job_in, pending_salloc
from IPython.core.error import UsageError

from slurmlab.core.slurm.models import Job
from slurmlab.testing import FakeRunner


def _submit(shell: Any, fake: FakeRunner, line: str) -> Any:
    job_in(fake, "pending")
    fake.on(SALLOC, reply=pending_salloc())
    return shell.run_line_magic("salloc", line)


# ---- 1: re-running an %salloc cell ------------------------------------------------------------------------
def test_rerunning_the_same_line_reuses_the_live_allocation_and_says_so(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _submit(shell, fake_runner, "--gpus=2 -t 10")
    capsys.readouterr()
    again = shell.run_line_magic("salloc", "--gpus=2 -t 10")
    err = capsys.readouterr().err
    assert again is first and len(fake_runner.called(SALLOC)) == 1
    warning = [line for line in err.splitlines() if line.startswith("warning: this cell's allocation")]
    assert len(warning) == 1, err
    assert f"allocation {first.job_id}" in warning[0] and "--gpus=2 -t 10" in warning[0]
    assert "--replace" in warning[0] and "--new" in warning[0]


def test_new_keeps_both_and_replace_cancels_the_old_one(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.magics.session import get_session

    first = _submit(shell, fake_runner, "--gpus=2 -t 10")
    second = _submit(shell, fake_runner, "--gpus=2 -t 10 --new")
    assert second is not first and len(fake_runner.called(SALLOC)) == 2
    assert "--new" not in fake_runner.called(SALLOC)[-1]  # our flag, never Slurm's
    assert get_session().default is second
    capsys.readouterr()
    scancels = len(fake_runner.called(["scancel", ...]))
    third = _submit(shell, fake_runner, "--gpus=2 -t 10 --replace")
    assert third is not second and len(fake_runner.called(SALLOC)) == 3
    assert len(fake_runner.called(["scancel", ...])) == scancels + 1
    assert f"cancelled this cell's allocation {second.job_id} (--replace)" in capsys.readouterr().err


def test_replace_and_new_together_are_refused(shell: Any, fake_runner: FakeRunner) -> None:
    with pytest.raises(UsageError, match="--replace .* --new .*give one"):
        shell.run_line_magic("salloc", "--gpus=1 -t 5 --replace --new")
    assert not fake_runner.called(SALLOC)


def test_the_cell_id_decides_what_a_rerun_is(
    shell: Any, fake_runner: FakeRunner, kernel: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel.run("cell-a", "run-1")
    a = _submit(shell, fake_runner, "--gpus=1 -t 5")
    # another cell with another line is a request of its own (the same line there reuses a: issue 28's
    # test_magics_which_allocation.py)
    kernel.run("cell-b", "run-2")
    b = _submit(shell, fake_runner, "--gpus=1 -t 6")
    assert b is not a and len(fake_runner.called(SALLOC)) == 2
    # cell a again, its line edited: still this cell's allocation, not a second job
    kernel.run("cell-a", "run-3")
    capsys.readouterr()
    again = shell.run_line_magic("salloc", "--gpus=2 -t 5")
    assert again is a and len(fake_runner.called(SALLOC)) == 2
    err = capsys.readouterr().err
    assert "--gpus=1 -t 5" in err and "'--gpus=2 -t 5' instead" in err
    # a second %salloc line in that same run of cell a asks for a job of its own
    c = _submit(shell, fake_runner, "--gpus=2 -t 5")
    assert c is not a and len(fake_runner.called(SALLOC)) == 3


def test_an_ended_allocation_is_not_reused(shell: Any, fake_runner: FakeRunner) -> None:
    first = _submit(shell, fake_runner, "--gpus=2 -t 10")
    job_in(fake_runner, "cancelled")
    fake_runner.release()
    first.wait("ENDED", timeout=10)
    second = _submit(shell, fake_runner, "--gpus=2 -t 10")
    assert second is not first and len(fake_runner.called(SALLOC)) == 2


# ---- 2: no GPU, no time limit --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("-t 5", "this request asks for no GPU"),
        ("", "this request asks for no GPU"),
        ("--gpus=0 -t 5", "--gpus=0 asks for no GPU"),
        ("--gres=gpu:0 -t 5", "--gres=gpu:0 asks for no GPU"),
    ],
)
def test_a_request_for_no_gpu_is_refused_before_submitting(
    shell: Any, fake_runner: FakeRunner, line: str, named: str
) -> None:
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("salloc", line)
    message = str(info.value)
    assert named in message and "--gpus=1" in message and "--no-gpu" in message and "GRES" in message
    assert not fake_runner.called(SALLOC)


def test_no_gpu_says_a_cpu_job_is_meant(shell: Any, fake_runner: FakeRunner) -> None:
    _submit(shell, fake_runner, "--no-gpu -n1 -t 5")
    salloc = fake_runner.called(SALLOC)
    assert len(salloc) == 1 and "--no-gpu" not in salloc[0]
    with pytest.raises(
        UsageError, match="--no-gpu says a CPU-only job is meant, but the request asks for GPUs"
    ):
        shell.run_line_magic("salloc", "--no-gpu --gpus=1 -t 5")


def test_a_dry_run_without_gpu_warns_instead(shell: Any, fake_runner: FakeRunner) -> None:
    dry = shell.run_line_magic("salloc", "--dry-run -t 5")
    assert any("asks for no GPU" in w for w in dry.warnings)
    assert not fake_runner.called(SALLOC)


def test_no_time_limit_says_which_limit_the_job_gets(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.slurm import queries

    _submit(shell, fake_runner, "--gpus=1")
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: no time limit")]
    assert len(notes) == 1 and "-t 30" in notes[0]
    part = next(p for p in queries.list_partitions(fake_runner) if p.default)
    assert f"partition {part.name}" in notes[0]
    assert ("no limit" in notes[0]) == (part.max_time is None and part.default_time is None)


def test_time_limit_note_names_default_time_then_max_time() -> None:
    from slurmlab.core.request.request import parse_request
    from slurmlab.core.slurm.models import Partition
    from slurmlab.magics.salloc_checks import partition_for, time_limit_note

    parts = [
        Partition("short", "n1", default=True, max_time=7200, default_time=1800),
        Partition("long", "n1", max_time=86400),
    ]
    bare = parse_request(["--gpus=1"])
    assert "DefaultTime, 00:30:00" in (time_limit_note(bare, partition_for(bare, parts, None)) or "")
    long = parse_request(["--gpus=1", "-p", "long"])
    assert "MaxTime, 1-00:00:00" in (time_limit_note(long, partition_for(long, parts, None)) or "")
    assert "unknown" in (time_limit_note(bare, None) or "")
    assert time_limit_note(parse_request(["--gpus=1", "-t", "5"]), parts[0]) is None
    # -t 0 and -t UNLIMITED are Slurm's "no limit", more than a MaxTime: Slurm does not shorten them to it, the job
    # waits with PartitionTimeLimit (tests/integration/slurm/test_time_limit_note_true.py shows it on the sandbox)
    for spelled in ("0", "UNLIMITED"):
        note = time_limit_note(parse_request(["--gpus=1", "-t", spelled]), parts[0]) or ""
        assert note.startswith("note: --time=") and "more than partition short's MaxTime (02:00:00)" in note
        assert "PartitionTimeLimit" in note and "never starts" in note and "gets" not in note, note
    # a partition without MaxTime: no limit at all
    note = time_limit_note(parse_request(["--gpus=1", "-t", "UNLIMITED"]), Partition("any", "n1")) or ""
    assert "no limit in partition any" in note, note


# ---- 3: the default allocation is the newest live one ----------------------------------------------------
@pytest.fixture
def no_other_jobs(fake_runner: FakeRunner) -> FakeRunner:
    fake_runner.on(["squeue", "-h", "--me", ...], stdout="")
    return fake_runner


def test_the_default_is_the_newest_running_then_the_newest_live_allocation(
    ip: Any, no_other_jobs: FakeRunner, stand_in: Any
) -> None:
    from slurmlab.magics.kernel import resolve_allocation
    from slurmlab.magics.session import get_session

    session = get_session()
    older, newer = stand_in("4", "RUNNING"), stand_in("5", "PENDING")
    session.remember(older)  # type: ignore[arg-type]
    session.remember(newer)  # type: ignore[arg-type]
    assert resolve_allocation(None) is older  # a step there runs now; job 5 is named (issue 28 point 2)
    older.state = "PENDING"
    assert resolve_allocation(None) is newer  # none runs: the newest pending one
    older.state, newer.state = "RUNNING", "RUNNING"
    assert resolve_allocation(None) is newer
    newer.state = "TIMEOUT"
    assert resolve_allocation(None) is older
    older.state = "CANCELLED"
    with pytest.raises(UsageError) as info:
        resolve_allocation(None)
    message = str(info.value)
    assert "no live allocation in this notebook" in message and "5, has ended: TIMEOUT" in message
    assert "--jobid" in message and "%salloc --gpus=1" in message


def test_the_no_allocation_message_lists_the_users_live_jobs(
    ip: Any, fake_runner: FakeRunner, stand_in: Any
) -> None:
    from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT
    from slurmlab.magics.kernel import resolve_allocation
    from slurmlab.magics.session import get_session

    # two live jobs of this user in Slurm, in squeue's brief text; this notebook's only allocation ended
    fake_runner.replay("22.05/l06_squeue_brief_running.txt")
    brief = fake_runner.run(["squeue", "-h", "-t", "all", "-j", JOB, "-o", BRIEF_FORMAT]).stdout
    fake_runner.on(["squeue", "-h", "--me", ...], stdout=brief)
    get_session().remember(stand_in("77", "TIMEOUT"))  # type: ignore[arg-type]
    with pytest.raises(UsageError) as info:
        resolve_allocation(None)
    message = str(info.value)
    assert f"live allocations: {JOB} (RUNNING)" in message and f"--jobid {JOB}" in message


def test_an_ended_jobid_is_named_with_the_live_ones(
    ip: Any, no_other_jobs: FakeRunner, stand_in: Any
) -> None:
    from slurmlab.magics.kernel import resolve_allocation
    from slurmlab.magics.session import get_session

    session = get_session()
    session.remember(stand_in("4", "RUNNING"))  # type: ignore[arg-type]
    session.remember(stand_in("5", "TIMEOUT"))  # type: ignore[arg-type]
    with pytest.raises(UsageError) as info:
        resolve_allocation("5")
    assert "allocation 5 has ended (TIMEOUT)" in str(info.value)
    assert "live allocations: 4 (RUNNING): use one with --jobid 4" in str(info.value)


def test_experiment_magics_name_the_live_ones_too(ip: Any, no_other_jobs: FakeRunner, stand_in: Any) -> None:
    from slurmlab.magics.experiments import _running

    alloc = stand_in("5", "TIMEOUT")
    with pytest.raises(UsageError, match=r"allocation 5 has ended \(TIMEOUT\).*--jobid"):
        _running(alloc)  # type: ignore[arg-type]


def test_gpu_timeslice_after_every_allocation_ended_names_them(
    xip: Any, no_other_jobs: FakeRunner, stand_in: Any
) -> None:
    from slurmlab.magics.session import get_session

    get_session().remember(stand_in("5", "TIMEOUT"))  # type: ignore[arg-type]
    with pytest.raises(
        UsageError, match=r"no live allocation in this notebook \(the latest, 5, has ended: TIMEOUT\)"
    ):
        xip.run_line_magic("gpu_timeslice", "--backend cpu")


def test_slurm_attach_makes_the_job_the_default(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.magics.session import get_session

    job_in(fake_runner, "running")
    alloc = shell.run_line_magic("slurm", f"attach {JOB}")
    assert alloc.job_id == JOB and get_session().default is alloc
    assert f"attached to job {JOB}" in capsys.readouterr().out
    with pytest.raises(UsageError, match="give one job id: %slurm attach 42"):
        shell.run_line_magic("slurm", "attach")


# ---- 4: jobs left by earlier kernels of this notebook ------------------------------------------------------
def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def _job(job_id: int, comment: str, state: str = "RUNNING") -> Job:
    start = datetime.now(timezone.utc) - timedelta(minutes=12)
    return Job(
        job_id,
        f"slurmlab-{job_id}",
        state,
        nodelist="node1",
        nodes=("node1",),
        start_time=start,
        comment=comment,
    )


def test_the_tag_names_the_notebook_and_old_tags_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.slurm.allocation.leftovers import NOTEBOOK_ENV, make_tag, notebook_key, parse_tag

    monkeypatch.setenv(NOTEBOOK_ENV, "/home/u/work/01-first-allocation.ipynb")
    tag = make_tag()
    info = parse_tag(tag)
    assert info is not None and info.pid == os.getpid() and info.host == socket.gethostname()
    assert info.notebook == notebook_key() and info.notebook and "ipynb" not in tag
    assert notebook_key("/other.ipynb") != info.notebook
    old = parse_tag("slurmlab:host1:123:abcdef12")
    assert old is not None and old.pid == 123 and old.notebook is None
    assert parse_tag("mine:host:1:2") is None and parse_tag("slurmlab:a:b:c:d:e") is None


def _listed(monkeypatch: pytest.MonkeyPatch, jobs: list[Job]) -> None:
    """Slurm lists ``jobs`` as this user's: the cheap tag listing, then each one's detail."""
    from slurmlab.errors import JobNotFoundError
    from slurmlab.slurm import queries
    from slurmlab.slurm.allocation import leftovers as lo

    by_id = {str(j.job_id): j for j in jobs}
    monkeypatch.setattr(lo, "tagged_jobs", lambda runner=None: [(str(j.job_id), j.comment) for j in jobs])

    def detail(job_id: str, runner: Any = None) -> Job:
        if job_id not in by_id:
            raise JobNotFoundError(f"job {job_id} is not known")
        return by_id[job_id]

    monkeypatch.setattr(queries, "job_detail", detail)


def test_find_leftovers_keeps_this_notebooks_dead_kernels_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.slurm.allocation import leftovers as lo

    host, dead, here = socket.gethostname(), _dead_pid(), notebook_key_for(monkeypatch, "/nb/a.ipynb")
    _listed(
        monkeypatch,
        [
            _job(1, f"slurmlab:{host}:{dead}:{here}:aaaa1111"),  # this notebook, kernel gone: listed
            _job(2, f"slurmlab:{host}:{os.getpid()}:{here}:bbbb2222"),  # this notebook, kernel alive
            _job(3, f"slurmlab:{host}:{dead}:0123456789:cccc3333"),  # another notebook
            _job(4, f"slurmlab:{host}:{dead}:dddd4444"),  # an old tag: notebook unknown, listed
        ],
    )
    assert [j.job_id for j in lo.find_leftovers(notebook=here)] == [1, 4]
    assert [j.job_id for j in lo.find_leftovers(notebook=here, exclude=["1"])] == [4]
    assert [j.job_id for j in lo.find_leftovers()] == [1, 3, 4]
    assert [j.job_id for j in lo.find_leftovers(include_alive=True)] == [1, 2, 3, 4]


def test_a_zombie_kernel_counts_as_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that exited but was not reaped yet (state Z in /proc) left its jobs: they are listed."""
    import subprocess

    from slurmlab.slurm.allocation import leftovers as lo

    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits at once; not reaped until wait()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stat = Path(f"/proc/{zombie.pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.02)
        else:
            pytest.fail("the child did not exit")
        host = socket.gethostname()
        _listed(
            monkeypatch,
            [
                _job(1, f"slurmlab:{host}:{zombie.pid}:aaaa1111"),  # kernel a zombie: gone
                _job(2, f"slurmlab:{host}:{os.getpid()}:bbbb2222"),  # this process: alive
            ],
        )
        assert [j.job_id for j in lo.find_leftovers()] == [1]
    finally:
        zombie.wait()


def test_the_tag_listing_is_one_cheap_squeue(fake_runner: FakeRunner) -> None:
    from slurmlab.slurm.allocation.leftovers import tagged_jobs

    fake_runner.on(
        ["squeue", "-h", "--me", ...],
        stdout="12 slurmlab:h:1:nb:aaaa1111\n13 my own comment\n14 \n15 slurmlab:h:2:bbbb2222\n",
    )
    assert tagged_jobs() == [("12", "slurmlab:h:1:nb:aaaa1111"), ("15", "slurmlab:h:2:bbbb2222")]
    argv = fake_runner.called(["squeue", ...])[0]
    assert "--me" in argv and argv[-1] == "%i %k"  # the comment last: its spaces cannot shift the id


def notebook_key_for(monkeypatch: pytest.MonkeyPatch, path: str) -> str:
    from slurmlab.slurm.allocation.leftovers import NOTEBOOK_ENV, notebook_key

    monkeypatch.setenv(NOTEBOOK_ENV, path)
    return notebook_key()


def test_leftovers_show_as_a_short_table() -> None:
    from slurmlab.slurm.allocation.leftovers import Leftovers

    left = Leftovers([_job(41, "slurmlab:h:1:x:y"), _job(42, "slurmlab:h:1:x:z", "PENDING")])
    text = repr(left)
    lines = text.splitlines()
    assert lines[0].split() == ["JOB", "STATE", "NODES", "GPUS", "AGE"]
    assert lines[1].split()[:3] == ["41", "RUNNING", "node1"] and lines[1].split()[-1].startswith("00:1")
    assert "%slurm attach 41" in text and "%scancel 41" in text and len(text) < 400
    html = left._repr_html_()
    assert "slurmlab-leftovers" in html and "<td>42</td>" in html and len(html) < 1200
    assert repr(Leftovers()) == "no jobs left by earlier kernels"


def test_slurm_status_lists_the_leftovers_with_attach_and_cancel(
    shell: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:

    here = notebook_key_for(monkeypatch, "/nb/crashed.ipynb")
    left = _job(77, f"slurmlab:{socket.gethostname()}:{_dead_pid()}:{here}:eeee5555")
    _listed(monkeypatch, [left])
    status = shell.run_line_magic("slurm", "")
    text = str(status)
    assert "jobs left by earlier kernels of this notebook (1)" in text
    assert "%slurm attach 77" in text and "%scancel 77" in text
    assert status.leftovers is not None and [j.job_id for j in status.leftovers] == [77]


def test_leftover_buttons_attach_and_cancel(shell: Any, fake_runner: FakeRunner) -> None:
    pytest.importorskip("ipywidgets")
    from slurmlab.magics.leftover_buttons import leftover_buttons
    from slurmlab.magics.session import get_session
    from slurmlab.slurm.allocation.leftovers import Leftovers

    job_in(fake_runner, "running")
    box = leftover_buttons(Leftovers([_job(int(JOB), "slurmlab:h:1:x:y")]))
    row, said = box.children
    attach, cancel = row.children[1:]
    attach.click()
    assert get_session().default is not None and get_session().default.job_id == JOB
    assert f"attached to job {JOB}" in said.value
    cancel.click()
    assert fake_runner.called(["scancel", JOB]) and f"cancelled job {JOB}" in said.value


# ---- 5: Ctrl-C and expected errors: one line, never a traceback -----------------------------------------------
def test_ctrl_c_in_srun_is_one_line(
    shell: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.slurm.allocation import Allocation

    job_in(fake_runner, "running")
    shell.run_line_magic("salloc", f"--attach {JOB}").wait(timeout=5)

    def interrupted(self: Any, *_a: Any, **_k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Allocation, "srun", interrupted)
    capsys.readouterr()
    result = shell.run_cell("%srun -n1 sleep 60")
    out = capsys.readouterr()
    shown = out.out + out.err
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert f"interrupted: step (sleep 60) ended; allocation {JOB} is still running" in shown
    assert "Traceback" not in shown and len(shown.strip().splitlines()) == 1, shown


def test_ctrl_c_in_an_experiment_is_one_line(ip: Any, stand_in: Any) -> None:
    from slurmlab.magics.error_display import StepInterrupted
    from slurmlab.magics.experiments import _interrupted

    with (
        pytest.raises(StepInterrupted) as info,
        _interrupted("the isolation check", stand_in("9", "RUNNING")),
    ):
        raise KeyboardInterrupt
    assert str(info.value) == "interrupted: the isolation check ended; allocation 9 is still running"


def test_a_slurmlab_error_from_a_plain_call_is_one_line(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell(
        "from slurmlab.errors import AllocationError\n"
        "def deep():\n    raise AllocationError('allocation 5 has no MIG', hint='ask for a MIG slice')\n"
        "deep()"
    )
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "AllocationError: allocation 5 has no MIG" in shown and "ask for a MIG slice" in shown
    assert "%slurm debug on" in shown and shown.count("%slurm debug on") == 1
    assert "Traceback" not in shown and "deep()" not in shown

    shell.run_line_magic("slurm", "debug on")
    try:
        shell.run_cell("deep()")
        out = capsys.readouterr()
        assert "deep()" in out.out + out.err  # the full traceback is back
    finally:
        shell.run_line_magic("slurm", "debug off")


def test_the_handler_goes_with_the_extension(ip: Any) -> None:
    from slurmlab.errors import SlurmlabError

    assert SlurmlabError in ip.custom_exceptions
    ip.run_line_magic("unload_ext", "slurmlab.magics")
    try:
        assert SlurmlabError not in ip.custom_exceptions
    finally:
        ip.run_line_magic("load_ext", "slurmlab.magics")
    assert ip.custom_exceptions.count(SlurmlabError) == 1


def test_another_extensions_handler_still_runs(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []

    class Theirs(Exception):
        pass

    ip.run_line_magic("unload_ext", "slurmlab.magics")
    ip.set_custom_exc((Theirs,), lambda shell, etype, value, tb, tb_offset=None: seen.append(str(value)))
    try:
        ip.run_line_magic("load_ext", "slurmlab.magics")
        ip.user_ns["Theirs"] = Theirs
        ip.run_cell("raise Theirs('theirs')")
        assert seen == ["theirs"]
        ip.run_cell("from slurmlab.errors import SandboxError\nraise SandboxError('ours')")
        assert "SandboxError: ours" in capsys.readouterr().err and seen == ["theirs"]
        ip.run_line_magic("unload_ext", "slurmlab.magics")
        assert ip.custom_exceptions == (Theirs,)
    finally:
        ip.set_custom_exc((), None)
        ip.run_line_magic("load_ext", "slurmlab.magics")


# ---- 6: no Slurm: the sandbox picker under the message --------------------------------------------------------
def test_no_slurm_shows_the_picker_under_the_one_line(
    ip: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ipywidgets")
    from slurmlab.magics import error_display, sandbox
    from slurmlab.slurm.runner import Runner, set_runner

    made: list[Any] = []
    stand_in = types.ModuleType("slurmlab.widgets.sandbox_picker")

    class SandboxPicker:
        widget = "<picker>"

        def __init__(self, start: Any) -> None:
            made.append(start)

    stand_in.SandboxPicker = SandboxPicker  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "slurmlab.widgets.sandbox_picker", stand_in)
    shown: list[object] = []
    monkeypatch.setattr(error_display, "show", lambda obj, raw=False: shown.append(obj))
    old = set_runner(Runner(slurm_conf=str(tmp_path / "nowhere.conf")))
    try:
        ip.run_cell("%sinfo")
    finally:
        set_runner(old)
    err = capsys.readouterr().err
    assert err.startswith("UsageError: ") and "%slurm sandbox up" in err and "Traceback" not in err
    assert [type(s) for s in shown] == [SandboxPicker] and len(made) == 1

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(sandbox, "sandbox_command", lambda *a: calls.append(a) or "started")
    assert made[0]("h200-mig") == "started"
    assert calls == [(["up", "h200-mig"], None, None)]  # what %slurm sandbox up --profile h200-mig does


def test_slurm_status_with_no_slurm_offers_the_picker_too(
    ip: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.magics import error_display
    from slurmlab.slurm.runner import Runner, set_runner

    offered: list[bool] = []
    monkeypatch.setattr(error_display, "offer_sandbox", lambda start: offered.append(True))
    monkeypatch.setattr(error_display, "show", lambda obj, raw=False: None)
    old = set_runner(Runner(slurm_conf=str(tmp_path / "nowhere.conf")))
    try:
        status = ip.run_line_magic("slurm", "")
    finally:
        set_runner(old)
    assert status.no_slurm and "%slurm sandbox up" in str(status)
    status._ipython_display_()
    assert offered == [True]


def test_the_real_picker_starts_what_slurm_sandbox_up_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ipywidgets")
    from slurmlab.magics import error_display, sandbox

    shown: list[Any] = []
    monkeypatch.setattr(error_display, "show", lambda obj, raw=False: shown.append(obj))
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(sandbox, "sandbox_command", lambda *a: calls.append(a) or "sandbox dgx-h100 started")
    picker = error_display.offer_sandbox(sandbox.start_sandbox)
    # the picker itself is shown (its saved form with it), its widget returned
    assert [s.widget for s in shown] == [picker] and "slurmlab-sandbox-picker" in picker._dom_classes
    button = next(
        c for row in picker.children for c in getattr(row, "children", ()) if hasattr(c, "on_click")
    )
    button.click()
    deadline = time.monotonic() + 10
    while not calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls and calls[0][0][0] == "up" and calls[0][1:] == (None, None)
