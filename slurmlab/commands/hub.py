"""``slurmlab hub up|down|status`` and ``slurmlab hub ood up|down``: a real JupyterHub on the sandbox, whose
users' servers are Slurm jobs (batchspawner), and the Open OnDemand shape (jupyter lab in a batch job)."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "hub",
        help="a real JupyterHub on the sandbox (batchspawner: each server a Slurm job)",
        description="JupyterHub + configurable-http-proxy + batchspawner's SlurmSpawner on the sandbox, on "
        "127.0.0.1 only; needs pip install 'slurmlab[hub]' and configurable-http-proxy (make setup installs "
        "both).",
    )
    sub = parser.add_subparsers(dest="hub_command", metavar="ACTION", required=True)

    up = sub.add_parser("up", help="start the hub (and the sandbox, when none runs in its folder)")
    _where(up)
    up.add_argument("--profile", default="dgx-h100", help="sandbox profile when one is started (dgx-h100)")
    up.add_argument(
        "--user",
        action="append",
        dest="users",
        default=None,
        metavar="NAME",
        help="a Unix user who may log in (repeat for several; default: you)",
    )
    up.add_argument(
        "--port", type=int, default=None, help="the hub's port on 127.0.0.1 (default: a free one)"
    )
    up.add_argument("--password", default=None, help="the login password (default: a random one, printed)")
    up.add_argument(
        "--foreground",
        action="store_true",
        help="stay until Ctrl-C (or SIGTERM), then stop the hub, its jobs and a sandbox it started",
    )
    up.set_defaults(func=_up)

    down = sub.add_parser("down", help="stop the servers (their jobs end), the hub and its proxy")
    _where(down)
    down.set_defaults(func=_down)

    status = sub.add_parser("status", help="the hub's address, users and the jobs of their servers")
    _where(status)
    status.set_defaults(func=_status)

    ood = sub.add_parser(
        "ood", help="the Open OnDemand shape: jupyter lab started by a batch script in a job"
    )
    ood_sub = ood.add_subparsers(dest="ood_command", metavar="ACTION", required=True)
    ood_up = ood_sub.add_parser("up", help="submit the session's job and wait until its jupyter lab answers")
    _where(ood_up)
    ood_up.add_argument("--user", default=None, help="the Unix user the job runs as (default: you)")
    ood_up.add_argument("--gpus", type=int, default=0)
    ood_up.add_argument("--time", dest="runtime", default="30", help="time limit (Slurm's forms; 30 minutes)")
    ood_up.add_argument("--partition", default="")
    ood_up.set_defaults(func=_ood_up)
    ood_down = ood_sub.add_parser("down", help="cancel the session's job")
    _where(ood_down)
    ood_down.set_defaults(func=_ood_down)


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir", dest="directory", default=None, help="the hub's folder (default ~/.cache/slurmlab/hub)"
    )
    p.add_argument(
        "--sandbox",
        default=None,
        help="the sandbox's folder or profile (default: the profile's usual folder)",
    )


def _folder(args: argparse.Namespace) -> Path:
    from slurmlab.hub.control import default_folder

    return Path(args.directory) if args.directory else default_folder()


def _up(args: argparse.Namespace) -> int:
    from slurmlab.hub.control import Hub
    from slurmlab.sandbox import Sandbox

    named = args.sandbox or ""
    sb = Sandbox.up(
        profile=args.profile if "/" in named or not named else named,
        directory=named if "/" in named else None,
    )
    try:
        hub = Hub.up(sb, _folder(args), users=args.users or (), password=args.password, port=args.port)
    except BaseException:
        if not sb.reused:
            sb.down()
        raise
    print(f"JupyterHub on the sandbox {sb.profile_name} (Slurm {sb.release}): {hub.url}")
    print(f"  log in as {', '.join(hub.users)} with the password {hub.password}")
    print(
        f"  each server is a Slurm job named slurmlab-hub (squeue --name slurmlab-hub); folder {hub.folder}"
    )
    if not args.foreground:
        print(f"stop it with: slurmlab hub down --dir {hub.folder}")
        return 0
    print("Ctrl-C stops the hub, its servers' jobs" + ("" if sb.reused else " and the sandbox"))
    _wait_for_stop()
    left = hub.down()
    if not sb.reused:
        sb.down()
    for line in left:
        print(f"  stopped by force: {line}")
    print("hub stopped" + ("" if sb.reused else ", sandbox stopped"))
    return 0


def _wait_for_stop() -> None:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    while not stop.wait(1.0):
        pass


def _down(args: argparse.Namespace) -> int:
    from slurmlab.hub.control import Hub

    hub = Hub.find(_folder(args))
    left = hub.down()
    for line in left:
        print(f"  stopped by force: {line}")
    print(f"hub in {hub.folder} stopped")
    return 0


def _status(args: argparse.Namespace) -> int:
    from slurmlab.hub.control import Hub

    hub = Hub.find(_folder(args))
    print(f"hub {hub.url} ({'running' if hub.alive() else 'not running'}), users: {', '.join(hub.users)}")
    for job in hub.jobs():
        print(f"  job {job.job_id} of {job.user}: {job.state}")
    return 0


def _ood_state(args: argparse.Namespace) -> Path:
    return _folder(args) / "ood.json"


def _ood_up(args: argparse.Namespace) -> int:
    import os

    from slurmlab.hub import ood
    from slurmlab.sandbox import Sandbox
    from slurmlab.slurm.identity import current_user

    sb = Sandbox.find(args.sandbox)
    user = args.user or current_user()
    session = ood.launch(sb, user, gpus=args.gpus, runtime=args.runtime, partition=args.partition)
    state = _ood_state(args)
    state.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(state, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the session's token
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({**session.as_dict(), "sandbox": str(sb.directory)}, out)
    print(f"jupyter lab in job {session.job_id} (as {user}): {session.url}")
    print(f"stop it with: slurmlab hub ood down --dir {state.parent}")
    return 0


def _ood_down(args: argparse.Namespace) -> int:
    from slurmlab.errors import SlurmlabError
    from slurmlab.hub import ood
    from slurmlab.sandbox import Sandbox

    state = _ood_state(args)
    try:
        saved = json.loads(state.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SlurmlabError(
            f"no session recorded in {state}", hint="start one: slurmlab hub ood up"
        ) from None
    sandbox = saved.pop("sandbox")
    session = ood.OodSession(**saved)
    ood.stop(Sandbox.find(sandbox), session)
    state.unlink()
    print(f"session job {session.job_id} ended")
    return 0
