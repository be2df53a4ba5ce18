"""An ordinary (non-root) user for the sandbox tests that run Slurm as a workshop user would: the user made once,
a folder it owns, and a Python that user can import slurmlab with."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from slurmlab.testing.other_user import ensure_user

REPO = Path(__file__).resolve().parents[3]
TEST_USER = "slurmlabtest"


@dataclass(frozen=True)
class OrdinaryUser:
    base: Path  # a folder under /tmp the user owns (removed by the test)
    as_user: list[str]  # argv prefix that runs a command as the user
    sandbox: list[str]  # argv of `slurmlab sandbox` as the user


def _user_python(home: Path) -> list[str]:
    """A python the test user can run with slurmlab importable (the sandbox needs only the standard library).

    The checkout may sit where that user cannot read (a 0700 temporary folder, root's home): then the
    package is copied into ``home``, a folder the user owns, as a workshop user would have it installed."""
    probe = subprocess.run(
        ["runuser", "-u", TEST_USER, "--", sys.executable, "-c", "import slurmlab"],
        capture_output=True,
        cwd="/",
    )
    if probe.returncode == 0:
        return [sys.executable]
    site = home / "site"
    shutil.copytree(
        REPO / "slurmlab",
        site / "slurmlab",
        ignore=shutil.ignore_patterns("__pycache__", "labextension", "*.pyc"),
    )
    return ["env", f"PYTHONPATH={site}", "/usr/bin/python3"]


def ordinary_user(prefix: str) -> OrdinaryUser:
    """The test user (created if missing) with a fresh folder of its own; needs root."""
    user = pwd.getpwnam(ensure_user(TEST_USER, home=True))
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chown(base, user.pw_uid, user.pw_gid)
    as_user = ["runuser", "-u", TEST_USER, "--"]
    return OrdinaryUser(base, as_user, as_user + _user_python(base) + ["-m", "slurmlab", "sandbox"])
