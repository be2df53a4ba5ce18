"""The controller itself: the Slurm version (detected once per configuration) and whether it answers."""

from __future__ import annotations

import threading
from typing import TypedDict

from slurmlab.core.request.request import version_text
from slurmlab.core.slurm.parse_text import parse_version
from slurmlab.errors import ParseError, SlurmError
from slurmlab.slurm.query import Query, arun_query, run_query
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = ["SCONTROL_JSON_SINCE", "PingAnswer", "aslurm_version", "ping", "slurm_version"]

# `scontrol --json` exists from 23.02; on 22.05 the `scontrol show … -d` text is the only place that names
# a job's GPU indices
SCONTROL_JSON_SINCE = (23, 2)

_versions: dict[tuple[str | None, str | None], tuple[int, ...]] = {}
_versions_lock = threading.Lock()


def _version_key(runner: Runner) -> tuple[str | None, str | None]:
    return (runner.configuration(), runner.cluster)


def _parse_version_tuple(result: RunResult) -> tuple[int, ...]:
    text = parse_version(result.stdout)
    try:
        return tuple(int(p) for p in text.split(".")[:3])
    except ValueError as exc:
        raise ParseError("Slurm version", result.stdout, hint="expected `slurm 22.05.8`") from exc


_VERSION_QUERY: Query[tuple[int, ...]] = Query(("sinfo", "--version"), _parse_version_tuple)


def _known_version(runner: Runner) -> tuple[int, ...] | None:
    with _versions_lock:
        return _versions.get(_version_key(runner))


def _remember_version(runner: Runner, version: tuple[int, ...]) -> tuple[int, ...]:
    with _versions_lock:
        _versions[_version_key(runner)] = version
    return version


def slurm_version(runner: Runner | None = None) -> tuple[int, ...]:
    """The Slurm version of the client commands, detected once per configuration."""
    runner = runner or get_runner()
    known = _known_version(runner)
    return known if known is not None else _remember_version(runner, run_query(_VERSION_QUERY, runner))


async def aslurm_version(runner: Runner | None = None) -> tuple[int, ...]:
    runner = runner or get_runner()
    known = _known_version(runner)
    return known if known is not None else _remember_version(runner, await arun_query(_VERSION_QUERY, runner))


class PingAnswer(TypedDict):
    ok: bool
    version: str | None  # "22.05.8"; None when even the version could not be read
    message: str  # scontrol ping's answer, or why there was none


def ping(runner: Runner | None = None) -> PingAnswer:
    """Is the controller answering? ``{"ok": bool, "version": "22.05.8", "message": str}``."""
    runner = runner or get_runner()
    try:
        version = version_text(slurm_version(runner))  # Slurm's spelling, 22.05.8: never 22.5.8
        result = runner.run(["scontrol", "ping"], check=False, timeout=min(runner.timeout, 15))
    except SlurmError as exc:
        return {"ok": False, "version": None, "message": str(exc)}
    text = (result.stdout + result.stderr).strip()
    ok = result.ok and "UP" in text and "DOWN" not in text
    return {"ok": ok, "version": version, "message": text}
