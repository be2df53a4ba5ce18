"""The lease that releases an allocation over SSH when the kernel is gone for good, and only then.

Locally, an allocation is held by its salloc running ``cat`` on a pipe only the kernel writes: however the kernel
ends, the pipe closes and salloc relinquishes the job (:mod:`slurmlab.slurm.allocation.salloc`). Over SSH that
pipe runs through the link, so the same ``cat`` also ends when the *link* ends: measured on the loopback sshd, a
cut link left a held job COMPLETED within a second, though the kernel lived on. And the kernel's local guardian
(:mod:`slurmlab.slurm.guardian`) cannot reach the cluster while the link is down. A link that is down must not
release anything; a kernel that died (or a laptop closed for good) while it was down must not hold GPUs forever.

Why a lease, and where it lives: the only thing the remote side can see of a kernel behind a dead link is that it
stops saying so. So:

- On the login node the held salloc runs :mod:`.holder` in place of ``cat`` (:meth:`~.link.SshLink.hold_command`).
  It is salloc's own command, so it lives exactly as long as the job's allocation there, needs no process of its
  own started over the link (no ``setsid`` daemon to find and end: salloc ends it with the job), and knows its
  job (``SLURM_JOB_ID``). When the kernel closes the pipe over a working link (a release), it ends at once, as
  ``cat`` did. When the SSH session ends under it instead, it holds on while its lease file
  (``~/.cache/slurmlab/leases/<name>`` there) is younger than the grace, then ``scancel --user=<itself>`` its job.
- A job still pending when the link drops is covered too. Measured on the loopback sshd (tests/integration/ssh/
  test_pending_link_drop.py): salloc outlives the session that ends under it while it waits (sshd signals
  nothing of a session without a terminal) and is granted later, and its holder starts then with the session
  gone. So the lease file is made when salloc starts, by the remote wrapper (:data:`LEASE_BEFORE`), and renewed
  while the job pends; the holder keeps its date. A link back within the lease finds the job running and held; a
  job granted after its lease ran out (the kernel gone) is cancelled as its holder starts, a second or two after
  the grant. Until its grant nothing runs on the login node for it: it waits in the queue (holding no node). A
  salloc that ends without a grant has its file removed by the wrapper (:data:`LEASE_AFTER`).
- The kernel renews every lease of a link (:class:`LeaseKeeper`): one ``touch`` over the master every
  :func:`renew_every` seconds for all of them, no Slurm RPC. A link that comes back within the grace renews them
  and nothing was cancelled; the new master renews the same files.
- The grace is generous by default (:data:`DEFAULT_LEASE`, 30 min: a laptop's sleep, a train's tunnel, a VPN
  reconnect) and set per link: ``SshLink(..., lease=7200)`` (seconds) or ``%slurm use ssh://… --lease 2:00:00``
  (:func:`parse_lease`: Slurm's own time formats, as ``salloc -t`` takes them).
- While the link is down, its words on the panel say when the cluster will release what it holds
  (:func:`lease_words`): "if it stays down past 14:32 the cluster releases job 12".

A clean kernel end over a working link still releases at once (the kernel cancels its jobs on the way out, and the
pipe's end ends the holder). The local guardian still cancels at once a job of a kernel killed over a working link.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from slurmlab.core.slurm.timefmt import parse_duration
from slurmlab.errors import ParseError, SlurmlabError

__all__ = [
    "DEFAULT_LEASE",
    "LEASE_FOLDER",
    "LEASE_FORMS",
    "MAX_LEASE",
    "LeaseKeeper",
    "held_lease",
    "holder_argv",
    "lease_expiry",
    "lease_words",
    "parse_lease",
    "renew_every",
]

DEFAULT_LEASE = 1800.0  # seconds a link may stay down before the cluster releases what a kernel held
LEASE_FOLDER = "~/.cache/slurmlab/leases"  # on the login node, in the login's own home
RENEW_MAX = 60.0  # a lease is renewed at least this often (seconds) while the link is up
# the longest lease taken: past it the panel's "if it stays down past HH:MM" would be a date years away (and
# past year 9999 no date at all); a link down that long holds GPUs nobody uses
MAX_LEASE = 366 * 86400.0
LEASE_FORMS = "a time as salloc -t takes it: minutes (45), MM:SS, HH:MM:SS (2:00:00) or D-HH[:MM] (1-00)"


def parse_lease(text: str) -> float:
    """Seconds of a lease written as Slurm writes a time limit (``salloc -t``): ``45`` (minutes), ``MM:SS``,
    ``HH:MM:SS``, ``D-HH[:MM[:SS]]``. ValueError in words for anything else, for no time at all, UNLIMITED (a
    lease must run out) or more than :data:`MAX_LEASE`."""
    shown = text.strip()
    shown = repr(shown if len(shown) <= 40 else shown[:40] + "…")
    try:
        seconds = parse_duration(text)
    except ParseError:
        raise ValueError(f"not a lease length: {shown} (give {LEASE_FORMS})") from None
    if seconds is None:
        raise ValueError(
            f"a lease must run out, {shown} never does: give {LEASE_FORMS} (the default is 30 minutes)"
        )
    if seconds <= 0:
        raise ValueError(
            f"a lease of no time ({shown}) would release at the link's first hiccup: give {LEASE_FORMS}"
        )
    if seconds > MAX_LEASE:
        raise ValueError(f"a lease of {shown} is over {MAX_LEASE / 86400:.0f} days: give {LEASE_FORMS}")
    return float(seconds)


def renew_every(lease: float) -> float:
    """How often a lease of ``lease`` seconds is renewed: four times within it, at least every minute."""
    return max(0.5, min(RENEW_MAX, lease / 4))


def lease_expiry(renewed_at: float, lease: float) -> float:
    """When (time.time()) a lease last renewed at ``renewed_at`` runs out, if nothing renews it again."""
    return renewed_at + lease


def lease_words(jobs: Sequence[str], renewed_at: float | None, lease: float) -> str | None:
    """What a panel adds to "the link is down since …" about the jobs the cluster will release; None when there
    are none (a pending job's holder has not named it yet) or no lease was renewed yet."""
    if not jobs or renewed_at is None:
        return None
    until = time.strftime("%H:%M", time.localtime(lease_expiry(renewed_at, lease)))
    which = f"job {jobs[0]}" if len(jobs) == 1 else "jobs " + ", ".join(jobs)
    return f"if it stays down past {until} the cluster releases {which}"


def holder_argv(name: str, lease: float) -> list[str]:
    """The remote command of a held salloc over SSH: :mod:`.holder`'s source run by the cluster's python3."""
    source = (Path(__file__).with_name("holder.py")).read_text()
    return ["python3", "-c", source, LEASE_FOLDER, name, repr(float(lease))]


_NAME = re.compile(r"[0-9a-f]{32}")  # what LeaseKeeper.new gives: a word safe in a path and a shell


def held_lease(argv: Sequence[str]) -> str | None:
    """The lease name of a held salloc's argv (one that ends with :func:`holder_argv`), else None."""
    words = [str(word) for word in argv[-6:]]
    if len(words) == 6 and words[:2] == ["python3", "-c"] and words[3] == LEASE_FOLDER:
        return words[4] if _NAME.fullmatch(words[4]) else None
    return None


# The lease lines of the remote wrapper of a held salloc (:meth:`.link.SshLink.command`), run with the lease name
# in $l. Before salloc starts, its lease file is made (empty: no job yet), dated then and renewed from then on, so
# a job still pending when the link drops is covered too: its holder, started at the grant, reads the lease's age
# from the last renewal, not from the grant. After salloc ended, a file that names no job (salloc withdrawn or
# refused before any grant) is removed; a holder removes its own.
LEASE_BEFORE = (
    'd="$HOME/.cache/slurmlab/leases"; (umask 077; mkdir -p "$d") && { [ -e "$d/$l" ] || : >"$d/$l"; }'
)
LEASE_AFTER = '[ -s "$d/$l" ] || rm -f "$d/$l"'


# the renewal on the login node: each named lease still there is touched and said with its job id (one line each);
# one whose holder ended (the job released or over) is absent and said by nothing
_RENEW = (
    'cd "$HOME/.cache/slurmlab/leases" 2>/dev/null || exit 0; for f in "$@"; do '
    '[ -f "$f" ] && touch -c "$f" && printf "%s %s\\n" "$f" "$(head -c 32 "$f" | tr -dc 0-9)"; done; exit 0'
)

# a detach: the lease file of a job that must outlive the kernel says so to its holder (holder.DETACHED)
_DETACH = 'f="$HOME/.cache/slurmlab/leases/$1"; if [ -f "$f" ]; then printf "detached\\n" >"$f"; fi'

Run = Callable[[Sequence[str]], "subprocess.CompletedProcess[bytes] | None"]


class LeaseKeeper:
    """The kernel's renewals of the leases of one link: names given by :meth:`new`, renewed in one session of the
    master every :func:`renew_every` seconds by a daemon thread (``background=False``: only by :meth:`renew`),
    forgotten once their holder ended."""

    def __init__(self, lease: float, run: Run, *, background: bool = True) -> None:
        self.lease = lease
        self.background = background
        self._run = run  # runs an argv on the login node; None when the link is down
        self._lock = threading.Lock()
        # lease name -> its job id once its holder named it, "" while its file names none, None until seen
        self._names: dict[str, str | None] = {}
        self.renewed_at: float | None = None  # the last renewal that reached the login node (time.time())
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def new(self) -> str:
        """A lease name for one more held salloc; starts the renewals."""
        name = uuid.uuid4().hex
        with self._lock:
            self._names[name] = None
            if self.background and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._loop, name="slurmlab-ssh-lease", daemon=True)
                self._thread.start()
        return name

    def jobs(self) -> list[str]:
        """The jobs the leases of this link hold (those whose holder started)."""
        with self._lock:
            return sorted({job for job in self._names.values() if job}, key=lambda j: (len(j), j))

    def words(self) -> str | None:
        """:func:`lease_words` for this link's jobs."""
        return lease_words(self.jobs(), self.renewed_at, self.lease)

    def renew(self) -> bool:
        """One renewal of every lease; False when the link did not carry it (then nothing is forgotten)."""
        with self._lock:
            names = list(self._names)
        if not names:
            return True
        proc = self._run(["sh", "-c", _RENEW, "slurmlab", *names])
        if proc is None or proc.returncode != 0:
            return False
        self.renewed_at = time.time()
        said = dict(
            line.split(" ", 1) for line in proc.stdout.decode("utf-8", "replace").splitlines() if " " in line
        )
        with self._lock:
            for name, job in list(self._names.items()):
                if name in said:
                    self._names[name] = said[name].strip() or job or ""
                elif job is not None:
                    del self._names[name]  # seen, now gone: its holder ended with the job, or no grant came
        return True

    def let_go(self, argv: Sequence[str]) -> bool:
        """The held salloc whose remote command is ``argv`` is let go on purpose (a detach): its holder is told
        to end salloc without a release, and its lease is no longer renewed. False when the link did not carry
        it (then its holder releases the job once the lease runs out, as for a kernel gone)."""
        name = next((word for word in argv if word in self._names), None)
        if name is None:
            return True  # not a lease of this link's
        proc = self._run(["sh", "-c", _DETACH, "slurmlab", name])
        with self._lock:
            self._names.pop(name, None)
        return proc is not None and proc.returncode == 0

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self._names:
                    self._thread = None
                    return
            try:
                self.renew()
            except (OSError, subprocess.SubprocessError, SlurmlabError):
                pass  # the link is down or its folder went away: the next round tries again
            self._wake.wait(renew_every(self.lease))
            self._wake.clear()

    def poke(self) -> None:
        """Renew now (the link is back)."""
        self._wake.set()
