"""Issue 13 against a real Slurm: the real magics through an IPython shell, as a notebook drives them.

Re-running an %salloc cell submits nothing (--replace does); the default allocation is the newest live one and
the "no allocation" message names the live ones; %slurm lists the jobs an earlier kernel of this notebook left,
and %slurm attach makes one the default.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

pytestmark = pytest.mark.sandbox

NOTEBOOK = "/home/someone/work/first-hour.ipynb"


class _Kernel:
    """The parent execute request ipykernel hands the shell, with the cellId JupyterLab puts in its metadata."""

    def __init__(self) -> None:
        self.cell, self.runs = "", 0

    def run(self, cell: str) -> None:
        self.cell, self.runs = cell, self.runs + 1

    def get_parent(self, channel: str = "shell") -> dict[str, Any]:
        return {"header": {"msg_id": f"run-{self.runs}"}, "metadata": {"cellId": self.cell}}


@pytest.fixture
def nb(slurm_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An IPython shell with slurmlab loaded, a fresh session, and a stand-in kernel saying which cell runs."""
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session
    from slurmlab.slurm.allocation.leftovers import NOTEBOOK_ENV

    monkeypatch.setenv(NOTEBOOK_ENV, NOTEBOOK)
    shell = get_ipython()
    shell.run_line_magic("load_ext", "slurmlab")
    kernel = _Kernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    old, session = Session.of(shell), Session(shell)
    try:
        yield shell
    finally:
        for alloc in session.allocations:
            try:
                alloc.cancel()
            except Exception:  # already ended
                pass
        old.install(shell)
        shell.run_line_magic("unload_ext", "slurmlab")


def _cell(nb: Any, cell: str, line: str) -> Any:
    nb.kernel.run(cell)
    return nb.run_line_magic("salloc", line)


def _tagged_live(sandbox: Any) -> list[str]:
    out = sandbox.runner().run(["squeue", "-h", "-t", "PD,R,CF", "-o", "%i %k"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if "slurmlab:" in line]


def _state(sandbox: Any, job_id: str) -> str:
    return (
        sandbox.runner()
        .run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], check=False)
        .stdout.strip()
    )


def _until(cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.2)
    return bool(cond())


