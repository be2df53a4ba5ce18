"""A Python function as a step (issue 32, point 1): the command that runs it, where its pickle is written (this
machine's home, or the cluster's side of an SSH link, through the runner), its removal however the step ends,
and the loader's words when the node's Python cannot run it (another Python version, no cloudpickle), which the
kernel turns into a SlurmlabError with a hint. The loader itself runs here, with this machine's Pythons."""

from __future__ import annotations

import base64
import os
import select
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import cloudpickle
import pytest
from fake_slurm import JOB, cluster, job_in

from slurmlab.errors import SlurmlabError
from slurmlab.slurm import steps
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import Runner, RunResult
from slurmlab.slurm.ssh import SshLink
from slurmlab.slurm.steps import (
    FUNCTION_LOADER,
    StepResult,
    function_argv,
    function_command,
    loader_failure,
    remote_store_argv,
    store_remotely,
)
from slurmlab.testing import FakeRunner

KERNEL_VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _answering() -> Callable[[], int]:
    """A function cloudpickle sends by value, as a notebook's are (one of an importable module goes by name)."""

    def answer() -> int:
        return 42

    return answer


_answer = _answering()


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env)


def _result(proc: subprocess.CompletedProcess[str], *, label: str = "") -> StepResult:
    """The step a node would have run: what the loader printed, as srun hands it on (``label``: srun's prefix)."""
    return StepResult(
        tuple(proc.args),
        proc.returncode,
        proc.stdout.splitlines(),
        [label + line for line in proc.stderr.splitlines()],
    )


class _LoginNode(Runner):
    """An SSH runner whose cluster side is this machine, with a home of its own: ``run`` runs the argv here
    (as the link's remote sh would), with HOME set to ``home``, and keeps each argv and its stdin."""

    def __init__(self, home: Path) -> None:
        super().__init__(ssh=SshLink.to("ssh://alice@login.example.org"))
        self.home = home
        self.ran: list[tuple[list[str], str | None]] = []

    def run(
        self, argv: Sequence[str], *, input: str | None = None, check: bool = True, **_: object
    ) -> RunResult:
        self.ran.append((list(argv), input))
        env = {"PATH": os.environ["PATH"], "HOME": str(self.home)}
        proc = subprocess.run(list(argv), input=input, capture_output=True, text=True, env=env, timeout=60)
        if check and proc.returncode != 0:
            raise self.failure(argv, proc.returncode, proc.stderr)
        return RunResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr, 0.0)


@pytest.fixture
def laptop_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine's home, empty: where a local step's pickle goes, and where one over SSH must not."""
    home = tmp_path / "laptop"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def no_cloudpickle(tmp_path: Path) -> dict[str, str]:
    """The environment of a Python that cannot import cloudpickle (a stand-in module that fails as a missing
    one does, first on its path)."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "cloudpickle.py").write_text("raise ImportError(\"No module named 'cloudpickle'\")\n")
    return {**os.environ, "PYTHONPATH": str(shim)}


def test_the_command_names_the_python_the_loader_the_pickle_and_the_kernels_versions() -> None:
    argv = function_argv("/opt/py311/bin/python3", "/home/alice/.cache/slurmlab/steps/step-abc")
    assert argv == [
        "/opt/py311/bin/python3",
        "-c",
        FUNCTION_LOADER,
        "/home/alice/.cache/slurmlab/steps/step-abc",
        KERNEL_VERSION,
        cloudpickle.__version__,
    ]


def test_locally_the_pickle_is_in_the_home_0600_run_by_this_python_and_removed(laptop_home: Path) -> None:
    with function_command(Runner(), _answer) as argv:
        path = Path(argv[3])
        assert argv[0] == sys.executable and path.parent == laptop_home
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        ran = _run(argv)
        assert (ran.returncode, ran.stdout) == (0, "42\n"), ran.stderr
    assert list(laptop_home.iterdir()) == []


