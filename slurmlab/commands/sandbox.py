"""``slurmlab sandbox up|down|restart|status|env|profiles``: a real local Slurm cluster from a hardware profile."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmlab.sandbox import Sandbox

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sandbox",
        help="start/stop a real local Slurm cluster with fake GPUs",
        description="A real Slurm (munged, slurmctld, one slurmd per node) on 127.0.0.1, built from a hardware "
        "profile. Nothing of the system's Slurm or munge is touched.",
    )
    sub = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)

    def where(p: argparse.ArgumentParser, with_profile_default: bool) -> None:
        p.add_argument(
            "--profile",
            default="dgx-h100" if with_profile_default else None,
            help="hardware profile (see `slurmlab sandbox profiles`)"
            + ("; default dgx-h100" if with_profile_default else ""),
        )
        p.add_argument(
            "--dir",
            dest="directory",
            default=None,
            help="sandbox folder (default $XDG_RUNTIME_DIR/slurmlab/sandbox/<profile> "
            "or ~/.cache/slurmlab/sandbox/<profile>)",
        )

    up = sub.add_parser(
        "up", help="start the sandbox (or reuse the one running) and wait until nodes are idle"
    )
    where(up, True)
    up.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="scale the profile to N nodes (each with the profile's node hardware)",
    )
    up.add_argument(
        "--port",
        type=int,
        default=None,
        help="first TCP port (slurmctld; slurmd of node i gets port+i); default: free ports",
    )
    up.add_argument(
        "--admit",
        action="append",
        default=None,
        metavar="USER",
        help="also let this Unix user use the sandbox (repeat for several; by default only the user "
        "who starts it may); given to a running sandbox, replaces the users it admits",
    )
    up.add_argument(
        "--accounting",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run Slurm accounting (slurmdbd with a private MariaDB: sacct, sacctmgr, QOS limits, "
        "fair-share); default: on where slurmdbd and MariaDB are installed",
    )
    up.set_defaults(func=_up)
    for name, func, text in (
        ("down", _down, "stop every process of the sandbox"),
        ("restart", _restart, "bring back dead or frozen daemons, keeping every job"),
        ("status", _status, "tell what runs"),
        ("env", _env, 'print `export SLURM_CONF=...` for a shell (eval "$(...)")'),
    ):
        p = sub.add_parser(name, help=text)
        where(p, False)
        p.set_defaults(func=func)
    prof = sub.add_parser("profiles", help="list the hardware profiles")
    prof.set_defaults(func=_profiles)


def _find(args: argparse.Namespace) -> Sandbox:
    from slurmlab.sandbox import Sandbox

    return Sandbox.find(args.directory or args.profile)


def _up(args: argparse.Namespace) -> int:
    from slurmlab.sandbox import Sandbox

    sb = Sandbox.up(
        profile=args.profile,
        nodes=args.nodes,
        directory=args.directory,
        port=args.port,
        admit=args.admit,
        accounting=args.accounting,
    )
    word = "already running; reusing it" if sb.reused else "is up"
    print(f"sandbox {sb.profile_name} ({len(sb.nodes)} nodes, Slurm {sb.release}) {word}")
    print(f"  folder: {sb.directory}")
    for note in sb.notes:
        print(f"  on this machine: {note}")
    others = f", and {', '.join(sb.admitted)}" if sb.admitted else ""
    print(f"  may be used by: its owner{others} (and root)")
    if sb.state.get("accounting"):
        print(
            f"  accounting: on (slurmdbd on port {sb.ports['slurmdbd']}, MariaDB in {sb.directory / 'db'}): "
            "sacct, sacctmgr and sshare answer"
        )
    else:
        print(
            f"  accounting: off ({sb.state.get('accounting_off') or 'this sandbox was started without it'})"
        )
    print("point Slurm's commands at it with:")
    print(f"  export SLURM_CONF={shlex.quote(str(sb.conf_path))}")
    print(f'  (or: eval "$(slurmlab sandbox env --dir {shlex.quote(str(sb.directory))})")')
    print(f"stop it with: slurmlab sandbox down --dir {shlex.quote(str(sb.directory))}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from slurmlab.errors import SandboxError

    try:
        sb = _find(args)
    except SandboxError:
        already = _already_down(args)
        if already is None:
            raise  # not a stopped sandbox: a corrupt state file, several sandboxes, a folder that is not there
        print(already)
        return 0
    stopped = sb.down()
    print(f"sandbox {sb.profile_name} in {sb.directory} stopped ({len(stopped)} processes)")
    return 0


def _already_down(args: argparse.Namespace) -> str | None:
    """What to say when the sandbox to stop is not running (``down`` removes its state file, the folder stays):
    stopping it again is no error. None when that is not the case."""
    from slurmlab.sandbox.folder import base_directory, locate
    from slurmlab.sandbox.state_file import STATE_FILE

    where = args.directory or args.profile
    if where is None:
        base = base_directory()
        if base.is_dir() and any(base.glob(f"*/{STATE_FILE}")):
            return None
        return f"no sandbox is running under {base}: nothing to stop"
    folder = locate(where)
    if not folder.is_dir() or (folder / STATE_FILE).exists():
        return None
    return f"the sandbox in {folder} is already down (no {STATE_FILE}): nothing to stop"


def _restart(args: argparse.Namespace) -> int:
    sb = _find(args)
    done = sb.restart()
    if not done:
        print(f"sandbox {sb.profile_name} in {sb.directory}: every daemon was running; nothing to restart")
    for line in done:
        print(line)
    st = sb.status()
    print(st)
    return 0 if st.running else 1


def _status(args: argparse.Namespace) -> int:
    from slurmlab.errors import SandboxError

    try:
        sb = _find(args)
    except SandboxError as exc:
        print(f"no sandbox running: {exc.message}")
        return 1
    st = sb.status()
    print(st)
    return 0 if st.running else 1


def _env(args: argparse.Namespace) -> int:
    sb = _find(args)
    for key, value in sb.env().items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def _profiles(args: argparse.Namespace) -> int:
    from slurmlab.sandbox import list_profiles, load_profile

    for name in list_profiles():
        p = load_profile(name)
        print(f"{name:<10} {p.nodes} node(s): {p.description}")
    return 0
