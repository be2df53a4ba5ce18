"""Where the link logs in, and what ssh's own failures mean: the pure half of :mod:`.link` (no process is run here).

:class:`SshTarget` is an ``ssh://[user@]host[:port]`` address, checked before any login; :func:`link_failure`
reads ssh's exit status and stderr (a host key unknown or changed, a refused login, nothing at the address, a
dropped connection) into an :class:`SshLinkError` that says what to check next. The words tested against come
from OpenSSH's real messages (tests/unit/ssh/data).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from slurmlab.errors import ControllerDownError, SlurmlabError

__all__ = ["SSH_FAILED", "SshLinkError", "SshTarget", "connect_again", "link_failure", "needs_a_person"]

SSH_FAILED = 255  # ssh's own exit status: the link, not the remote command, failed


class SshLinkError(ControllerDownError):
    """The SSH link to the cluster failed (refused, host key, login, dropped): Slurm was not reached."""


@dataclass(frozen=True)
class SshTarget:
    """Where to log in: ``ssh://[user@]host[:port]`` (a host of ``~/.ssh/config`` works as in a terminal)."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, url: str) -> SshTarget:
        """The target of ``ssh://[user@]host[:port]``; :class:`SlurmlabError` with an example when malformed."""
        example = "give ssh://user@login.example or ssh://user@login.example:2222"
        text = url.strip()
        if not text.startswith("ssh://"):
            raise SlurmlabError(f"not an ssh:// address: {text[:80]!r}", hint=example)
        parts = urlsplit(text)
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise SlurmlabError(
                f"an ssh:// address names a host, no path or query: {text[:80]!r}", hint=example
            )
        try:
            port = parts.port
        except ValueError:
            raise SlurmlabError(
                f"the port of {text[:80]!r} is not a number from 1 to 65535", hint=example
            ) from None
        host = parts.hostname or ""
        user = unquote(parts.username) if parts.username else None
        if parts.password is not None:
            raise SlurmlabError(
                "an ssh:// address must not hold a password (it would end up in the notebook)",
                hint="leave it out (give ssh://user@host): the password or one-time code is asked for without echo",
            )
        if not host or host.startswith("-") or (user is not None and (not user or user.startswith("-"))):
            raise SlurmlabError(
                f"no host (or a host or user starting with '-') in {text[:80]!r}", hint=example
            )
        if any(c.isspace() or ord(c) < 32 for c in host + (user or "")):
            raise SlurmlabError(
                f"a host or user name with spaces or control characters: {text[:80]!r}", hint=example
            )
        return cls(host=host, user=user, port=port or None)

    @property
    def destination(self) -> str:
        """What ssh is given: ``user@host`` or ``host``."""
        return f"{self.user}@{self.host}" if self.user else self.host

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port else ""
        return f"ssh://{self.user + '@' if self.user else ''}{host}{port}"


# ---- what ssh's own words mean ------------------------------------------------------------------------
_UNKNOWN_KEY = re.compile(
    r"No \S+ host key is known for (\S+)|Host key for (\S+) has changed and you have requested"
)
_CHANGED_KEY = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for \S+ has changed and you have")
_DENIED = re.compile(r"Permission denied \(([^)]*)\)")
_REFUSED = re.compile(
    r"connect to host \S+ port \d+: (Connection refused|Connection timed out|No route to host)"
)
_NO_HOST = re.compile(r"Could not resolve hostname \S+: (.*)")
_DROPPED = re.compile(
    r"Connection to \S+ closed by remote host|Connection closed by \S+ port|"
    r"Broken pipe|read from master failed|Timeout, server \S+ not responding|"
    r"Connection reset by|client_loop: send disconnect|Shared connection to \S+ closed|"
    r"Control socket connect\(.*\): (No such file or directory|Connection refused)|"
    r"kex_exchange_identification"
)


def needs_a_person(stderr: str) -> bool:
    """Whether ssh failed for what only the person at the notebook can give: a password or one-time code (the
    login was refused), or a look at a host key (unknown or changed)."""
    return bool(_DENIED.search(stderr) or _CHANGED_KEY.search(stderr) or _UNKNOWN_KEY.search(stderr))


def connect_again(target: SshTarget) -> str:
    return f"connect again: %slurm use {target.url()} (jobs on the cluster were not touched)"


def link_failure(
    target: SshTarget,
    returncode: int,
    stderr: str,
    *,
    connecting: bool = False,
    master_up: Callable[[], bool] | None = None,
    down: Callable[[], SshLinkError] | None = None,
) -> SshLinkError | None:
    """What ssh's exit ``returncode`` and ``stderr`` mean for the link to ``target``, in words with the next
    step; None when ssh did not fail. ssh exits 255 for its own failures, and a cut master leaves its sessions
    255 without a word: then ``master_up()`` (``ssh -O check``) tells a dead link from a remote command that
    exited 255 itself (None for the latter). ``down()``: the words for a link found down (a link's own, with
    since when), in place of ssh's."""
    if returncode != SSH_FAILED:
        return None
    found = _key_failure(target, stderr) or _login_failure(target, stderr)
    if found is None and (
        _DROPPED.search(stderr) or (not connecting and master_up is not None and not master_up())
    ):
        said = " ".join(line.strip() for line in stderr.splitlines() if line.strip())[-600:]
        found = (
            down()
            if down is not None
            else SshLinkError(
                f"the link to {target.url()} is down ({said or 'its connection ended'})",
                hint=connect_again(target),
            )
        )
    if found is not None:
        found.returncode, found.stderr = returncode, stderr
    return found


def _keyscan(target: SshTarget) -> str:
    return shlex.join(["ssh-keyscan", *(["-p", str(target.port)] if target.port else []), target.host])


def _key_failure(target: SshTarget, stderr: str) -> SshLinkError | None:
    where = target.url()
    if _CHANGED_KEY.search(stderr):
        return SshLinkError(
            f"{where}: the host's key is NOT the one known_hosts holds for it. This is what an attacker in the "
            "middle looks like; slurmlab did not log in",
            hint=f"ask the cluster's admins whether its host key changed (compare fingerprints: {_keyscan(target)}"
            f" | ssh-keygen -lf -); only if it did, remove the old one with ssh-keygen -R "
            f"{shlex.quote(target.host)} and log in once in a terminal to check and accept the new one",
        )
    if _UNKNOWN_KEY.search(stderr) or "Host key verification failed" in stderr:
        return SshLinkError(
            f"{where}: this host's key is not in known_hosts, so slurmlab cannot tell it is the real login node "
            "and did not log in",
            hint="log in once with ssh in a terminal and check the fingerprint it shows against the one your "
            f"cluster publishes (or {_keyscan(target)} | ssh-keygen -lf -) before answering yes",
        )
    return None


def _login_failure(target: SshTarget, stderr: str) -> SshLinkError | None:
    where = target.url()
    denied = _DENIED.search(stderr)
    if denied:
        port = ["-p", str(target.port)] if target.port else []
        return SshLinkError(
            f"{where}: the login was refused (the server offered: {denied.group(1)})",
            hint="check the user name, that your key is loaded (ssh-add -l) or the password / one-time code; "
            f"the same login in a terminal (ssh {shlex.join([*port, target.destination])}) shows more",
        )
    for pattern, what in (
        (_REFUSED, "nothing answered at that address"),
        (_NO_HOST, "the host name is unknown"),
    ):
        m = pattern.search(stderr)
        if m:
            return SshLinkError(
                f"{where}: {what} ({m.group(1)})",
                hint="check the host and port (and VPN); the same address works in a terminal with ssh",
            )
    return None
