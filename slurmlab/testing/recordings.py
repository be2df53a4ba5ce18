"""Recorded Slurm output: where the golden files live, and one recorded command as a :class:`Reply`.

The golden files are read from ``$SLURMLAB_GOLDEN_DIR`` or the repository's ``tests/data/slurm`` (a source
checkout, written by ``scripts/record-golden.py``); each version's ``commands.txt`` lists the argv and exit
code of every file.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

__all__ = ["GOLDEN_ENV", "Reply", "golden", "golden_dir", "listed_commands", "recorded"]

GOLDEN_ENV = "SLURMLAB_GOLDEN_DIR"


def golden_dir() -> Path:
    """Where the recorded outputs live: ``$SLURMLAB_GOLDEN_DIR``, else the checkout's tests/data/slurm."""
    override = os.environ.get(GOLDEN_ENV)
    return Path(override) if override else Path(__file__).resolve().parents[2] / "tests" / "data" / "slurm"


def golden(name: str) -> str:
    """The text of one recorded file, e.g. ``golden("22.05/s06_scontrol_show_job_d.txt")``."""
    path = golden_dir() / name
    try:
        return path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no recorded Slurm output {path}: record it with scripts/record-golden.py "
            f"(or point {GOLDEN_ENV} at your recordings)"
        ) from None


@dataclass(frozen=True)
class Reply:
    """What one command printed and its exit code.

    For ``popen`` only: ``hold`` keeps the process running after it has written this, until
    :meth:`FakeRunner.release` (then it writes ``after`` and exits with that one's code) or a SIGINT /
    SIGTERM (then it writes ``interrupted`` and exits with its code).
    ``argv`` is the command that printed it, when it was read from a recording.
    """

    stdout: str = ""
    stderr: str = ""
    returncode: int = 0
    hold: bool = False
    after: Reply | None = None
    interrupted: Reply | None = None
    argv: tuple[str, ...] | None = field(default=None, compare=False)

    def held(self, *, after: Reply | None = None, interrupted: Reply | None = None) -> Reply:
        """This output, then wait for release (``after``) or a signal (``interrupted``)."""
        return replace(self, hold=True, after=after, interrupted=interrupted)

    def split_stderr(self, fragment: str) -> tuple[Reply, Reply]:
        """(stderr up to and including the first line containing ``fragment``, the rest): a recorded
        background command cut where it started to wait."""
        lines = self.stderr.splitlines(keepends=True)
        cut = next((i + 1 for i, line in enumerate(lines) if fragment in line), len(lines))
        head = replace(self, stderr="".join(lines[:cut]), stdout="", returncode=0)
        return head, replace(self, stderr="".join(lines[cut:]))


def listed_commands(version_dir: Path) -> dict[str, tuple[tuple[str, ...], int]]:
    """name -> (argv, exit code) from a recording's commands.txt (``name<TAB>rc=N<TAB>argv``)."""
    out: dict[str, tuple[tuple[str, ...], int]] = {}
    path = version_dir / "commands.txt"
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[1].startswith("rc=") or not parts[1][3:].lstrip("-").isdigit():
            continue
        out[parts[0]] = (tuple(shlex.split(parts[2])), int(parts[1][3:]))
    return out


def recorded(name: str) -> Reply:
    """One recorded command, e.g. ``recorded("22.05/l02_squeue_brief_pending.txt")``: its stdout (the
    file), its stderr (``<stem>.stderr``), its exit code and argv (``commands.txt`` beside them).

    A name that commands.txt lists with no file on disk printed nothing on that stream."""
    folder, _, file = name.rpartition("/")
    version_dir = golden_dir() / folder
    listed = listed_commands(version_dir)
    if file not in listed:
        raise FileNotFoundError(
            f"{version_dir / 'commands.txt'} lists no command {file!r}: record it with scripts/record-golden.py"
        )
    argv, rc = listed[file]
    stem = file.rpartition(".")[0]
    out = version_dir / file
    err = version_dir / f"{stem}.stderr"
    return Reply(
        out.read_text() if out.is_file() else "", err.read_text() if err.is_file() else "", rc, argv=argv
    )
