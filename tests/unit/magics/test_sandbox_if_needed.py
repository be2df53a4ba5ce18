"""``%slurm sandbox up --if-needed`` (the lessons' first cell) and ``%slurm sandbox leave`` (04-mig's way back),
against real sandboxes: a configured Slurm is used unchanged, none starts one, a silent one is said plainly; a
second sandbox is left for the Slurm used before, and stopped only by the kernel that started it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

pytestmark = pytest.mark.sandbox


@pytest.fixture
def no_slurm(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No Slurm configured: SLURM_CONF unset and the runner pointed at a slurm.conf that is not there. Yields a
    short folder (the munge socket's path must fit in 108 bytes) for the sandbox the test starts."""
    from slurmlab.slurm.runner import Runner, set_runner
    from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

    if slurm_missing_reason():
        pytest.skip(slurm_missing_reason() or "")
    folder = Path(tempfile.mkdtemp(prefix="slifn-", dir="/tmp"))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    old = set_runner(Runner(slurm_conf=str(folder / "nowhere.conf")))
    try:
        yield folder
    finally:
        set_runner(old)
        shutil.rmtree(folder, ignore_errors=True)


def test_if_needed_uses_the_configured_slurm_unchanged(sandbox_ip: Any, slurm_sandbox: Any) -> None:
    from slurmlab.magics.sandbox import sandbox_in_use
    from slurmlab.magics.session import get_session
    from slurmlab.slurm.runner import get_runner

    runner = get_runner()
    said = sandbox_ip.run_line_magic("slurm", "sandbox up --if-needed")
    assert "no sandbox started" in said and str(slurm_sandbox.conf_path) in said, said
    assert get_runner() is runner and get_session().sandbox is None
    in_use = sandbox_in_use()  # found from the runner's slurm.conf, though this kernel did not start it
    assert in_use is not None and in_use.directory == slurm_sandbox.directory


def test_if_needed_starts_a_sandbox_when_none_is_configured_and_names_a_silent_one(
    ip: Any, no_slurm: Path
) -> None:
    from slurmlab.magics.session import get_session
    from slurmlab.sandbox.control import Sandbox
    from slurmlab.slurm.runner import Runner, get_runner, set_runner

    folder = no_slurm / "h200-mig"
    said = ip.run_line_magic("slurm", f"sandbox up h200-mig --if-needed --dir {folder}")
    try:
        assert said.startswith(f"sandbox h200-mig started in {folder}; this kernel now uses it"), said
        assert "controller: answering" in said
        # h200-mig's nodes claim 96 CPUs: on a smaller machine the magic says so, as `slurmlab sandbox up` does
        claims_more = (os.cpu_count() or 1) < 96
        assert ("on this machine: each node claims 96 CPUs" in said) is claims_more, said
        assert get_runner().configuration() == str(folder / "slurm.conf")
        assert get_session().sandbox is not None and get_session().sandbox.directory == folder
        # run again: it answers now, so nothing new starts
        again = ip.run_line_magic("slurm", "sandbox up --if-needed")
        assert "no sandbox started" in again and str(folder) in again, again
    finally:
        Sandbox.find(folder).down()
    # its slurm.conf is still there but nothing answers: a configured, silent Slurm is said, never replaced
    set_runner(Runner(slurm_conf=str(folder / "slurm.conf"), timeout=10))
    get_session().sandbox = None
    with pytest.raises(UsageError, match=r"configured here .* but its controller does not answer") as info:
        ip.run_line_magic("slurm", "sandbox up --if-needed")
    assert "%slurm sandbox up" in str(info.value)


def test_leave_goes_back_and_stops_only_what_this_kernel_started(sandbox_ip: Any, slurm_sandbox: Any) -> None:
    from slurmlab.magics.session import get_session
    from slurmlab.slurm.runner import get_runner

    before = get_runner().configuration()
    said = sandbox_ip.run_line_magic("slurm", "sandbox up h200-mig --no-accounting")
    beside = slurm_sandbox.directory.parent / "h200-mig"  # next to the sandbox in use, not in ~/.cache
    assert f"in {beside};" in said, said
    started = " started in " in said
    assert get_runner().configuration() == str(beside / "slurm.conf")
    left = sandbox_ip.run_line_magic("slurm", "sandbox leave")
    assert f"this kernel is back on {before}" in left, left
    assert get_runner().configuration() == before and get_session().sandbox is None
    if started:
        assert "stopped" in left and not (beside / "state.json").exists(), left
    else:  # another part of the session started it: it stays up
        assert "left running" in left and (beside / "state.json").exists(), left


def test_if_needed_goes_with_up_only(ip: Any) -> None:
    with pytest.raises(UsageError, match="--if-needed goes with up"):
        ip.run_line_magic("slurm", "sandbox down --if-needed")
    with pytest.raises(UsageError, match="leave"):
        ip.run_line_magic("slurm", "sandbox sideways")
