"""Issue 32 point 4: the course's lessons run unchanged from a machine that reaches the cluster over SSH only.

Each lesson runs as in ``test_lessons.py`` (nbclient, a fresh python3 kernel, every cell in order) with no Slurm of
its own: ``SLURM_CONF`` is gone from its environment, and ``SLURMLAB_USE=ssh://slurmlab-loopback <slurm.conf>``
makes ``%load_ext slurmlab`` (every lesson's first cell) do what ``%slurm use`` would: one SSH link to a real sshd
on 127.0.0.1 (:mod:`slurmlab.testing.loopback_sshd`), logged in as a second Unix user whom the session's sandbox
admits, with the host's known_hosts and the user's key named in an ssh_config (``SLURMLAB_SSH_CONFIG``, none of
root's ~/.ssh). As on a cluster, the user's login sets the PATH (the sandbox's stand-in GPU tools; a site's module
does that) and the nodes' Python with slurmlab is named by ``SLURMLAB_NODE_PYTHON`` (a wrapper that sets the
PYTHONPATH, as a site's shared environment would), since this kernel's Python means nothing on the nodes.

Held: every lesson's shape (no error, the one deliberate mistake a short UsageError, the instructor's checks
passing, every job released); the first cell said the kernel uses the link; every job a lesson printed belongs to
the SSH user, as Slurm recorded it (none was submitted from here as root); the experiments' sync folders, made on
the cluster's side of the link, are gone. The whole course over SSH takes minutes: it runs in the matrix's 24.11
stage (``make test-slurm``, where the sandbox tests run over SSH too), not in ``make test``.
"""

from __future__ import annotations

import pwd
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lesson_kit import NOTEBOOKS, LessonCells, assert_course_shape, cell_text, run_notebook, squeue_ids

from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.lessons_over_ssh,
    pytest.mark.slow,
    pytest.mark.skipif(slurm_missing_reason() is not None, reason=slurm_missing_reason() or ""),
]

LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
HOST = "slurmlab-loopback"
_JOB = re.compile(r"\b(?:job|allocation) (\d+)")


@pytest.fixture(scope="module")
def course_over_ssh(slurm_sandbox: Any, loopback_sshd: Any) -> Iterator[dict[str, str]]:
    """The environment of a kernel that reaches the session's sandbox only over the link, while the sandbox
    admits the link's user and that user's logins have the sandbox's tools on their PATH."""
    from slurmlab.hub.control import user_python
    from slurmlab.testing.loopback_sshd import over_ssh

    shared = Path(tempfile.mkdtemp(prefix="slsb-ssh-course-", dir="/tmp"))
    shared.chmod(0o755)  # the wrapper must be the ssh user's to run, and the ssh_config only root's
    try:
        with over_ssh(slurm_sandbox, loopback_sshd) as seen, loopback_sshd.login_path(seen.path):
            python, pythonpath = user_python([loopback_sshd.user], modules=("slurmlab", "numpy"))
            wrapper = shared / "node-python"
            wrapper.write_text(f"#!/bin/sh\nPYTHONPATH='{pythonpath}' exec '{python}' \"$@\"\n")
            wrapper.chmod(0o755)
            private = Path(tempfile.mkdtemp(prefix="slsb-ssh-config-"))
            config = loopback_sshd.ssh_config(private / "ssh_config", host=HOST)
            yield {
                "SLURMLAB_USE": f"ssh://{HOST} {slurm_sandbox.conf_path}",
                "SLURMLAB_SSH_CONFIG": str(config),
                "SLURMLAB_NODE_PYTHON": str(wrapper),
            }
            shutil.rmtree(private, ignore_errors=True)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _owner(sandbox: Any, job: str) -> str | None:
    """The user Slurm recorded for ``job`` (``UserId=name(uid)``), read here as its owner; None once forgotten."""
    shown = sandbox.runner().run(["scontrol", "show", "job", job], check=False).stdout
    found = re.search(r"\bUserId=([^(\s]+)\(", shown)
    return found.group(1) if found else None


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_lesson_runs_unchanged_over_ssh(
    path: Path,
    course_over_ssh: dict[str, str],
    slurm_sandbox: Any,
    loopback_sshd: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    owners: dict[str, str | None] = {}

    def on_cell(cell: Any) -> None:
        for job in _JOB.findall(cell_text(cell)):
            owners.setdefault(job, _owner(slurm_sandbox, job))  # read while it is listed

    before = squeue_ids(slurm_sandbox)

    class OverSsh:  # the sandbox as run_notebook sees it: no SLURM_CONF for the kernel, the link's words instead
        def env(self) -> dict[str, str]:
            return course_over_ssh

    monkeypatch.delenv("SLURM_CONF", raising=False)
    nb, _ = run_notebook(path, OverSsh(), monkeypatch, tmp_path, on_cell)
    lesson = LessonCells(nb)

    loaded, if_needed = cell_text(lesson.code[0]), cell_text(lesson.cell("%slurm sandbox up --if-needed"))
    assert f"SLURMLAB_USE: now using Slurm on ssh://{HOST}" in loaded, loaded
    assert f"using Slurm on ssh://{HOST}; no sandbox started" in if_needed, if_needed
    assert_course_shape(lesson, slurm_sandbox, before)
    # whose jobs: every one the lesson printed is the link's user's, none this process's (root)
    theirs = {job: who for job, who in owners.items() if who is not None}
    assert set(theirs.values()) <= {loopback_sshd.user}, theirs
    if path.stem != "04-mig":  # the others make jobs (04's MIG job needs a MIG sandbox, not started over SSH)
        assert theirs, f"{path.stem} printed no job of {loopback_sshd.user}: {sorted(owners)}"
    # the experiments' meeting places were on the cluster's side (the login's home, not this machine's /tmp),
    # and are gone
    sync = Path(pwd.getpwnam(loopback_sshd.user).pw_dir) / ".slurmlab" / "sync"
    if path.stem == "05-time-slicing":
        assert sync.is_dir(), "the time-slicing workers met in no folder of the cluster's user"
    left = sorted(p.name for p in sync.glob("slurmlab-sync-*")) if sync.is_dir() else []
    assert left == [], left
