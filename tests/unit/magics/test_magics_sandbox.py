"""Every magic driven through run_line_magic / run_cell_magic / run_cell against the real sandbox."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

pytestmark = pytest.mark.sandbox


class _TimedStream:
    """A stdout that remembers when each line was written (to see output arrive while a step runs)."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line:
                self.lines.append((time.monotonic(), line))
        return len(text)

    def flush(self) -> None:
        pass


def _texts(stream: _TimedStream) -> list[str]:
    return [t for _, t in stream.lines]


# ---- %salloc ------------------------------------------------------------------------------------------
def _job_ids(sandbox: Any) -> set[str]:
    return set(sandbox.runner().run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout.split())


def test_dry_run_shows_exact_command_and_plain_words_without_submitting(
    sandbox_ip: Any, slurm_sandbox: Any
) -> None:
    before = _job_ids(slurm_sandbox)
    dry = sandbox_ip.run_line_magic("salloc", "--dry-run -N1 --gpus-per-node=h100:2 -t 15 --gpu-bind=closest")
    assert dry.argv[:2] == ("salloc", "--no-shell")
    assert "--gpus-per-node=h100:2" in dry.argv and "--time=00:15:00" in dry.argv
    assert "2" in dry.explanation and "nearest" in dry.explanation
    assert "checked against the cluster" in dry.text()
    assert dry.command in dry._repr_html_().replace("&#x27;", "'")
    assert _job_ids(slurm_sandbox) == before


def test_dollar_var_expands_in_the_line_and_dollar_dollar_stays(sandbox_ip: Any) -> None:
    sandbox_ip.user_ns["ngpu"] = 3
    sandbox_ip.run_cell("_dry = %salloc --dry-run --gpus=$ngpu --comment=cost$$5")
    dry = sandbox_ip.user_ns["_dry"]
    assert "--gpus=3" in dry.argv
    assert "--comment=cost$5" in dry.argv