def test_over_ssh_the_pickle_is_written_on_the_cluster_side_and_run_with_its_python3(
    tmp_path: Path, laptop_home: Path
) -> None:
    remote_home = tmp_path / "alice"
    remote_home.mkdir()
    login = _LoginNode(remote_home)
    with function_command(login, _answer) as argv:
        # one command through the runner: an argv list (the link quotes it), the pickle as base64 on its stdin
        (store, sent), *_ = login.ran
        assert store == remote_store_argv() and store[:2] == ["sh", "-c"]
        assert cloudpickle.loads(base64.b64decode(str(sent)))() == 42
        path = Path(argv[3])
        assert argv[0] == "python3"  # the cluster's; this kernel's path means nothing there
        assert path.is_absolute() and path.parent == remote_home / ".cache" / "slurmlab" / "steps"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert list(laptop_home.iterdir()) == []  # nothing written on the laptop
        ran = _run([sys.executable, *argv[1:]])
        assert (ran.returncode, ran.stdout) == (0, "42\n"), ran.stderr
    assert login.ran[-1][0] == ["rm", "-f", "--", str(path)]
    assert not path.exists()


def test_over_ssh_the_pickle_is_removed_however_the_step_ends_and_python_names_another(
    tmp_path: Path,
) -> None:
    login = _LoginNode(tmp_path)
    with pytest.raises(KeyboardInterrupt), function_command(login, _answer, "/opt/py311/bin/python3") as argv:
        assert argv[0] == "/opt/py311/bin/python3"
        assert Path(argv[3]).exists()
        raise KeyboardInterrupt  # Ctrl-C in the cell while the step runs
    assert not Path(argv[3]).exists()
    assert list((tmp_path / ".cache" / "slurmlab" / "steps").iterdir()) == []


def test_a_pickle_the_cut_link_could_not_remove_is_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    login = _LoginNode(tmp_path)
    with function_command(login, _answer) as argv:
        # the link goes down during the step: ssh's own exit code, and its words
        login.run = lambda argv, **_: RunResult(tuple(argv), 255, "", "Connection closed", 0.0)  # type: ignore[method-assign]
    assert Path(argv[3]).exists()
    assert f"could not remove {argv[3]} on the cluster (Connection closed)" in caplog.text


def test_a_login_that_prints_more_than_the_path_is_said(tmp_path: Path) -> None:
    login = _LoginNode(tmp_path)

    def greets(argv: Sequence[str], **_: object) -> RunResult:
        return RunResult(tuple(argv), 0, "Welcome to the cluster\n/home/a/x\n", "", 0.0)

    login.run = greets  # type: ignore[method-assign]
    with pytest.raises(SlurmlabError) as caught:
        store_remotely(login, b"pickle")
    assert "not the file's path" in str(caught.value) and ".bashrc" in str(caught.value)


