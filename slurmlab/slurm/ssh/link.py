"""Slurm on another machine, through OpenSSH's own client: the transport of ``Runner(ssh=...)``.

Why OpenSSH's ``ssh`` and not a Python SSH library: it reads the user's ``~/.ssh/config`` (``ProxyJump``,
``Match``, ``IdentityFile``, certificates), talks to their agent and security keys, does the site's 2FA
(keyboard-interactive) and its ``known_hosts`` the way their terminal does, and its care (security fixes,
new key types) comes with the operating system. slurmlab adds no crypto of its own.

One connection per cluster: :meth:`SshLink.connect` starts a master (``ControlMaster``, its socket in a private
0700 folder, ``ControlPersist``) and every command after it is one more session on that connection
(``ssh -S <socket> -o ControlMaster=no host -- <words>``): no new handshake, no new login, no new 2FA prompt.

The remote side runs a command through the login shell, which splits the one string ssh sends. So each argv word
is quoted on its own (:func:`remote_words`, POSIX single quotes) and a connect checks once that a word of spaces,
quotes, ``;``, ``$(...)``, a newline and a non-UTF-8 byte comes back intact (a login shell that is not POSIX,
e.g. fish, is refused with words). Host keys are checked against ``known_hosts`` (``StrictHostKeyChecking=yes``):
an unknown or changed key is refused and :func:`.target.link_failure` says what to check. Passphrases, passwords and
one-time codes are asked through ``SSH_ASKPASS`` (:mod:`slurmlab.slurm.ssh.askpass`), which hands the prompt to
the caller's ``ask`` (in a notebook: a password field, no echo); the answer goes from there to ssh through a
socket in the private folder and is written nowhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from slurmlab.errors import SlurmlabError
from slurmlab.slurm.job_environment import READER_FAMILIES, READER_SETTINGS
from slurmlab.slurm.ssh import askpass as ssh_askpass
from slurmlab.slurm.ssh import relay as ssh_relay
from slurmlab.slurm.ssh.lease import (
    DEFAULT_LEASE,
    LEASE_AFTER,
    LEASE_BEFORE,
    LeaseKeeper,
    held_lease,
    holder_argv,
)
from slurmlab.slurm.ssh.target import (
    SSH_FAILED,
    SshLinkError,
    SshTarget,
    connect_again,
    link_failure,
    needs_a_person,
)

__all__ = ["QUOTING_PROBE", "LinkState", "SshLink", "ask_in_notebook", "remote_words"]

CONNECT_TIMEOUT = 10  # seconds for a TCP connect and the server's banner
# a link whose other end stopped answering is given up after about ALIVE_INTERVAL * (ALIVE_COUNT + 1) seconds
ALIVE_INTERVAL, ALIVE_COUNT = 1, 3  # ~4 s: a sleeping laptop is said within the 5 s target (bench_ssh)
# ssh binds its master's socket as "<ControlPath>.<16 random characters>" before renaming it, and a socket's path
# holds 104 bytes (macOS; 108 on Linux): a longer ControlPath fails with "too long for Unix domain socket"
CONTROL_PATH_ROOM = 104 - 17
# a link found down is reconnected in the background, first at once, then after 1, 2, 4 ... up to this many s
RECONNECT_MAX_WAIT = 10.0
# a word that a re-splitting or re-expanding shell would change: checked once per connect
QUOTING_PROBE = "a b\t'q' \"d\" ;$(id) `id` $HOME \\ *\nnext line \udcff end"


class LinkState(str, Enum):
    """Where an :class:`SshLink` stands (:attr:`SshLink.state`; since when it is down: :attr:`SshLink.down_since`).
    What reads it (the server's cluster picker, a panel) reads this, never the words of a link's message, which
    carry more after the state (the lease's)."""

    NOT_CONNECTED = "not connected"  # made, never connected, nothing tries to: connect() does
    CONNECTING = "connecting"  # never up yet: its master is started in the background, with back-off
    UP = "up"  # its master was up when last looked at (a login, a reconnect, a look)
    RECONNECTING = "reconnecting"  # was up, found down: its master is started again in the background
    NEEDS_LOGIN = "needs a login"  # given up: a password, one-time code or host key is for a person
    CLOSED = "closed"  # disconnect() was asked: not reconnected until connect()


# what a command that finds the link down says after "down since HH:MM; " (the same words every time, so a
# poller says them once); a link that tries again by itself says "reconnecting", never up yet or not
_DOWN_WORDS = {
    LinkState.CLOSED: "closed",
    LinkState.NEEDS_LOGIN: "the login needs you: connect again",
}


def remote_words(argv: Sequence[str]) -> list[str]:
    """``argv`` as words a POSIX login shell gives back unchanged: each one quoted on its own."""
    return [shlex.quote(str(word)) for word in argv]


def _reader_unsets() -> str:
    """sh that unsets the remote login's variables which shape what Slurm prints (the names of
    :mod:`slurmlab.slurm.job_environment`), as the local runner drops them. Builtins only (``export -p``, one
    subshell, no program started): an ``env | sed`` pipeline cost 20 ms a command on a loaded login node. A
    line that is not a name (a value's own newline) is skipped; unset of a bad name would end the shell."""
    names = "|".join([*(f"{family}*" for family in READER_FAMILIES), *sorted(READER_SETTINGS)])
    return (
        "set -f; IFS='\n'; for l in $(export -p); do l=${l#export }; l=${l#declare -x }; n=${l%%=*}; "
        f'case $n in *[!A-Za-z0-9_]*) ;; {names}) unset "$n";; esac; done; '
        "IFS=' \t\n'; set +f"
    )


# the remote wrapper: unset what shapes the output, export the runner's variables, then run the argv; with a pid
# file name (not "-") it runs the argv as a child and writes its pid there, so a signal can reach it
# (see :mod:`slurmlab.slurm.ssh.relay`); its stdin is handed on explicitly (a background child's is /dev/null).
# A held salloc's (:func:`.lease.held_lease`) takes its lease name first ($l) and makes its lease file before
# salloc starts (:data:`.lease.LEASE_BEFORE`), then removes it after salloc if no holder named a job in it. The
# wrapper outlives a session that ends under it (measured: sshd signals nothing of a session without a terminal),
# so the file goes however salloc ends.
_WRAPPER_START = '{unsets}; n=$1; shift; while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n-1)); done; '
_WRAPPER_RUN = (
    'p=$1; shift; if [ "$p" = - ]; then exec "$@"; fi; '
    'f="${XDG_RUNTIME_DIR:-/tmp}/slurmlab-$p.pid"; exec 3<&0; "$@" <&3 3<&- & '
    'echo $! >"$f"; wait $!; rc=$?; rm -f "$f"; '
)


def _wrapper(held: bool) -> str:
    """The remote wrapper's script (``held``: of a held salloc, with its lease lines)."""
    start = _WRAPPER_START.format(unsets=_reader_unsets())
    if not held:
        return start + _WRAPPER_RUN + "exit $rc"
    return f"{start}l=$1; shift; {LEASE_BEFORE}; {_WRAPPER_RUN}{LEASE_AFTER}; exit $rc"


# a signal sent as the command starts may come before its pid is written: wait up to 2 s for the file
_KILL = (
    'f="${XDG_RUNTIME_DIR:-/tmp}/slurmlab-$2.pid"; i=0; while [ ! -s "$f" ] && [ $i -lt 20 ]; do sleep 0.1; '
    'i=$((i+1)); done; kill -s "$1" "$(cat "$f" 2>/dev/null)" 2>/dev/null'
)


def _private_dir(base: str | None = None) -> Path:
    """A folder only this user can enter, for the control sockets and the askpass socket (in ``base``, else
    XDG_RUNTIME_DIR, else the temporary folder)."""
    base = base or os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    me = os.geteuid()  # this machine's user, not the cluster's (slurmlab.slurm.identity.current_uid over SSH)
    folder = Path(base) / f"slurmlab-ssh-{me}"
    folder.mkdir(mode=0o700, exist_ok=True)
    st = folder.lstat()
    if not folder.is_dir() or folder.is_symlink() or st.st_uid != me or st.st_mode & 0o077:
        raise SlurmlabError(
            f"{folder} is not a private folder of this user (mode {st.st_mode & 0o777:o})",
            hint=f"remove it (rm -r {folder}); slurmlab makes it again with mode 700",
        )
    return folder


Ask = Callable[[str], str]


def ask_in_notebook(prompt: str) -> str:
    """Ask the person at the notebook, without echo (in a kernel, getpass is a password field)."""
    import getpass

    return getpass.getpass(prompt)


@dataclass
class SshLink:
    """One multiplexed OpenSSH connection to a cluster's login node.

    ``options``: extra ``-o NAME=VALUE`` for ssh (a test's ``UserKnownHostsFile``, ``IdentityFile``);
    ``config``: an ssh_config file in place of ``~/.ssh/config``; ``ask``: how a prompt (passphrase, password,
    one-time code) is answered, by default a password field in the notebook; ``lease``: how many seconds the
    link may stay down before the cluster releases the allocations held over it (:mod:`.lease`).
    """

    target: SshTarget
    options: Mapping[str, str] = field(default_factory=dict)
    config: str | None = None
    ask: Ask = field(default=ask_in_notebook, compare=False, repr=False)
    ssh: str = "ssh"
    lease: float = field(default=DEFAULT_LEASE, compare=False)
    _folder: Path | None = field(default=None, init=False, repr=False, compare=False)
    # the login's uid and name on the cluster (its `id`), learnt at connect: whose jobs are "mine" there
    remote_user: tuple[int, str] | None = field(default=None, init=False, repr=False, compare=False)
    # since when (time.time()) commands find the link down; None while it works (and before it first tried)
    down_since: float | None = field(default=None, init=False, repr=False, compare=False)
    _reconnecting: threading.Thread | None = field(default=None, init=False, repr=False, compare=False)
    _given_up: bool = field(default=False, init=False, repr=False, compare=False)  # the login needs a person
    _closed: bool = field(default=False, init=False, repr=False, compare=False)  # disconnect() was asked
    _ever_up: bool = field(default=False, init=False, repr=False, compare=False)  # its master was up once
    _looking: threading.Thread | None = field(default=None, init=False, repr=False, compare=False)
    _looked_at: float | None = field(default=None, init=False, repr=False, compare=False)  # time.monotonic()
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _leases: LeaseKeeper | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def to(cls, url: str, **kwargs: object) -> SshLink:
        return cls(SshTarget.parse(url), **kwargs)  # type: ignore[arg-type]

    # ---- the ssh command line ---------------------------------------------------------------------
    @property
    def control_path(self) -> str:
        if "ControlPath" in self.options:  # the caller's own (a test's private folder)
            return self.options["ControlPath"]
        if self._folder is None or not self._folder.is_dir():  # made again where it went away
            self._folder = _private_dir()
        # a hash of the address: short enough for a socket's path limit (104 bytes on macOS), and a name this
        # class knows, so a socket its dead master left behind can be cleared (ssh's %C would hide it)
        name = hashlib.sha256(self.target.url().encode()).hexdigest()[:24]
        if (
            len(str(self._folder / name)) > CONTROL_PATH_ROOM
        ):  # a deep XDG_RUNTIME_DIR: the master never starts
            self._folder = _private_dir(tempfile.gettempdir())
        return str(self._folder / name)

    def _common(self) -> list[str]:
        argv = [self.ssh]
        if self.config:
            argv += ["-F", self.config]
        if self.target.port:
            argv += ["-p", str(self.target.port)]
        for name, value in self.options.items():
            if name != "ControlPath":
                argv += ["-o", f"{name}={value}"]
        return argv + [
            "-S",
            self.control_path,
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o",
            "LogLevel=ERROR",
        ]

    def command(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, *, pid_name: str = "-"
    ) -> list[str]:
        """The local argv that runs ``argv`` on the cluster through the master, with ``env`` exported there.

        A session that finds no master does not prompt (``BatchMode``): it logs in by key or agent, or fails
        and :func:`link_failure` says to connect again."""
        assigned = [f"{k}={v}" for k, v in (env or {}).items()]
        lease = held_lease(argv)
        words = ["sh", "-c", _wrapper(lease is not None), "slurmlab", str(len(assigned)), *assigned]
        words += [*([lease] if lease is not None else []), pid_name, *[str(a) for a in argv]]
        return [*self._session(), self.target.destination, "--", *remote_words(words)]

    def _session(self) -> list[str]:
        """ssh's options for one more session on the master. Without a master it does not log in anew
        (``ProxyCommand=false`` ends the connection it would open): a poller asking every second would log in
        every second, which a login node's sshd limits and fail2ban take for an attack, and a 2FA login cannot
        be made without a prompt anyway. It fails at once, and :meth:`failure` says the link is down and
        reconnects the master."""
        return [
            *self._common(),
            "-o",
            "ControlMaster=no",
            "-o",
            "BatchMode=yes",
            "-o",
            "ProxyCommand=false",
            "-T",
        ]

    def kill_command(self, pid_name: str) -> list[str]:
        """The argv that signals the remote process of :meth:`command` with ``pid_name`` (signal name last)."""
        return [
            *self._session(),
            self.target.destination,
            "--",
            *remote_words(["sh", "-c", _KILL, "slurmlab"]),
        ]

    def relayed(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """The local argv of a background command (salloc, a step) whose signals reach the remote process:
        :mod:`slurmlab.slurm.ssh.relay` runs ssh and turns SIGINT/SIGTERM/SIGHUP into a remote ``kill``."""
        name = uuid.uuid4().hex
        return ssh_relay.relay_argv(self.command(argv, env, pid_name=name), [*self.kill_command(name), name])

    # ---- the lease of held allocations (see :mod:`.lease`) -------------------------------------------
    def hold_command(self) -> list[str]:
        """The remote command a held salloc runs over this link: it releases the job when the link stays down
        past :attr:`lease` with no kernel to renew it, and at once when the kernel lets go over a working link."""
        with self._lock:
            if self._leases is None:
                self._leases = LeaseKeeper(self.lease, self._run_quietly)
            keeper = self._leases
        return holder_argv(keeper.new(), self.lease)

    def let_go(self, held_argv: Sequence[str]) -> bool:
        """The held salloc running ``held_argv`` is let go on purpose (a detach): the job must outlive salloc and
        the lease (:meth:`.lease.LeaseKeeper.let_go`); False when the link could not say so to the cluster."""
        keeper = self._leases
        try:
            return keeper.let_go(held_argv) if keeper is not None else True
        except (
            OSError,
            subprocess.SubprocessError,
            SlurmlabError,
        ):  # no ssh, its folder gone: not said there
            return False

    def lease_words(self) -> str | None:
        """When the cluster releases what this link's leases hold, if the link stays down (None: nothing held)."""
        keeper = self._leases
        return keeper.words() if keeper is not None else None

    def _run_quietly(self, argv: Sequence[str]) -> subprocess.CompletedProcess[bytes] | None:
        if self._closed:
            return None
        return subprocess.run(
            self.command(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CONNECT_TIMEOUT * 3,
            env=self.environ(os.environ),
        )

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """The local environment of ssh: prompts go to :mod:`slurmlab.slurm.ssh.askpass`, never a terminal."""
        env = dict(base)
        try:
            env.update(ssh_askpass.environment(self._askpass_socket()))
        # the private folder went away (a logout cleans XDG_RUNTIME_DIR), and the master with it
        except OSError as exc:
            raise SshLinkError(
                f"the link to {self.target.url()} is down: its private folder "
                f"{Path(self.control_path).parent} is gone ({exc.strerror})",
                hint=connect_again(self.target),
            ) from None
        return env

    def _askpass_socket(self) -> str:
        return str(Path(self.control_path).parent / f"askpass-{os.getpid()}.sock")

    # ---- the master connection --------------------------------------------------------------------
    def connected(self) -> bool:
        """Whether the master connection is up (``ssh -O check``: local, no round trip)."""
        proc = subprocess.run(
            [*self._common(), "-O", "check", self.target.destination],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CONNECT_TIMEOUT,
            env=dict(os.environ),
        )
        return proc.returncode == 0

    def connect(self, *, timeout: float = 120.0) -> None:
        """Log in once and keep the connection (a no-op when it is up); prompts go to ``ask``.
        :class:`SshLinkError` says why when it fails (the state is then as it was: a closed link stays closed)."""
        if self.connected():
            # a master another process started for this address (an earlier kernel's): who the login is there
            # is learnt over it all the same, or this process would take its own uid for the cluster's
            if self.remote_user is None:
                self._check_quoting()
            self._back_up(reopen=True)
            return
        with (
            ssh_askpass.Listener(self._askpass_socket(), self.ask) as listener,
            tempfile.TemporaryFile() as err,
        ):
            # the master stays in the background holding its stderr: read it from a file, not a pipe
            proc = subprocess.Popen(
                self._master_argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=self.environ(os.environ),
                start_new_session=True,  # no terminal of the kernel's: every prompt goes to askpass
            )
            rc = listener.serve_until(proc, timeout)
            err.seek(0)
            stderr = err.read().decode("utf-8", "replace")
        if rc != 0:
            raise link_failure(
                self.target, rc if rc is not None else SSH_FAILED, stderr, connecting=True
            ) or SshLinkError(f"could not connect to {self.target.url()} (ssh exited {rc})", stderr=stderr)
        if not self.connected():
            raise SshLinkError(
                f"logged in to {self.target.url()}, but the shared connection did not start",
                hint="check that the folder of the control socket is writable and its path short "
                f"({self.control_path})",
                stderr=stderr,
            )
        self._check_quoting()
        self._back_up(reopen=True)

    def _master_argv(self, *extra: str) -> list[str]:
        # a master killed outright leaves its socket: a new master would then run without one ("already
        # exists, disabling multiplexing"), out of reach of -O exit, and every command would log in anew
        if "%" not in self.control_path:
            Path(self.control_path).unlink(missing_ok=True)
        return [
            *self._common(),
            *extra,
            "-M",
            "-N",
            "-f",
            "-o",
            "ControlPersist=yes",
            "-o",
            f"ServerAliveInterval={ALIVE_INTERVAL}",
            "-o",
            f"ServerAliveCountMax={ALIVE_COUNT}",
            self.target.destination,
        ]

    # ---- a link that went down: said with since when, reconnected in the background ----------------
    @property
    def state(self) -> LinkState:
        """Where the link stands, as its own bookkeeping knows it (no ssh is run): set by a login, a command
        that found the link down, the background reconnect, :meth:`look_in_background` and :meth:`disconnect`."""
        with self._lock:
            return self._state_now()

    def _state_now(self) -> LinkState:  # with self._lock held
        if self._closed:
            return LinkState.CLOSED
        if self._given_up:
            return LinkState.NEEDS_LOGIN
        if self.down_since is None:
            return LinkState.UP if self._ever_up else LinkState.NOT_CONNECTED
        return LinkState.RECONNECTING if self._ever_up else LinkState.CONNECTING

    def failure(self, returncode: int, stderr: str) -> SshLinkError | None:
        """What a command's exit over this link means (:func:`link_failure`). A link found down is said as
        "down since HH:MM; reconnecting" (the same words each time, so a poller says it once) and its master is
        started again in the background, without prompts, with back-off; jobs are not touched meanwhile."""
        return link_failure(self.target, returncode, stderr, master_up=self.connected, down=self._went_down)

    def connect_in_background(self) -> None:
        """Start the master in the background as a link found down is (:meth:`failure`): with the keys and agent
        alone (no prompt), sharing a master already up for the same address (a notebook's), again and again
        with back-off; :attr:`state` says how it goes. For a process with nobody to answer a prompt (the
        server). A closed link stays closed (:meth:`connect` opens it again)."""
        self._mark_down()

    def down_words(self) -> str | None:
        """The link's state in the words a command that finds it down says (with since when, and when the
        cluster releases what its leases hold); None while it is up or before it first tried."""
        with self._lock:
            state, since = self._state_now(), self.down_since
        if since is None:
            return None
        lease = self.lease_words()
        return (
            f"the link to {self.target.url()} is down since {time.strftime('%H:%M', time.localtime(since))}; "
            + _DOWN_WORDS.get(state, "reconnecting")
            + (f"; {lease}" if lease else "")
        )

    def _went_down(self) -> SshLinkError:
        self._mark_down()
        return SshLinkError(
            self.down_words() or f"the link to {self.target.url()} is down",
            hint="jobs on the cluster were not touched and are watched again once it is back; to connect "
            f"again yourself: %slurm use {self.target.url()}",
        )

    def _mark_down(self) -> None:
        """Down since now (unless already), and the background reconnect started (unless closed, given up or
        already running)."""
        with self._lock:
            if self.down_since is None:
                self.down_since, self._given_up = time.time(), False
            if self._state_now() in (LinkState.CLOSED, LinkState.NEEDS_LOGIN):
                return
            if self._reconnecting is None or not self._reconnecting.is_alive():
                self._reconnecting = threading.Thread(
                    target=self._reconnect, name="slurmlab-ssh-reconnect", daemon=True
                )
                self._reconnecting.start()

    def look_in_background(self, every: float) -> None:
        """Look again whether the master is up (``ssh -O check``) where the link's own bookkeeping cannot know:
        an up link nothing ran a command over since (its master may have died), or one that needs a login (a
        notebook's ``%slurm use`` may have started a master on the same socket). In a thread of its own, never
        the caller's (the server's event loop asks), one at a time and at most once per ``every`` seconds; what
        it finds is :attr:`state` from then on: a master gone starts the reconnect, one found up is up. A
        connecting or reconnecting link looks by itself (each try of the reconnect first checks)."""
        with self._lock:
            if self._state_now() not in (LinkState.UP, LinkState.NEEDS_LOGIN):
                return
            now = time.monotonic()
            if (self._looking is not None and self._looking.is_alive()) or (
                self._looked_at is not None and now - self._looked_at < every
            ):
                return
            self._looked_at = now
            self._looking = threading.Thread(target=self._look, name="slurmlab-ssh-look", daemon=True)
            self._looking.start()

    def _look(self) -> None:
        try:
            up = self.connected()
        except (OSError, subprocess.SubprocessError, SlurmlabError):  # no ssh, it hung, no private folder
            up = False
        state = self.state
        if up and state is LinkState.NEEDS_LOGIN:
            self._back_up()
        elif not up and state is LinkState.UP:
            self._mark_down()

    def _reconnect(self) -> None:
        """Start the master again, without prompts, until it is up (or the login needs a person, or
        :meth:`disconnect` was asked); waits 1, 2, 4 ... :data:`RECONNECT_MAX_WAIT` s between tries."""
        wait = 1.0
        while True:
            with self._lock:
                if self._closed or self.down_since is None:
                    return
            if (
                self.connected()
            ):  # up again by another hand (`%slurm use` of the same address shares the socket)
                self._back_up()
                return
            stderr = self._start_quietly()
            if stderr is None:
                self._back_up()
                if self._closed:  # disconnect() came while this master started: it goes too
                    self.disconnect()
                return
            if needs_a_person(stderr):
                with self._lock:  # a password, one-time code or host key needs the person at the notebook
                    self._given_up = True
                return
            time.sleep(wait)
            wait = min(wait * 2, RECONNECT_MAX_WAIT)

    def _start_quietly(self) -> str | None:
        """Start the master with the keys and agent alone (``BatchMode``: no prompt); None when it is up, else
        what ssh said."""
        env = {k: v for k, v in os.environ.items() if k not in ("SSH_ASKPASS", "SSH_ASKPASS_REQUIRE")}
        with tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.run(
                    self._master_argv("-o", "BatchMode=yes"),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    env=env,
                    timeout=CONNECT_TIMEOUT * 3,
                    start_new_session=True,
                )
            except subprocess.TimeoutExpired:
                return "the login did not finish in time"
            except OSError as exc:  # no ssh program (any more), or its folder went away: tried again later
                return f"ssh could not start: {exc}"
            err.seek(0)
            said = err.read().decode("utf-8", "replace")
        return None if proc.returncode == 0 and self.connected() else said or f"ssh exited {proc.returncode}"

    def _back_up(self, *, reopen: bool = False) -> None:
        """Up: a login (``reopen``: also a closed link's, by :meth:`connect`), a reconnect or a look found it."""
        with self._lock:
            if reopen:
                self._closed = False
            self.down_since, self._given_up, self._ever_up = None, False, True
            keeper = self._leases
        if keeper is not None:
            keeper.poke()  # the leases renewed at once: the time the link was down is not counted against them

    def _check_quoting(self) -> None:
        """The probe word comes back intact; in the same round trip, who the login is there (``id``)."""
        proc = subprocess.run(
            self.command(
                ["sh", "-c", 'printf "%s" "$1"; printf "\\0"; id -u; id -un', "slurmlab", QUOTING_PROBE]
            ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CONNECT_TIMEOUT * 3,
            env=self.environ(os.environ),
        )
        expected = QUOTING_PROBE.encode("utf-8", "surrogateescape")
        echoed, _, who = proc.stdout.partition(b"\0")
        words = who.decode("utf-8", "replace").split()
        if proc.returncode == 0 and echoed == expected and len(words) == 2 and words[0].isdigit():
            self.remote_user = (int(words[0]), words[1])
            return
        stderr = proc.stderr.decode("utf-8", "replace")
        trouble = link_failure(self.target, proc.returncode, stderr)
        self.disconnect()
        raise trouble or SshLinkError(
            f"the login shell on {self.target.host} changed an argument on its way (sent {expected!r}, "
            f"got {proc.stdout[:200]!r}): slurmlab cannot pass Slurm's arguments through it intact",
            hint="make a POSIX shell (bash, zsh, sh) the login shell of this account there, "
            "or ask the admins for one",
            stderr=stderr,
        )

    def master_pid(self) -> int | None:
        """The local pid of the master connection (``ssh -O check``), None when it is down."""
        proc = subprocess.run(
            [*self._common(), "-O", "check", self.target.destination],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CONNECT_TIMEOUT,
            env=dict(os.environ),
        )
        m = re.search(r"\(pid=(\d+)\)", proc.stderr)
        return int(m.group(1)) if proc.returncode == 0 and m else None

    def disconnect(self) -> None:
        """Close the master connection (sessions on it end; no reconnect); nothing on the cluster is cancelled."""
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # no master, no ssh: nothing to close
            subprocess.run(
                [*self._common(), "-O", "exit", self.target.destination],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=CONNECT_TIMEOUT,
                env=dict(os.environ),
            )

    def settings(self) -> dict[str, object]:
        """What recreates this link in another process (the guardian): no secret, only where and how."""
        return {
            "url": self.target.url(),
            "options": dict(self.options),
            "config": self.config,
            "lease": self.lease,
        }

    @classmethod
    def from_settings(cls, settings: Mapping[str, object]) -> SshLink | None:
        url, options, config = settings.get("url"), settings.get("options"), settings.get("config")
        lease = settings.get("lease")
        if not isinstance(url, str):
            return None
        return cls(
            SshTarget.parse(url),
            options={str(k): str(v) for k, v in options.items()} if isinstance(options, dict) else {},
            config=config if isinstance(config, str) else None,
            lease=float(lease) if isinstance(lease, (int, float)) and lease > 0 else DEFAULT_LEASE,
        )


def wait_connected(link: SshLink, timeout: float) -> bool:
    """Whether ``link``'s master is up within ``timeout`` seconds (a test's helper for a master it cut)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if link.connected():
            return True
        time.sleep(0.1)
    return False
