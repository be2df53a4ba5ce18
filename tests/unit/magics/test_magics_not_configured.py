"""A magic with no Slurm configured says so in one line, naming `%slurm sandbox up` (issue 13, point 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slurmlab.slurm.runner import Runner


def test_the_magic_says_it_in_one_line(ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from slurmlab.slurm.runner import set_runner

    old = set_runner(Runner(slurm_conf=str(tmp_path / "nowhere.conf")))
    try:
        try:
            ip.run_line_magic("sinfo", "")
        except Exception as exc:  # a UsageError is how a magic refuses; its text is what the user sees
            shown = str(exc)
        else:
            shown = capsys.readouterr().out + capsys.readouterr().err
    finally:
        set_runner(old)
    assert "which does not exist" in shown and "%slurm sandbox up" in shown
    assert "Traceback" not in shown