def test_another_python_version_is_said_with_both_versions_and_python_keyword(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a kernel of a version this machine's Python is not (cloudpickle's bytecode is that version's)
    monkeypatch.setattr(steps, "kernel_python_version", lambda: "3.99")
    path = tmp_path / "step"
    path.write_bytes(cloudpickle.dumps(_answer))
    ran = _run(function_argv(sys.executable, str(path)))
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr.startswith(f"slurmlab: this step's Python is {KERNEL_VERSION} ({sys.executable} on ")
    assert "the kernel's is 3.99" in ran.stderr
    failure = loader_failure(_result(ran), sys.executable)
    assert failure is not None
    said = str(failure)
    assert f"is {KERNEL_VERSION}" in said and "the kernel's is 3.99" in said and "bytecode" in said
    assert failure.hint is not None and "Python 3.99" in failure.hint and "python=" in failure.hint


def test_a_python_without_cloudpickle_is_said_with_how_to_install_it(
    tmp_path: Path, no_cloudpickle: dict[str, str]
) -> None:
    path = tmp_path / "step"
    path.write_bytes(cloudpickle.dumps(_answer))
    ran = _run(function_argv(sys.executable, str(path)), env=no_cloudpickle)
    assert ran.returncode == 1
    assert ran.stderr.startswith(
        f"slurmlab: cloudpickle is not importable by this step's Python ({sys.executable}"
    )
    failure = loader_failure(_result(ran, label="0: "), "python3")
    assert failure is not None and "cloudpickle is not importable" in str(failure)
    assert failure.hint is not None
    assert "python3 -m pip install --user cloudpickle" in failure.hint and "python=" in failure.hint
    assert "Traceback" not in str(failure)


def test_a_pickle_the_node_cannot_read_is_said(tmp_path: Path) -> None:
    ran = _run(function_argv(sys.executable, str(tmp_path / "not-on-this-node")))
    failure = loader_failure(_result(ran, label="  12: "), sys.executable)
    assert failure is not None and "cannot read the function's pickle" in str(failure)
    assert failure.hint is not None and "share" in failure.hint


def test_the_functions_own_failure_and_a_step_that_ran_are_not_the_loaders(tmp_path: Path) -> None:
    def fails() -> None:
        raise ValueError("the function's own error")

    path = tmp_path / "step"
    path.write_bytes(cloudpickle.dumps(fails))
    ran = _run(function_argv(sys.executable, str(path)))
    assert ran.returncode == 1 and "ValueError: the function's own error" in ran.stderr
    assert loader_failure(_result(ran), sys.executable) is None
    path.write_bytes(cloudpickle.dumps(_answer))
    assert loader_failure(_result(_run(function_argv(sys.executable, str(path)))), sys.executable) is None
    interrupted = StepResult(("srun",), -2, [], ["slurmlab: cloudpickle is not importable by …"], True)
    assert loader_failure(interrupted, "python3") is None


def test_the_allocation_raises_the_loaders_words_and_removes_the_pickle(
    fake: FakeRunner, poller: JobPoller, laptop_home: Path, tmp_path: Path, no_cloudpickle: dict[str, str]
) -> None:
    # what the loader really prints on a node whose Python has no cloudpickle, as the step's stderr
    path = tmp_path / "step"
    path.write_bytes(cloudpickle.dumps(_answer))
    said = _run(function_argv(sys.executable, str(path)), env=no_cloudpickle)
    cluster(fake)
    job_in(fake, "running")
    fake.on(["srun", ...], stderr=said.stderr, returncode=1)
    alloc = Allocation.attach(JOB, runner=fake, poller=poller)
    try:
        alloc.wait(timeout=5)
        with pytest.raises(SlurmlabError) as caught:
            alloc.srun(_answer, python="/opt/py311/bin/python3", on_output=lambda stream, line: None)
        assert "cloudpickle is not importable" in str(caught.value)
        assert caught.value.hint is not None and "/opt/py311/bin/python3 -m pip" in caught.value.hint
        (srun,) = fake.called(["srun", ...])
        assert srun[:5] == ["srun", f"--jobid={JOB}", "--overlap", "/opt/py311/bin/python3", "-c"]
        assert list(laptop_home.iterdir()) == []  # the pickle went with the step
        with pytest.raises(TypeError, match="python="):
            alloc.srun(["hostname"], python="python3")
    finally:
        alloc.forget()


def _printing_then_waiting(gate: str) -> Callable[[], None]:
    def step() -> None:
        import os as _os
        import time as _time

        print("started", gate)  # no flush=True, as a notebook's print
        while not _os.path.exists(gate):
            _time.sleep(0.05)
        print("done")

    return step


def test_what_the_function_prints_reaches_the_cell_line_by_line_not_at_its_end(laptop_home: Path) -> None:
    gate = laptop_home / "gate"
    with function_command(Runner(), _printing_then_waiting(str(gate))) as argv:
        # as srun runs it on a node: stdout a pipe, and no PYTHONUNBUFFERED (this test's own may have one)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            # the function still runs (it waits for the gate): its first line must be here already
            ready, _, _ = select.select([proc.stdout], [], [], 30)
            assert ready, "nothing came while the function ran: its output waits for its end"
            assert proc.stdout.readline() == f"started {gate}\n"
            assert proc.poll() is None
            gate.touch()
            assert proc.stdout.readline() == "done\n"
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_storing_a_pickle_over_ssh_removes_those_a_day_old(tmp_path: Path) -> None:
    login = _LoginNode(tmp_path)
    steps_folder = tmp_path / ".cache" / "slurmlab" / "steps"
    steps_folder.mkdir(parents=True)
    stale, recent, other = (
        steps_folder / "step-stale",
        steps_folder / "step-recent",
        steps_folder / "notes.txt",
    )
    for path in (stale, recent, other):
        path.write_text("x")
    day_and_more = os.stat(stale).st_mtime - 86400 - 120
    for path in (stale, other):
        os.utime(path, (day_and_more, day_and_more))
    with function_command(login, _answer) as argv:
        left = sorted(p.name for p in steps_folder.iterdir())
    assert left == sorted(["notes.txt", "step-recent", Path(argv[3]).name])  # only a stale pickle went
