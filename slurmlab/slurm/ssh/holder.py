"""The command a held salloc runs on the login node over SSH: the allocation's guardian on the remote side.

Run there as ``python3 -c <this file's source> <lease folder> <lease name> <grace seconds>`` (stdlib only, no
slurmlab on the cluster), in place of the local hold's ``cat`` (see :mod:`slurmlab.slurm.ssh.lease` for why).
salloc starts it once the job is granted, with ``SLURM_JOB_ID`` set, its stdin the kernel's pipe through ssh.
Its lease file was made when salloc started (and renewed since, while the job pended): the holder writes the job
into it and keeps its date, so the lease's age is counted from the last renewal, not from the grant. A job granted
after its lease ran out (the link dropped while it pended and stayed down; the kernel died meanwhile) is cancelled
as soon as the holder starts, a second or two after the grant. A file it finds missing it makes, dated now.

- The kernel closes the pipe on purpose (a release) while the SSH session lasts: it ends at once, and salloc
  relinquishes the job, as the local ``cat`` makes it.
- The session ends under it (the link dropped, the laptop slept, the kernel died with the link down): it keeps
  holding, and cancels the job (``scancel --user=<its own user> <job>``) once the lease file was not renewed for
  ``grace`` seconds. The kernel renews the file over the link while it lives, a new master included.
- salloc ends it (SIGHUP) when the job ends (a scancel, the time limit); it removes its lease file as it goes.
- The kernel detached the allocation (it must outlive the kernel): the kernel writes :data:`DETACHED` into the
  lease file before it lets go of salloc; the holder then ends salloc with SIGKILL, which leaves salloc no time to
  relinquish the job (as a local detach does), and ends without a cancel.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

# after stdin's end: how long the session's other pipes get to close with it, when the session is what ended
SETTLE = 1.0
# how often the lease file's age is looked at while the link is down (a stat: no RPC)
CHECK_EVERY = 1.0
# what the kernel writes into the lease file of an allocation it detached
DETACHED = "detached"


def lease_expired(age: float | None, grace: float) -> bool:
    """Whether a lease ``age`` seconds old (None: its file is gone) has run out after ``grace`` seconds.

    A file removed by hand is no lease: it has run out too (the job would otherwise be held with no one to
    renew it)."""
    return age is None or age > grace


def session_gone(fd: int) -> bool:
    """Whether the reader of the pipe ``fd`` writes to (ssh's session, through sshd) is gone."""
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are always reported: a pipe whose reader closed says POLLERR
    return any(event & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, event in poller.poll(0))


def _age(path: str) -> float | None:
    try:
        return max(0.0, time.time() - os.stat(path).st_mtime)
    except OSError:
        return None


def _detached(path: str) -> bool:
    try:
        with open(path) as lease:
            return lease.read(64).strip() == DETACHED
    except OSError:
        return False


def _let_go(salloc: int) -> None:
    """The kernel detached the job: salloc, if still the one that started this process, goes without a word."""
    if os.getppid() == salloc and salloc > 1:
        try:
            os.kill(salloc, signal.SIGKILL)
        except OSError:
            pass


def _cancel(job: str) -> None:
    import pwd

    if not job.isdigit():
        return
    user = pwd.getpwuid(os.getuid()).pw_name  # --user: only a job of this login is ever cancelled
    try:
        subprocess.run(
            ["scancel", f"--user={user}", job],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass


def main(argv: Sequence[str]) -> int:
    folder, name, grace = os.path.expanduser(argv[0]), argv[1], float(argv[2])
    job = os.environ.get("SLURM_JOB_ID", "")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, os.path.basename(name))
    try:
        made = os.stat(path)  # made before salloc started, renewed since: its date is the lease's
    except OSError:
        made = None
    with open(path, "w") as lease:  # it names the job for the kernel's renewals
        lease.write(f"{job}\n")
    if made is not None:  # the grant is no renewal: a lease that ran out while the job pended stays run out
        os.utime(path, (made.st_atime, made.st_mtime))
    salloc = os.getppid()
    try:
        while os.read(0, 4096):  # the kernel writes nothing: this waits for the pipe's end
            pass
        time.sleep(SETTLE)
        if _detached(path):
            _let_go(salloc)
            return 0
        if not session_gone(2):
            return 0  # the kernel let go over a working link: release now
        # the session is gone: nothing may reach salloc's reader any more, and nothing of ours holds its pipes
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        while not lease_expired(_age(path), grace):
            if _detached(path):
                _let_go(salloc)
                return 0
            time.sleep(CHECK_EVERY)
        _cancel(job)
        return 0
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def _end(signum: int, frame: object) -> None:
    sys.exit(0)  # the lease file goes with it (main's finally)


if __name__ == "__main__":
    # salloc ends its command with SIGHUP (or SIGTERM) when the job ends
    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, _end)
    sys.exit(main(sys.argv[1:]))
