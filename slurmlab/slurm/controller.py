"""The controller itself: the Slurm version (detected once per configuration) and whether it answers."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Sequence
from typing import TypedDict

from slurmlab.core.request.request import version_text
from slurmlab.core.slurm.parse_text import parse_version
from slurmlab.errors import ControllerDownError, MungeError, ParseError, SlurmError
from slurmlab.slurm.failures import RATE_LIMIT_HINT, classify_failure
from slurmlab.slurm.query import Query, arun_query, run_query
from slurmlab.slurm.runner import Runner, RunResult, get_runner
from slurmlab.slurm.throttle import controller_rate_limits

__all__ = [
    "PING_TIMEOUT",
    "RATE_LIMITED_PING_WAIT",
    "SCONTROL_JSON_SINCE",
    "PingAnswer",
    "aconfirm_answering",
    "aslurm_version",
    "config_text",
    "confirm_answering",
    "ping",
    "slurm_version",
]

# `scontrol --json` exists from 23.02; on 22.05 the `scontrol show … -d` text is the only place that names
# a job's GPU indices
SCONTROL_JSON_SINCE = (23, 2)

_versions: dict[tuple[str | None, str | None], tuple[int, ...]] = {}
_versions_lock = threading.Lock()


def _version_key(runner: Runner) -> tuple[str | None, str | None]:
    return (runner.configuration(), runner.cluster)


# the numbers lead; a build's suffix follows them (24.11.0-0rc1, 23.02.7-vendor, 25.11.0rc1, 24.05.4.1)
_VERSION_NUMBERS = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def _parse_version_tuple(result: RunResult) -> tuple[int, ...]:
    text = parse_version(result.stdout)
    m = _VERSION_NUMBERS.match(text)
    if m is None:
        raise ParseError("Slurm version", result.stdout, hint="expected `slurm 22.05.8`")
    return tuple(int(p) for p in m.groups())


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


def config_text(runner: Runner | None = None) -> str:
    """``scontrol show config`` as printed (one REQUEST_BUILD_INFO): the controller's running configuration."""
    return (runner or get_runner()).run(["scontrol", "show", "config"]).stdout


def ping(runner: Runner | None = None) -> PingAnswer:
    """Is the controller answering? ``{"ok": bool, "version": "22.05.8", "message": str}``."""
    runner = runner or get_runner()
    try:
        version = version_text(slurm_version(runner))  # Slurm's spelling, 22.05.8: never 22.5.8
        result = runner.run(["scontrol", "ping"], check=False, timeout=min(runner.timeout, 15))
    except SlurmError as exc:
        return {"ok": False, "version": None, "message": str(exc)}
    text = (result.stdout + result.stderr).strip()
    # one line per controller; while any one is UP it answers every query (a backup taking over is not an
    # outage), and the message keeps the DOWN line for whoever looks
    ok = _UP.search(result.stdout) is not None
    return {"ok": ok, "version": version, "message": text}


# ---- an empty answer or a silent controller ---------------------------------------------------------
# Slurm 24.11 and 26.05 `scontrol --json show job` print `"jobs": []` and exit 0 when slurmctld is down: the
# answer of an empty queue or an unknown job id (last_update told them apart once, but too fragile to trust).
# Only then is the controller asked, so the normal path costs nothing; briefly, since the user waits on it.
PING_TIMEOUT = 5.0
_PING_ARGV = ("scontrol", "ping")
# one line per controller, "Slurmctld(primary) at HOST is UP"; with a backup, any that is UP answers queries
_UP = re.compile(r"\bis UP\b")
_DOWN_HINT = "check that slurmctld is up (`scontrol ping`); for the sandbox run `slurmlab sandbox status`"
_DOWN = re.compile(r"\bis DOWN\b")
# Where the site's slurm.conf turns slurmctld's per-user rate limit on (rl_enable), a ping the limit refuses prints
# "Slurmctld(primary) at … is DOWN" and exits 1 in milliseconds, asking no second time (recorded on 24.11 and 26.05:
# tests/data/slurm/<version>/rate_limit/ping_*): the words of a dead controller, said of a live one. Such a ping is
# asked once more after this wait (a token comes back every rl_refill_period, a second by Slurm's default); DOWN
# again, the answer stays unconfirmed, said as the rate limit's doing: never "not responding", never "no jobs".
RATE_LIMITED_PING_WAIT = 1.0


