"""``slurmlab workshop up|reset|down|status``: a class on one machine (seats, a sandbox with accounting, the hub,
the lessons), brought up and taken down by one command each."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "workshop",
        help="a class on this machine: seats, a fair-share sandbox, JupyterHub, the lessons (needs root)",
        description="Bring a workshop up (Unix accounts student01…NN, a sandbox with accounting whose class "
        "account shares the GPUs fairly and caps each student, JupyterHub for the seats, each student's copy of "
        "the lessons), reset it between sessions, and take it down leaving nothing behind. Needs root.",
    )
    sub = parser.add_subparsers(dest="workshop_command", metavar="ACTION", required=True)

    up = sub.add_parser("up", help="create the seats, start the sandbox and the hub, copy the lessons")
    _where(up)
    up.add_argument("--seats", type=int, required=True, help="how many students (student01 … studentNN)")
    up.add_argument("--profile", default="dgx-h100", help="the sandbox's hardware profile (dgx-h100)")
    up.add_argument("--nodes", type=int, default=None, help="scale the profile to this many nodes")
    up.add_argument(
        "--gpu-cap", type=int, default=1, help="GPUs one student may hold at once (a QOS limit; default 1)"
    )
    up.add_argument(
        "--reservation", action="store_true", help="reserve every node for the class; the hub's jobs use it"
    )
    up.add_argument(
        "--password-mode",
        choices=("shared", "per-seat"),
        default="shared",
        help="one password for the class (default) or one per seat; printed once, stored only as hashes",
    )
    up.add_argument("--prefix", default="student", help="the seats' user name prefix (student)")
    up.add_argument(
        "--settings",
        default=None,
        metavar="FILE",
        help='the spawn form\'s prefilled or locked fields, JSON: {"ngpus": {"value": 1, "locked": true}, '
        '"runtime": {"value": "1:00:00"}, "partition": {"value": "gpu", "locked": true}}',
    )
    up.add_argument(
        "--view-every",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="how often the teacher's page asks Slurm (one squeue of the class) and reloads: 5 to 3600 (15)",
    )
    up.set_defaults(func=_up)

    reset = sub.add_parser("reset", help="cancel the class's jobs, put back the lessons nobody changed")
    _where(reset)
    reset.set_defaults(func=_reset)

    down = sub.add_parser("down", help="remove everything up made (users, homes, database, daemons, hub)")
    _where(down)
    down.set_defaults(func=_down)

    status = sub.add_parser("status", help="the hub, the seats, and each job of the class with why it waits")
    _where(status)
    status.set_defaults(func=_status)


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        dest="directory",
        default=None,
        help="the workshop's own folder: homes, sandbox, hub, records (default /srv/slurmlab-workshop)",
    )


def _settings(path: str | None) -> dict[str, Any]:
    from slurmlab.errors import SlurmlabError

    if path is None:
        return {}
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SlurmlabError(
            f"cannot read the form settings {path}: {exc}",
            hint="see slurmlab workshop up --help for the shape",
        ) from None
    if not isinstance(loaded, dict):
        raise SlurmlabError(f"the form settings {path} are not a JSON object", hint="see workshop up --help")
    return loaded


def _up(args: argparse.Namespace) -> int:
    from slurmlab.commands.notebooks import shipped_notebooks
    from slurmlab.workshop import Workshop
    from slurmlab.workshop.control import TEACHER, VIEW_PATH

    shop, secrets = Workshop.up(
        args.directory,
        seats=args.seats,
        profile=args.profile,
        nodes=args.nodes,
        lessons_given=shipped_notebooks(),
        prefix=args.prefix,
        gpu_cap=args.gpu_cap,
        reservation=args.reservation,
        password_mode=args.password_mode,
        form=_settings(args.settings),
        view_every=args.view_every,
        say=lambda line: print(f"- {line}", flush=True),
    )
    hub = shop.hub()
    print(f"workshop up in {shop.folder}: JupyterHub on {hub.url if hub else '(no hub)'}")
    print("the passwords, shown this once (only their hashes are kept):")
    if args.password_mode == "shared":
        print(f"  every seat ({', '.join(shop.seats)}): {secrets[shop.seats[0]]}")
    else:
        for name in shop.seats:
            print(f"  {name}: {secrets[name]}")
    if hub is not None:
        print(f"the teacher's view of the room: {hub.url}{VIEW_PATH}")
        print(f"  log in there as {TEACHER}: {secrets[TEACHER]}")
    print(f"between sessions: sudo slurmlab workshop reset --dir {shop.folder}")
    print(f"at the end:       sudo slurmlab workshop down --dir {shop.folder}")
    return 0


def _reset(args: argparse.Namespace) -> int:
    from slurmlab.workshop import Workshop

    report = Workshop.find(args.directory).reset()
    print(
        f"cancelled {len(report.cancelled)} job(s) of the class"
        + (f": {', '.join(report.cancelled)}" if report.cancelled else "")
    )
    restored = sum(len(v) for v in report.restored.values())
    print(f"put back {restored} lesson file(s) the students had not changed")
    for name, files in report.changed.items():
        print(f"  {name} changed {', '.join(files)}: left as they are")
    return 0


def _down(args: argparse.Namespace) -> int:
    from slurmlab.workshop import Workshop
    from slurmlab.workshop.control import DEFAULT_FOLDER, STATE_FILE

    where = Path(args.directory or DEFAULT_FOLDER).absolute()
    if not (where / STATE_FILE).exists():
        print(f"no workshop in {where}: nothing to remove")
        return 0
    for line in Workshop.find(where).down():
        print(f"removed {line}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from slurmlab.workshop import Workshop

    for line in Workshop.find(args.directory).describe():
        print(line)
    return 0
