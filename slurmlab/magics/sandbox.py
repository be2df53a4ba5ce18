"""``%slurm sandbox …`` and ``%slurm use``: which Slurm this kernel talks to.

Kept apart from the magic so that the sandbox picker's Start button (shown when a magic finds no Slurm) does
exactly what ``%slurm sandbox up --profile NAME`` does.

The workshop lessons open with ``%slurm sandbox up --if-needed``: a configured Slurm (a real cluster, or the
sandbox another lesson or the test suite started) is used unchanged, and only with none is the sandbox started.
A lesson that needs another profile for a while (04-mig: ``h200-mig``) starts it with ``%slurm sandbox up
PROFILE`` and ends with ``%slurm sandbox leave``: back to the Slurm it used before, stopping the sandbox only if
this kernel started it — a lesson never stops a cluster it did not start.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from IPython.core.error import UsageError

from slurmlab.errors import SandboxError
from slurmlab.magics.kernel import slurm_status
from slurmlab.magics.session import Before, Session, user_errors
from slurmlab.sandbox.control import DEFAULT_PROFILE, Sandbox
from slurmlab.sandbox.state_file import STATE_FILE
from slurmlab.slurm.controller import ping
from slurmlab.slurm.runner import Runner, get_runner, set_runner

__all__ = ["sandbox_command", "sandbox_in_use", "start_sandbox", "use_conf"]

USAGE = "%slurm sandbox up [PROFILE] [--if-needed] | down [PROFILE] | leave [PROFILE] | status [PROFILE]"


def start_sandbox(profile: str) -> str:
    """Start (or reuse) the sandbox of ``profile`` and point this kernel at it: ``%slurm sandbox up PROFILE``."""
    return sandbox_command(["up", profile], None, None)


def sandbox_command(
    args: list[str],
    nodes: int | None,
    directory: str | None,
    *,
    if_needed: bool = False,
    accounting: bool | None = None,
) -> str:
    """``up|down|leave|status [PROFILE]``: what happened, in words."""
    if not args or args[0] not in ("up", "down", "leave", "status") or len(args) > 2:
        raise UsageError(USAGE)
    verb, profile = args[0], (args[1] if len(args) > 1 else None)
    if if_needed and verb != "up":
        raise UsageError(f"--if-needed goes with up: %slurm sandbox up --if-needed (not {verb})")
    with user_errors(f"sandbox {verb} failed"):
        if verb == "up":
            if if_needed:
                in_use = _configured_slurm()
                if in_use is not None:
                    return in_use
            return _up(profile, nodes, directory, accounting)
        sb = _named(profile, directory)
        if verb == "status":
            return str(sb.status())
        if verb == "leave":
            return _leave(sb)
        back = _switch_back(sb)
        stopped = sb.down()
        return f"sandbox {sb.profile_name} stopped ({len(stopped)} processes)" + back


def sandbox_in_use() -> Sandbox | None:
    """The sandbox this kernel talks to: the one ``%slurm sandbox up`` chose, else the one whose slurm.conf the
    runner (or ``SLURM_CONF``) names — a sandbox another process started, such as the test suite's. None on a
    real cluster or with no Slurm at all."""
    session = Session.of()
    if session.sandbox is not None:
        return session.sandbox
    if get_runner().ssh is not None:
        return None  # a Slurm on another machine: a sandbox there is not this machine's to start or stop
    conf = get_runner().configuration()
    if not conf:
        return None
    folder = Path(conf).parent
    if not (folder / STATE_FILE).is_file():
        return None
    try:
        return Sandbox.find(folder)
    except SandboxError:
        return None


def _configured_slurm() -> str | None:
    """``up --if-needed``: the status of the Slurm configured here when it answers; None when none is configured
    (then the sandbox starts); a UsageError when one is configured but silent (a sandbox would hide that)."""
    runner = get_runner()
    if runner.ssh is not None:
        return _cluster_over_ssh(runner)
    if shutil.which("scontrol") is None:
        return None  # no Slurm client here: the sandbox's start says which packages it needs
    answer = ping(runner)
    if answer.get("ok"):
        sb = sandbox_in_use()
        what = (
            f"the sandbox {sb.profile_name} in {sb.directory}"
            if sb is not None
            else "the Slurm configured here"
        )
        return f"using {what}; no sandbox started\n" + slurm_status()
    conf = runner.configuration()
    if not conf or not os.path.isfile(conf):
        return None
    raise UsageError(
        f"a Slurm is configured here ({conf}) but its controller does not answer: "
        f"{answer.get('message')}\nstart it (scontrol ping should say UP), or use a local sandbox "
        "instead: %slurm sandbox up"
    )


def _cluster_over_ssh(runner: Runner) -> str:
    """``up --if-needed`` where this kernel drives a Slurm over SSH (``%slurm use ssh://…``, ``SLURMLAB_USE``):
    that cluster, unchanged; a UsageError when it does not answer, since a sandbox here would not be it."""
    link = runner.ssh
    where = link.target.url() if link is not None else "the cluster"
    answer = ping(runner)
    if answer.get("ok"):
        return f"using Slurm on {where}; no sandbox started\n" + slurm_status()
    raise UsageError(
        f"this kernel uses Slurm on {where}, whose controller does not answer: {answer.get('message')}\n"
        "check the link and the cluster with %slurm; a local sandbox would not be that cluster: "
        "%slurm sandbox up starts one here instead"
    )


def _up(profile: str | None, nodes: int | None, directory: str | None, accounting: bool | None = None) -> str:
    session = Session.of()
    name = profile or DEFAULT_PROFILE
    current = sandbox_in_use()
    runner_before = get_runner()
    sb = Sandbox.up(
        name, nodes, directory if directory is not None else _beside(current, name), accounting=accounting
    )
    key = str(sb.directory)
    if current is None or current.directory != sb.directory:
        session.before.setdefault(key, Before(runner_before, session.sandbox, not sb.reused))
    session.sandbox = sb
    set_runner(sb.runner())
    # what differs on this machine (nodes claiming CPUs it lacks, where the daemons listen), as `sandbox up` says
    notes = "".join(f"on this machine: {note}\n" for note in sb.notes)
    return (
        f"sandbox {sb.profile_name} {'reused' if sb.reused else 'started'} in {sb.directory}; this kernel now "
        "uses it\n" + notes + slurm_status()
    )


def _beside(current: Sandbox | None, profile: str) -> str | None:
    """A second profile goes beside the sandbox in use when that one sits in a folder of sandboxes named by
    profile (the default place, or the test suite's): each test session keeps its own, and nothing collides."""
    if current is None or current.profile_name == profile or current.directory.name != current.profile_name:
        return None
    return str(current.directory.parent / profile)


def _named(profile: str | None, directory: str | None) -> Sandbox:
    """The sandbox ``down``/``leave``/``status`` mean: by folder, else the one in use, else by profile — one
    this kernel started or switched to first, then the profile's default place."""
    session = Session.of()
    if directory is not None:
        return Sandbox.find(directory)
    if profile is None and session.sandbox is not None:
        return session.sandbox
    if session.sandbox is not None and session.sandbox.profile_name == profile:
        return session.sandbox
    for folder in reversed(list(session.before)):
        if Path(folder).name == profile or profile is None:
            return Sandbox.find(folder)
    return Sandbox.find(profile)


def _switch_back(sb: Sandbox) -> str:
    """Point this kernel back at what it used before ``sb`` (when it uses ``sb``); the words saying so."""
    session = Session.of()
    before = session.before.pop(str(sb.directory), None)
    uses_it = session.sandbox is not None and session.sandbox.directory == sb.directory
    if not uses_it:
        return ""
    if before is None:
        session.sandbox = None
        set_runner(Runner())
        return ""
    session.sandbox = before.sandbox
    set_runner(before.runner)
    conf = before.runner.configuration() or "Slurm's default configuration"
    return f"; this kernel is back on {conf}"


def _leave(sb: Sandbox) -> str:
    """``leave``: back to the Slurm used before; stop ``sb`` only when this kernel started it."""
    started = (before := Session.of().before.get(str(sb.directory))) is not None and before.started
    back = _switch_back(sb)
    if not started:
        return (
            f"sandbox {sb.profile_name} left running (this kernel did not start it: stop it with "
            f"%slurm sandbox down {sb.profile_name})" + back
        )
    stopped = sb.down()
    return f"sandbox {sb.profile_name} stopped ({len(stopped)} processes; this kernel started it)" + back


def use_conf(args: list[str], python: str | None = None, *, status: bool = True) -> str:
    """``%slurm use /path/slurm.conf [--python PATH]`` (``status``: the new Slurm's status after the line)."""
    if len(args) != 1:
        raise UsageError("give one slurm.conf path: %slurm use /etc/slurm/slurm.conf")
    path = os.path.abspath(os.path.expanduser(args[0]))
    if not os.path.isfile(path):
        raise UsageError(f"no slurm.conf at {path}")
    set_runner(Runner(slurm_conf=path, node_python=python))
    Session.of().sandbox = None
    return f"now using {path}\n" + (slurm_status() if status else "")