def _ping_timeout(runner: Runner) -> float:
    return min(runner.timeout, PING_TIMEOUT)


def _refused_by_limit(ping_result: RunResult, runner: Runner) -> bool:
    """Whether a ping that says DOWN may have been refused by the site's rate limit (see above)."""
    return (
        _UP.search(ping_result.stdout) is None
        and _DOWN.search(ping_result.stdout) is not None
        and controller_rate_limits(runner.slurm_conf)
    )


def _raise_unless_up(asked: Sequence[str], ping_result: RunResult, *, rate_limited: bool = False) -> None:
    """Raise what a ping that found no controller means for the query ``asked``; return when one answers.
    ``rate_limited``: the ping was refused twice where the site limits each user's requests."""
    if _UP.search(ping_result.stdout):
        return
    if rate_limited:
        refused = ping_result.stdout.strip().splitlines()[0]
        raise SlurmError(
            f"slurmlab cannot tell yet whether `{' '.join(asked)}` printed no jobs because there are none: "
            f"the cluster limits each user's requests to its controller (slurm.conf: rl_enable), and it refused "
            f"the `scontrol ping` that would confirm the answer (a refused ping says: {refused})",
            argv=asked,
            returncode=ping_result.returncode,
            stderr=ping_result.stdout + ping_result.stderr,
            hint=RATE_LIMIT_HINT,
        )
    if ping_result.stderr.strip():
        cause = classify_failure(ping_result.argv, ping_result.returncode, ping_result.stderr)
        if isinstance(cause, MungeError):  # not the controller: munge, whose own hint is the next step
            raise cause
    said = (ping_result.stdout.strip() or ping_result.stderr.strip()).splitlines()
    words = said[0] if said else f"exit code {ping_result.returncode}, no message"
    raise ControllerDownError(
        f"the Slurm controller is not responding: `{' '.join(asked)}` printed no jobs, and "
        f"`scontrol ping` says: {words}",
        argv=asked,
        returncode=ping_result.returncode,
        stderr=ping_result.stdout + ping_result.stderr,
        hint=_DOWN_HINT,
    )


def confirm_answering(asked: Sequence[str], runner: Runner | None = None) -> None:
    """Raise ControllerDownError unless ``scontrol ping`` finds a controller answering.

    For a query ``asked`` that came back with no jobs: from a live controller that is the answer; from a
    down one (24.11+, see above) it is not. A ping that runs past its short timeout raises SlurmTimeoutError
    (a ControllerDownError), a munge failure MungeError. Where the site rate-limits its users, a ping that says
    DOWN is asked once more a second later; DOWN again raises a SlurmError that names the rate limit.
    """
    runner = runner or get_runner()
    result = runner.run(list(_PING_ARGV), check=False, timeout=_ping_timeout(runner))
    if _refused_by_limit(result, runner):  # once more, after a token has come back
        time.sleep(RATE_LIMITED_PING_WAIT)
        result = runner.run(list(_PING_ARGV), check=False, timeout=_ping_timeout(runner))
        _raise_unless_up(asked, result, rate_limited=_refused_by_limit(result, runner))
    _raise_unless_up(asked, result)


async def aconfirm_answering(asked: Sequence[str], runner: Runner | None = None) -> None:
    runner = runner or get_runner()
    result = await runner.arun(list(_PING_ARGV), check=False, timeout=_ping_timeout(runner))
    if _refused_by_limit(result, runner):
        await asyncio.sleep(RATE_LIMITED_PING_WAIT)
        result = await runner.arun(list(_PING_ARGV), check=False, timeout=_ping_timeout(runner))
        _raise_unless_up(asked, result, rate_limited=_refused_by_limit(result, runner))
    _raise_unless_up(asked, result)
