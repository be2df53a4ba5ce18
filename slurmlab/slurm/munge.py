"""Whether munged works, asked without Slurm: which socket a configuration authenticates through, a probe of
that socket, and the one next step that fits each way munge fails.

A stopped or frozen munged makes every Slurm command wait (for its whole timeout) as if the controller were
down; the probe tells the two apart in milliseconds (stopped) or ``MUNGE_PROBE_TIMEOUT`` seconds (frozen).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from slurmlab.slurm import children
from slurmlab.slurm.identity import current_user

__all__ = [
    "DEFAULT_MUNGE_SOCKET",
    "MUNGE_PROBE_TIMEOUT",
    "MungeProblem",
    "munge_hint",
    "munge_kind",
    "munge_socket",
    "probe_munge",
    "sandbox_folder",
]

MUNGE_PROBE_TIMEOUT = 2.0
DEFAULT_MUNGE_SOCKET = "/run/munge/munge.socket.2"
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
# the first line of every slurm.conf the sandbox renders (slurmlab.sandbox.render)
_SANDBOX_MARK = "# slurmlab sandbox"


def munge_socket(slurm_conf: str | None) -> str | None:
    """The munge socket that the Slurm configuration file ``slurm_conf`` authenticates through.

    None when it names another AuthType (e.g. ``auth/slurm``) or cannot be read (then Slurm's commands fail
    on their own, or fetch a configuration this cannot see); munge's default socket when the file says
    nothing."""
    try:
        text = Path(slurm_conf or DEFAULT_SLURM_CONF).read_text(errors="replace")
    except OSError:
        return None
    auth_type: str | None = None
    found: str | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip().strip('"')
        if key == "authtype":
            auth_type = value.lower()
        elif key == "authinfo":
            for item in value.split(","):
                name, _, path = item.partition("=")
                if name.strip().lower() == "socket" and path.strip():
                    found = path.strip()
    if auth_type is not None and auth_type != "auth/munge":
        return None
    return found or DEFAULT_MUNGE_SOCKET


@dataclass(frozen=True)
class MungeProblem:
    """Why munged does not serve ``socket``: ``kind`` is stopped, frozen, denied or failed."""

    socket: str
    kind: str
    detail: str


def probe_munge(path: str, *, timeout: float = MUNGE_PROBE_TIMEOUT) -> MungeProblem | None:
    """None when munged answers on the socket ``path``; otherwise what is wrong.

    A connect tells a stopped munged (refused, or no socket) or a socket this user may not use at once;
    a frozen munged still accepts connections (the kernel queues them), so ``munge -n`` then has to get a
    credential within ``timeout``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            return MungeProblem(path, "stopped", f"munged is not running (its socket {path}: {exc.strerror})")
        except PermissionError:
            return MungeProblem(path, "denied", f"you may not use munged's socket {path} (permission denied)")
        except BlockingIOError:
            # its queue of connections is full: a munged frozen for a while (every daemon keeps asking it)
            return MungeProblem(
                path,
                "frozen",
                f"munged's socket {path} takes no more connections (munged frozen or overloaded?)",
            )
        except TimeoutError:
            return MungeProblem(
                path, "frozen", f"munged's socket {path} accepts no connection (munged frozen?)"
            )
        except OSError as exc:
            return MungeProblem(
                path, "failed", f"munged's socket {path} cannot be reached: {exc.strerror or exc}"
            )
    munge = shutil.which("munge")
    if munge is None:
        return None  # without munge's client a frozen munged cannot be told from a slow one
    try:
        # asked from the thread a stalled command waits in, a poll round's daemon thread among them: killed with
        # this process if it exits meanwhile
        proc = children.run(
            [munge, "-n", "-S", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return MungeProblem(
            path,
            "frozen",
            f"munged does not answer on {path} within {timeout:g} s (it is frozen or overloaded)",
        )
    except OSError:
        return None
    if proc.returncode != 0:
        return MungeProblem(path, "failed", f"munged on {path} gives no credential: {proc.stderr.strip()}")
    return None


def sandbox_folder(slurm_conf: str | None) -> Path | None:
    """The sandbox folder when ``slurm_conf`` is one a slurmlab sandbox rendered."""
    if not slurm_conf:
        return None
    try:
        with open(slurm_conf, errors="replace") as fh:
            first = fh.readline()
    except OSError:
        return None
    return Path(slurm_conf).parent if first.startswith(_SANDBOX_MARK) else None


def munge_hint(slurm_conf: str | None, kind: str) -> str:
    """The next step for a munge problem of ``kind``: in a sandbox its own command, elsewhere the admins."""
    folder = sandbox_folder(slurm_conf)
    if kind == "denied":
        if folder is not None:
            return (
                f"this sandbox lets in only its owner and the users it admits; its owner can add you: "
                f"slurmlab sandbox up --dir {folder} --admit {current_user()}"
            )
        return "munged's socket must be usable by every user: ask your cluster's admins"
    if folder is not None:
        return f"bring munged back, keeping every job: slurmlab sandbox restart --dir {folder}"
    return "munged on this machine needs your cluster's admins (they can check `systemctl status munge`)"


def munge_kind(stderr: str) -> str:
    """What Slurm's own words about a munge failure say: ``denied`` (the socket's permissions) or ``failed``."""
    return "denied" if "permission denied" in stderr.lower() else "failed"
