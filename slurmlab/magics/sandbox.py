"""``%slurm sandbox …`` and ``%slurm use``: which Slurm this kernel talks to.

Kept apart from the magic so that the sandbox picker's Start button (shown when a magic finds no Slurm) does
exactly what ``%slurm sandbox up --profile NAME`` does.
"""

from __future__ import annotations

import os

from IPython.core.error import UsageError

from slurmlab.magics.session import get_session, user_errors

__all__ = ["sandbox_command", "start_sandbox", "use_conf"]


def start_sandbox(profile: str) -> str:
    """Start (or reuse) the sandbox of ``profile`` and point this kernel at it: ``%slurm sandbox up PROFILE``."""
    return sandbox_command(["up", profile], None, None)


def sandbox_command(args: list[str], nodes: int | None, directory: str | None) -> str:
    """``up|down|status [PROFILE]``: what happened, in words."""
    from slurmlab.magics.status import slurm_status
    from slurmlab.sandbox.control import DEFAULT_PROFILE, Sandbox
    from slurmlab.slurm.runner import Runner, set_runner

    if not args or args[0] not in ("up", "down", "status"):
        raise UsageError("%slurm sandbox up|down|status [PROFILE]")
    verb, profile = args[0], (args[1] if len(args) > 1 else None)
    session = get_session()
    with user_errors(f"sandbox {verb} failed"):
        if verb == "up":
            sb = Sandbox.up(profile or DEFAULT_PROFILE, nodes, directory)
            session.sandbox = sb
            set_runner(sb.runner())
            return (f"sandbox {sb.profile_name} {'reused' if sb.reused else 'started'}; this kernel now uses "
                    f"it\n" + slurm_status())
        if directory is not None:
            sb = Sandbox.find(directory)
        elif profile is None and session.sandbox is not None:
            sb = session.sandbox
        else:
            sb = Sandbox.find(profile)
        if verb == "status":
            return str(sb.status())
        if session.sandbox is not None and session.sandbox.directory == sb.directory:
            session.sandbox = None
            set_runner(Runner())
        stopped = sb.down()
        return f"sandbox {sb.profile_name} stopped ({len(stopped)} processes)"


def use_conf(args: list[str]) -> str:
    """``%slurm use /path/slurm.conf``."""
    from slurmlab.magics.status import slurm_status
    from slurmlab.slurm.runner import Runner, set_runner

    if len(args) != 1:
        raise UsageError("give one slurm.conf path: %slurm use /etc/slurm/slurm.conf")
    path = os.path.abspath(os.path.expanduser(args[0]))
    if not os.path.isfile(path):
        raise UsageError(f"no slurm.conf at {path}")
    set_runner(Runner(slurm_conf=path))
    get_session().sandbox = None
    return f"now using {path}\n" + slurm_status()
