"""``Allocation.srun(func)`` over SSH for real (issue 32, point 1): the loopback sshd's user, the sandbox's Slurm
behind it (tests/integration/ssh/conftest.py). The function's pickle is written in that user's home
(``~/.cache/slurmlab/steps``), run by a Python of theirs, and removed after the step: the remote user's default
``python3`` (Debian's, without cloudpickle) is said in words; a Python named with ``python=`` that has
cloudpickle runs the function on the node.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmlab.errors import SlurmlabError
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import Runner
from slurmlab.testing.loopback_sshd import session_user

pytestmark = pytest.mark.sandbox


@pytest.fixture
def alloc(ssh_runner: Runner) -> Iterator[Allocation]:
    """An allocation of the ssh user, made over the link."""
    poller = JobPoller(ssh_runner, interval=0.5)
    made = Allocation.submit(["-N1", "-t", "5"], runner=ssh_runner, poller=poller, release_at_exit=False)
    try:
        made.wait("RUNNING", timeout=60)
        yield made
    finally:
        try:
            made.cancel()
        finally:
            poller.stop()


@pytest.fixture
def steps_folder() -> Path:
    """Where the ssh user's pickles go (the sandbox's node is this machine: its home is theirs)."""
    return Path(pwd.getpwnam(session_user()).pw_dir) / ".cache" / "slurmlab" / "steps"


@pytest.fixture
def laptop_pickles() -> Iterator[Callable[[], set[Path]]]:
    """The pickles written in this machine's home since the test began (a local step's place, never one over
    SSH)."""
    home = Path.home()
    before = set(home.glob("slurmlab-step-*"))
    yield lambda: set(home.glob("slurmlab-step-*")) - before


@pytest.fixture
def python_with_cloudpickle() -> tuple[str, str]:
    """A Python the ssh user can run, and the PYTHONPATH that gives it this environment's cloudpickle: this
    venv's Python lies under root's 0700 home, so it is the system's of the same version, as the hub's users
    get (:func:`slurmlab.hub.control.user_python`)."""
    from slurmlab.hub.control import user_python

    return user_python([session_user()], modules=("cloudpickle",))


def _collect(into: list[tuple[str, str]]) -> Callable[[str, str], None]:
    return lambda stream, line: into.append((stream, line))


def test_the_default_python3_without_cloudpickle_is_said_in_words(
    alloc: Allocation, steps_folder: Path, laptop_pickles: Callable[[], set[Path]]
) -> None:
    seen: list[tuple[str, str]] = []
    with pytest.raises(SlurmlabError) as caught:
        alloc.srun(lambda: print("ran"), on_output=_collect(seen))
    said = str(caught.value)
    # Debian's python3 of the remote user ran the loader; it found no cloudpickle and said so
    assert "cloudpickle is not importable by this step's Python (/usr/bin/python3" in said, said
    assert caught.value.hint is not None
    assert "python3 -m pip install --user cloudpickle" in caught.value.hint and "python=" in caught.value.hint
    assert ("stdout", "ran") not in seen
    assert any(
        "slurmlab: cloudpickle is not importable" in line for stream, line in seen if stream == "stderr"
    )
    assert not any("No such file" in line for _, line in seen), seen
    assert list(steps_folder.iterdir()) == []  # written there, and removed after the step
    assert laptop_pickles() == set()


def test_a_python_named_with_cloudpickle_runs_the_function_on_the_node(
    alloc: Allocation,
    steps_folder: Path,
    laptop_pickles: Callable[[], set[Path]],
    python_with_cloudpickle: tuple[str, str],
) -> None:
    python, pythonpath = python_with_cloudpickle
    assert "," not in pythonpath  # srun's --export splits at commas

    def where() -> str:
        import os
        import stat
        import sys

        pickle = sys.argv[1]
        print("pickle", pickle, oct(stat.S_IMODE(os.stat(pickle).st_mode)), flush=True)
        node, user = os.environ.get("SLURMD_NODENAME"), os.environ.get("USER")
        print("ran on", node, "as", user, "with", sys.executable, flush=True)
        return "returned"

    seen: list[tuple[str, str]] = []
    result = alloc.srun(
        where, python=python, args=[f"--export=ALL,PYTHONPATH={pythonpath}"], on_output=_collect(seen)
    )
    assert result.ok, result.stderr
    node = alloc.runner.run(["squeue", "-h", "-j", str(alloc.job_id), "-o", "%N"]).stdout.strip()
    out = [line for stream, line in seen if stream == "stdout"]
    assert out[1:] == [f"ran on {node} as {session_user()} with {python}", "returned"], seen
    word, pickle, mode = out[0].split()
    assert (word, Path(pickle).parent, mode) == ("pickle", steps_folder, "0o600"), out
    assert not Path(pickle).exists() and list(steps_folder.iterdir()) == []
    assert laptop_pickles() == set()


def test_the_pickle_is_removed_after_a_step_whose_function_failed(
    alloc: Allocation, steps_folder: Path, python_with_cloudpickle: tuple[str, str]
) -> None:
    python, pythonpath = python_with_cloudpickle

    def fails() -> Any:
        import sys

        print("pickle", sys.argv[1], flush=True)
        raise RuntimeError("the function's own failure")

    seen: list[tuple[str, str]] = []
    result = alloc.srun(
        fails, python=python, args=[f"--export=ALL,PYTHONPATH={pythonpath}"], on_output=_collect(seen)
    )
    # the function's own error is the function's: its traceback is the step's stderr, not slurmlab's words
    assert not result.ok and any("RuntimeError: the function's own failure" in line for line in result.stderr)
    (printed,) = [line for stream, line in seen if stream == "stdout"]
    pickle = Path(printed.split()[1])
    assert pickle.parent == steps_folder
    assert not pickle.exists() and list(steps_folder.iterdir()) == []