def test_rerunning_a_cell_reuses_its_allocation_and_replace_swaps_it(
    nb: Any, slurm_sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _cell(nb, "cell-1", "--gpus=1 -t 5")
    first.wait("RUNNING", timeout=60)
    capsys.readouterr()
    again = _cell(nb, "cell-1", "--gpus=1 -t 5")
    err = capsys.readouterr().err
    assert again is first and _tagged_live(slurm_sandbox) == [first.job_id]
    assert f"allocation {first.job_id} (--gpus=1 -t 5) is still RUNNING" in err and "--replace" in err

    swapped = _cell(nb, "cell-1", "--gpus=1 -t 5 --replace")
    assert swapped is not first and swapped.job_id != first.job_id
    assert _until(lambda: _state(slurm_sandbox, first.job_id) in ("CANCELLED", "COMPLETING", ""), 20)
    assert _tagged_live(slurm_sandbox) == [swapped.job_id]


def test_the_default_is_the_newest_live_and_the_message_names_the_live_ones(
    nb: Any, slurm_sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    older = _cell(nb, "cell-a", "--gpus=1 -t 5")
    newer = _cell(
        nb, "cell-b", "--gpus=1 -t 5 --new"
    )  # the same request in another cell: --new for a second job
    older.wait("RUNNING", timeout=60)
    newer.wait("RUNNING", timeout=60)
    newer.cancel()
    newer.wait("ENDED", timeout=30)
    capsys.readouterr()
    nb.run_line_magic("srun", "printenv SLURM_JOB_ID")
    assert capsys.readouterr().out.split() == [str(older.job_id)]

    older.cancel()
    older.wait("ENDED", timeout=30)
    with pytest.raises(UsageError) as info:
        nb.run_line_magic("srun", "hostname")
    message = str(info.value)
    assert "no live allocation in this notebook" in message and "--jobid" in message
    with pytest.raises(UsageError, match=rf"allocation {newer.job_id} has ended \(CANCELLED\)"):
        nb.run_line_magic("srun", f"--jobid {newer.job_id} hostname")


def test_slurm_lists_what_an_earlier_kernel_of_this_notebook_left(
    nb: Any, slurm_sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.magics.session import get_session

    # an earlier kernel of this notebook: it allocated, then died without releasing (kept at exit, as after
    # a SIGKILL of kernel and guardian both)
    code = (
        "from slurmlab.slurm.allocation import Allocation\n"
        "a = Allocation.submit(['--gpus=1', '-t', '5'], release_at_exit=False)\n"
        "print(a.job_id)\n"
    )
    env = {**os.environ, **slurm_sandbox.env()}
    left = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()[-1]
    try:
        status = str(nb.run_line_magic("slurm", ""))
        assert "jobs left by earlier kernels of this notebook (1)" in status, status
        assert f"%slurm attach {left}" in status and f"%scancel {left}" in status
        row = next(line for line in status.splitlines() if line.split()[:1] == [left])
        assert row.split()[1] in ("PENDING", "RUNNING")

        alloc = nb.run_line_magic("slurm", f"attach {left}")
        assert get_session().default is alloc and alloc.job_id == left
        alloc.wait("RUNNING", timeout=60)
        capsys.readouterr()
        nb.run_line_magic("srun", "printenv SLURM_JOB_ID")
        assert capsys.readouterr().out.split() == [left]
        assert "jobs left by earlier kernels" not in str(nb.run_line_magic("slurm", ""))  # followed now
        nb.run_line_magic("scancel", left)
        assert _until(lambda: _state(slurm_sandbox, left) in ("CANCELLED", "COMPLETING", ""), 20)
    finally:
        slurm_sandbox.runner().run(["scancel", left], check=False)


# ---- a real kernel: JupyterLab's cellId, Ctrl-C and expected errors as one line ------------------------------
def _execute(kc: Any, code: str, cell: str, timeout: float = 90) -> str:
    """Run ``code`` as JupyterLab runs a cell (its id in the request's metadata); what it printed."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    msg = kc.session.msg("execute_request", content, metadata={"cellId": cell})
    kc.shell_channel.send(msg)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = kc.get_iopub_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        kind, body = reply["msg_type"], reply["content"]
        if kind == "stream":
            out.append(body["text"])
        elif kind == "error":
            out.append("\n".join(body["traceback"]))
        elif kind == "status" and body["execution_state"] == "idle":
            return "".join(out)
    raise AssertionError(f"no answer to {code!r}")


def test_a_real_kernel_knows_the_cell_and_shows_one_line_errors(slurm_sandbox: Any) -> None:
    jupyter_client = pytest.importorskip("jupyter_client")
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env={**os.environ, **slurm_sandbox.env(), "JPY_SESSION_NAME": NOTEBOOK})
    kc = km.client()
    kc.start_channels()
    jobs: list[str] = []
    try:
        kc.wait_for_ready(timeout=60)
        _execute(kc, "%load_ext slurmlab", "c0")
        cell = "x = %salloc --gpus=1 -t 5\nx.wait('RUNNING', timeout=60)\nprint('JOB', x.job_id)"
        first = _execute(kc, cell, "c1")
        job = first.split("JOB ")[-1].split()[0]
        jobs.append(job)
        again = _execute(kc, cell, "c1")  # the same cell re-run: no second job
        assert again.split("JOB ")[-1].split()[0] == job and "--replace" in again and "--new" in again, again
        # another cell with the same line: the live job again, said in one line (issue 28 point 7)
        same = _execute(kc, cell, "c2")
        assert same.split("JOB ")[-1].split()[0] == job and f"already holds job {job}" in same, same
        other = _execute(kc, cell.replace("%salloc ", "%salloc --new "), "c2")  # --new: a job of its own
        jobs.append(other.split("JOB ")[-1].split()[0])
        assert jobs[1] != job and sorted(_tagged_live(slurm_sandbox)) == sorted(jobs)

        # Ctrl-C in %srun: one line, the allocation lives on
        timer = threading.Timer(4.0, km.interrupt_kernel)  # once the step runs
        timer.start()
        stopped = _execute(kc, "%srun -n1 sleep 60", "c3")
        timer.join()
        assert "interrupted: step" in stopped and f"allocation {jobs[1]} is still running" in stopped, stopped
        assert "Traceback" not in stopped and "KeyboardInterrupt" not in stopped, stopped
        assert _state(slurm_sandbox, jobs[1]) == "RUNNING"

        # an expected error from a plain call: one line with the fix
        error = _execute(
            kc,
            "from slurmlab.errors import AllocationError\n"
            "raise AllocationError('allocation 5 has no MIG', hint='ask for a MIG slice')",
            "c4",
        )
        assert "AllocationError: allocation 5 has no MIG" in error and "ask for a MIG slice" in error, error
        assert "Traceback" not in error and "%slurm debug on" in error, error
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
        for j in jobs:
            slurm_sandbox.runner().run(["scancel", j], check=False)
