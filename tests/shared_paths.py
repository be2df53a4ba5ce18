"""Where the shared, read-only fixtures live (real Slurm and nvidia-smi output).

They sit in ``../shared/fixtures`` beside the repository; ``SLURMLAB_SHARED_FIXTURES``
overrides that. They are never copied into the repository. Tests of Slurm output run on the project's
own golden files (``tests/data/slurm``, see ``fake_slurm.golden_path``); the shared Slurm capture is read
only by their extra tests, which skip without it. The nvidia-smi captures are read from here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV_VAR = "SLURMLAB_SHARED_FIXTURES"


def shared_fixtures_dir() -> Path | None:
    override = os.environ.get(ENV_VAR)
    path = Path(override) if override else REPO.parent / "shared" / "fixtures"
    return path if path.is_dir() else None


def require_shared(*parts: str) -> Path:
    """The path under the shared fixtures, or skip the test with the reason."""
    base = shared_fixtures_dir()
    if base is None:
        pytest.skip(
            f"shared fixtures not found at {REPO.parent / 'shared' / 'fixtures'}; "
            f"set {ENV_VAR} to the fixtures folder to run this test"
        )
    path = base.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent")
    return path


def list_shared(*parts: str, pattern: str = "*") -> list[Path]:
    """Files under the shared fixtures for parametrisation (empty when absent: tests then skip)."""
    base = shared_fixtures_dir()
    if base is None:
        return []
    folder = base.joinpath(*parts)
    return sorted(p for p in folder.glob(pattern) if p.is_file()) if folder.is_dir() else []


def smi_capture(name: str) -> str:
    """The text of one real ``nvidia-smi`` capture (skips the test when the shared fixtures are absent)."""
    return require_shared("nvidia-smi", name).read_text()
