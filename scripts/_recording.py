"""What the scripts that record a real Slurm's output share (scripts/record_*.py, scripts/record-golden.py,
tests/data/slurm/record_*.py): their command line, a scratch folder for the sandboxes, a sandbox stopped
whatever happens, the sandbox's paths and host name rewritten out of what Slurm printed, and the list of the
commands beside the outputs (``commands.txt``, read back by slurmlab/testing/recordings.py).

A script imports this module before slurmlab: it puts this checkout first on ``sys.path``, so that a recording
made inside a Slurm root (scripts/in-slurm-root.sh) runs the checkout's slurmlab, not one installed there.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "slurm"  # a recording goes to DATA/<version>/<its folder>
sys.path.insert(0, str(REPO))

from slurmlab.sandbox import RateLimit, Sandbox  # noqa: E402

REPLACES = "It starts its own sandbox (minutes) and replaces what the folder held before."
VERSIONS = "22.05, 24.11, 26.05"


def parser(doc: str | None, epilog: str = REPLACES) -> argparse.ArgumentParser:
    """A recorder's parser, described by the first paragraph of its docstring, with no argument yet."""
    return argparse.ArgumentParser(description=(doc or "").split("\n\n")[0].strip(), epilog=epilog)


def version_parser(doc: str | None, folder: str, epilog: str = REPLACES) -> argparse.ArgumentParser:
    """:func:`parser` with the one argument most recorders take: the Slurm version whose ``folder`` it writes."""
    ap = parser(doc, epilog)
    ap.add_argument(
        "version",
        help=f"the Slurm version installed here ({VERSIONS}): writes tests/data/slurm/VERSION/{folder}/",
    )
    return ap


def emptied(folder: Path) -> Path:
    """``folder``, made where missing, without the files a former recording left in it."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    return folder


@contextmanager
def scratch(
    prefix: str, *, mode: int = 0o711, parent: str | None = "/tmp", keep: bool = False
) -> Iterator[Path]:
    """A new folder to start sandboxes in, removed afterwards, failure included, unless ``keep`` (its
    sandboxes' logs stay to be read). ``mode`` 0o711 lets the sandbox's daemons and admitted users pass
    through it to the sandbox's own folder, not list it."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    base.chmod(mode)
    try:
        yield base
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


@contextmanager
def sandbox(
    profile: str,
    directory: Path,
    *,
    nodes: int | None = None,
    accounting: bool | None = None,
    rate_limit: RateLimit | None = None,
) -> Iterator[Sandbox]:
    """A sandbox started in ``directory`` (:meth:`Sandbox.up`) and stopped on leaving, failure included."""
    sb = Sandbox.up(profile, nodes, directory, accounting=accounting, rate_limit=rate_limit)
    try:
        yield sb
    finally:
        sb.down()


def rewrite(text: str, rewrites: Sequence[tuple[str, str]]) -> str:
    """``text`` with each (old, new) replaced in turn: this machine's folders and host name made neutral."""
    for old, new in rewrites:
        text = text.replace(old, new)
    return text


def write_commands(folder: Path, lines: Sequence[str], header: str = "", name: str = "commands.txt") -> None:
    """The list of what was recorded, one line each (``<file>\\trc=<exit code>\\t<argv>`` for FakeRunner)."""
    (folder / name).write_text(header + "\n".join(lines) + "\n")