def test_unknown_gpu_type_is_a_short_message_with_the_fix(
    sandbox_ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    result = sandbox_ip.run_cell("%salloc --gpus=a100:1")
    out = capsys.readouterr()
    text = out.out + out.err
    assert isinstance(result.error_in_exec, UsageError)
    assert "a100" in text and "h100" in text  # what was wrong, and what the cluster has
    assert "Traceback" not in text


def test_malformed_line_is_a_short_message(sandbox_ip: Any) -> None:
    with pytest.raises(UsageError, match=r"--gpus=two.*not a GPU count") as info:
        sandbox_ip.run_line_magic("salloc", "--gpus=two -t 5")
    assert "\n" in str(info.value) and "--gpus=2" in str(info.value)  # the fix is on its own line


def test_salloc_rejects_a_command(sandbox_ip: Any) -> None:
    with pytest.raises(UsageError, match="takes no command"):
        sandbox_ip.run_line_magic("salloc", "--gpus=1 hostname")


def test_unknown_flag_passes_through_with_a_warning(sandbox_ip: Any) -> None:
    dry = sandbox_ip.run_line_magic("salloc", "--dry-run --gpus=1 --frobnicate=3")
    assert "--frobnicate=3" in dry.argv
    assert any("--frobnicate" in w for w in dry.warnings)


def test_salloc_returns_at_once_and_becomes_the_default(sandbox_ip: Any) -> None:
    from slurmlab.magics.session import get_session

    start = time.monotonic()
    alloc = sandbox_ip.run_line_magic("salloc", "--gpus=1 -t 5")
    assert time.monotonic() - start < 10
    assert alloc.job_id and get_session().default is alloc
    alloc.wait("RUNNING", timeout=30)
    assert sum(len(v) for v in alloc.gpus.values()) == 1
    second = sandbox_ip.run_line_magic(
        "salloc", "--gpus=1 -t 5 --new"
    )  # the same line again: --new keeps both
    assert second.job_id != alloc.job_id
    # the default is the newest *running* one: job 1 until the second has started
    second.wait("RUNNING", timeout=30)
    assert get_session().default is second


def test_pending_allocation_turns_running_when_the_blocker_is_cancelled(sandbox_ip: Any) -> None:
    from slurmlab.slurm import queries

    nodes = len(queries.list_nodes())
    blocker = sandbox_ip.run_line_magic("salloc", f"-N{nodes} --gpus-per-node=8 -t 5")
    blocker.wait("RUNNING", timeout=30)
    waiting = sandbox_ip.run_line_magic("salloc", "--gpus=1 -t 5")
    assert waiting.state in ("SUBMITTING", "PENDING")
    waiting.wait("PENDING", timeout=10)
    deadline = time.monotonic() + 10
    while not waiting.reason and time.monotonic() < deadline:
        time.sleep(0.2)
    assert waiting.reason in ("Resources", "Priority")
    sandbox_ip.run_line_magic("scancel", str(blocker.job_id))
    waiting.wait("RUNNING", timeout=20)


def test_attach_follows_an_existing_job(sandbox_ip: Any) -> None:
    first = sandbox_ip.run_line_magic("salloc", "--gpus=1 -t 5")
    first.wait("RUNNING", timeout=30)
    attached = sandbox_ip.run_line_magic("salloc", f"--attach {first.job_id}")
    attached.wait("RUNNING", timeout=10)
    assert attached.job_id == first.job_id and attached is not first


def test_attach_to_an_unknown_job_is_a_short_message(sandbox_ip: Any) -> None:
    with pytest.raises(UsageError, match="cannot attach to job 999999: it is unknown to Slurm"):
        sandbox_ip.run_line_magic("salloc", "--attach 999999")
    with pytest.raises(UsageError, match="not a Slurm job id"):
        sandbox_ip.run_line_magic("salloc", "--attach abc")


# ---- %srun / %%srun ---------------------------------------------------------------------------------
@pytest.fixture
def running(sandbox_ip: Any) -> Any:
    alloc = sandbox_ip.run_line_magic("salloc", "-n2 --gpus=1 -t 5")
    alloc.wait("RUNNING", timeout=30)
    return alloc


def test_srun_line_runs_in_the_default_allocation_with_labels(
    sandbox_ip: Any, running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _TimedStream()
    monkeypatch.setattr(sys, "stdout", out)
    # single quotes: IPython leaves $NAME alone, bash expands it on the node
    sandbox_ip.run_cell("%srun -n2 --label bash -c 'echo job=$SLURM_JOB_ID task=$SLURM_PROCID'")
    texts = sorted(_texts(out))
    assert texts == [f"0: job={running.job_id} task=0", f"1: job={running.job_id} task=1"]


def test_srun_line_expands_python_values_but_not_single_quoted_dollars(
    sandbox_ip: Any, running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _TimedStream()
    monkeypatch.setattr(sys, "stdout", out)
    sandbox_ip.user_ns.update(word="hello")
    sandbox_ip.run_cell("%srun -n1 bash -c 'echo {word} $word $SLURM_JOB_ID $0' $word")
    # {expr} is expanded even in single quotes, $name is not (bash sees $word: empty); $word outside is
    assert _texts(out) == [f"hello {running.job_id} hello"]


def test_one_unknown_dollar_name_leaves_the_whole_line_unexpanded(sandbox_ip: Any) -> None:
    sandbox_ip.user_ns["ngpu"] = 2
    sandbox_ip.user_ns.pop("NOT_A_PYTHON_NAME", None)
    result = sandbox_ip.run_cell("%salloc --dry-run --gpus=$ngpu --comment=$NOT_A_PYTHON_NAME")
    # $ngpu reached the magic as written, and the message quotes it
    assert isinstance(result.error_in_exec, UsageError)
    assert "'$ngpu' is not a GPU count" in str(result.error_in_exec)


def test_cell_srun_streams_lines_while_the_step_runs(
    sandbox_ip: Any, running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _TimedStream()
    monkeypatch.setattr(sys, "stdout", out)
    sandbox_ip.run_cell_magic("srun", "-n1", "echo first $SLURM_PROCID\nsleep 2\necho second\n")
    assert _texts(out) == ["first 0", "second"]  # the cell body is not expanded by IPython
    (t_first, _), (t_second, _) = out.lines
    assert t_second - t_first > 1.5  # the first line arrived while the step was still running


def test_cell_srun_python(sandbox_ip: Any, running: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _TimedStream()
    monkeypatch.setattr(sys, "stdout", out)
    sandbox_ip.run_cell_magic("srun", "-n1 --python", "import os\nprint('job', os.environ['SLURM_JOB_ID'])\n")
    assert _texts(out) == [f"job {running.job_id}"]


def test_failing_step_reports_its_exit_code(
    sandbox_ip: Any, running: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox_ip.run_line_magic("srun", "-n1 bash -c 'exit 3'")
    assert "step exited with code 3" in capsys.readouterr().err


def test_srun_jobid_runs_in_another_allocation(
    sandbox_ip: Any, running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = sandbox_ip.run_line_magic("salloc", "--gpus=1 -t 5")
    other.wait("RUNNING", timeout=30)
    out = _TimedStream()
    monkeypatch.setattr(sys, "stdout", out)
    sandbox_ip.run_line_magic("srun", f"--jobid {running.job_id} -n1 printenv SLURM_JOB_ID")
    assert _texts(out) == [str(running.job_id)]


def test_ctrl_c_ends_the_step_not_the_allocation(
    sandbox_ip: Any, running: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import _thread
    import signal
    import threading

    # SIGINT raises KeyboardInterrupt, as ipykernel makes it while a cell runs: a pytest started from a background
    # shell inherits SIGINT ignored, and interrupt_main then does nothing (the step ran its 60 s, "DID NOT RAISE")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.5, _thread.interrupt_main)  # what Ctrl-C in the kernel does
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            sandbox_ip.run_line_magic("srun", "-n1 sleep 60")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 30
    assert re.fullmatch(
        rf"interrupted: step .+ ended; allocation {running.job_id} is still running", str(info.value)
    ), str(info.value)
    running.refresh()
    assert running.state == "RUNNING"


def test_step_timeout_ends_the_step_not_the_allocation(
    sandbox_ip: Any, running: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox_ip.run_line_magic("srun", "--timeout 1 -n1 sleep 30")
    assert "step ended after --timeout 1 s" in capsys.readouterr().err
    running.refresh()
    assert running.state == "RUNNING"


# ---- %squeue, %sinfo, %scancel, %slurm ----------------------------------------------------------------
def test_squeue_shows_my_job_with_its_gpu_indices(sandbox_ip: Any, running: Any) -> None:
    table = sandbox_ip.run_line_magic("squeue", "")
    rows = {r["job"]: r for r in table}
    row = rows[str(running.job_id)]
    assert row["state"] == "RUNNING"
    node, idx = next(iter(running.gpus.items()))
    assert row["gpus"].startswith(f"{node}:{','.join(map(str, idx))}")
    assert re.fullmatch(r"00:0[0-5]:\d\d", row["time_left"])
    assert "GPUS" in table.text() and str(running.job_id) in table._repr_html_()


def test_squeue_all_includes_my_jobs(sandbox_ip: Any, running: Any) -> None:
    table = sandbox_ip.run_line_magic("squeue", "--all")
    assert str(running.job_id) in {r["job"] for r in table}


def test_sinfo_counts_used_gpus_per_node(sandbox_ip: Any, running: Any) -> None:
    table = sandbox_ip.run_line_magic("sinfo", "")
    node, idx = next(iter(running.gpus.items()))
    row = next(r for r in table if r["node"] == node)
    used, total = map(int, row["gpus_used"].split("/"))
    assert total == 8 and used >= len(idx)
    assert all(str(i) in row["used_idx"] for i in idx)
    assert "h100" in row["gpu_type"]


def test_sinfo_partition_filter(sandbox_ip: Any) -> None:
    assert len(sandbox_ip.run_line_magic("sinfo", "-p gpu")) >= 1
    with pytest.raises(UsageError, match="no node in partition 'nope'"):
        sandbox_ip.run_line_magic("sinfo", "-p nope")


def test_scancel_default_allocation(sandbox_ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    alloc = sandbox_ip.run_line_magic("salloc", "--gpus=1 -t 5")
    alloc.wait("RUNNING", timeout=30)
    sandbox_ip.run_line_magic("scancel", "")
    assert f"cancelled job {alloc.job_id}" in capsys.readouterr().out
    alloc.wait("CANCELLED", timeout=15)


def test_scancel_unknown_job_is_a_short_message(sandbox_ip: Any) -> None:
    with pytest.raises(UsageError, match="cannot cancel job 999999: Slurm does not know it"):
        sandbox_ip.run_line_magic("scancel", "999999")


def test_scancel_of_an_ended_job_says_so(sandbox_ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    alloc = sandbox_ip.run_line_magic("salloc", "--gpus=1 -t 5")
    alloc.wait("RUNNING", timeout=30)
    alloc.cancel()
    alloc.wait("CANCELLED", timeout=15)
    sandbox_ip.run_line_magic("scancel", str(alloc.job_id))
    assert f"job {alloc.job_id} already ended (CANCELLED)" in capsys.readouterr().out


def test_slurm_status_names_the_config_and_the_controller(sandbox_ip: Any, slurm_sandbox: Any) -> None:
    text = sandbox_ip.run_line_magic("slurm", "")
    assert str(slurm_sandbox.conf_path) in text
    assert "controller: answering" in text
    assert repr(text) == str(text)


def test_slurm_use_switches_the_runner(sandbox_ip: Any, slurm_sandbox: Any) -> None:
    from slurmlab.slurm.runner import get_runner

    text = sandbox_ip.run_line_magic("slurm", f"use {slurm_sandbox.conf_path}")
    assert f"now using {slurm_sandbox.conf_path}" in text
    assert get_runner().slurm_conf == str(slurm_sandbox.conf_path)
    with pytest.raises(UsageError, match="no slurm.conf at"):
        sandbox_ip.run_line_magic("slurm", "use /nonexistent/slurm.conf")


# ---- a controller that does not answer ------------------------------------------------------------
@pytest.fixture
def down_controller(slurm_sandbox: Any, tmp_path: Path) -> Any:
    """A slurm.conf of the sandbox whose controller port nobody listens on, with a short timeout."""
    from slurmlab.sandbox.ports import free_ports
    from slurmlab.slurm.runner import Runner, set_runner

    text = Path(slurm_sandbox.conf_path).read_text()
    port = free_ports(1)[0]
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+", f"SlurmctldPort={port}", text))
    old = set_runner(Runner(slurm_conf=str(conf), timeout=3))
    try:
        yield conf
    finally:
        set_runner(old)


@pytest.mark.parametrize("line", ["squeue", "sinfo", "salloc --gpus=1"])
def test_down_controller_is_a_short_message(
    sandbox_ip: Any, down_controller: Any, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = sandbox_ip.run_cell("%" + line)
    out = capsys.readouterr()
    text = out.out + out.err
    assert isinstance(result.error_in_exec, UsageError)
    assert "not responding" in text and "Traceback" not in text


def test_down_controller_in_status(sandbox_ip: Any, down_controller: Any) -> None:
    assert "controller: NOT answering" in sandbox_ip.run_line_magic("slurm", "")


# ---- the widget forms of the magics ---------------------------------------------------------------
def test_salloc_form_submits_into_the_notebook_session(sandbox_ip: Any) -> None:
    from slurmlab.magics.session import get_session
    from slurmlab.widgets.form import RequestForm

    form = sandbox_ip.run_line_magic("salloc", "--form")
    assert isinstance(form, RequestForm)
    assert "application/vnd.jupyter.widget-view+json" in form._repr_mimebundle_()
    form.count.value = 1
    form.time.value = "5"
    form.render()
    alloc = form.submit()
    assert alloc is not None, form.submit_error
    assert get_session().default is alloc and alloc in get_session().allocations
    with pytest.raises(UsageError, match="--form takes no salloc options"):
        sandbox_ip.run_line_magic("salloc", "--form --gpus=1")


def test_squeue_watch_is_a_live_monitor(sandbox_ip: Any) -> None:
    from slurmlab.widgets.queue import QueueMonitor

    monitor = sandbox_ip.run_line_magic("squeue", "--watch --all")
    try:
        assert isinstance(monitor, QueueMonitor) and monitor.scope.value == "all"
        deadline = time.monotonic() + 10
        while monitor.fetches == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert monitor.fetches >= 1 and monitor.error is None
    finally:
        monitor.close()
    with pytest.raises(UsageError, match="drop -u"):
        sandbox_ip.run_line_magic("squeue", "--watch -u someone")


def test_slurm_sandbox_up_reuses_a_running_sandbox_and_switches_to_it(
    sandbox_ip: Any, slurm_sandbox: Any
) -> None:
    from slurmlab.magics.session import get_session
    from slurmlab.slurm.runner import Runner, get_runner, set_runner

    old = set_runner(Runner())  # as if the kernel pointed elsewhere
    try:
        text = sandbox_ip.run_line_magic(
            "slurm", f"sandbox up {slurm_sandbox.profile_name} --dir {slurm_sandbox.directory}"
        )
        assert f"sandbox {slurm_sandbox.profile_name} reused" in text and "controller: answering" in text
        assert get_runner().slurm_conf == str(slurm_sandbox.conf_path)
        assert get_session().sandbox.directory == slurm_sandbox.directory
        status = sandbox_ip.run_line_magic("slurm", "sandbox status")
        assert "running" in status and str(slurm_sandbox.directory) in status
        assert f"sandbox: {slurm_sandbox.profile_name}" in sandbox_ip.run_line_magic("slurm", "")
    finally:
        set_runner(old)
    with pytest.raises(UsageError, match="sandbox up|down|status"):
        sandbox_ip.run_line_magic("slurm", "sandbox sideways")
    # the CLI's spelling works too (`slurmlab sandbox up --profile NAME`)
    old = set_runner(Runner())
    try:
        text = sandbox_ip.run_line_magic(
            "slurm", f"sandbox up --profile {slurm_sandbox.profile_name} --dir {slurm_sandbox.directory}"
        )
        assert f"sandbox {slurm_sandbox.profile_name} reused" in text
        assert get_runner().slurm_conf == str(slurm_sandbox.conf_path)
    finally:
        set_runner(old)
    with pytest.raises(UsageError, match="two profiles"):
        sandbox_ip.run_line_magic("slurm", "sandbox up seed --profile dgx-h100")
