"""Slurm from a laptop over SSH beside the same Slurm locally (issue 32's targets), on a real sshd on 127.0.0.1.

    python benchmarks/bench_ssh.py [--repeat 21] [--sallocs 7]

Needs root (a second Unix user, sshd's privilege separation), openssh-server and Slurm; ``--quick`` and a machine
without them give one skipped row that says why. Starts an sshd (:func:`slurmlab.testing.loopback_sshd.start_sshd`:
its own host key, a free loopback port, the user ``slurmlabssh<pid>`` logging in by key) and a one-node seed
sandbox that admits that user, then measures, each figure beside its baseline in the same run:

* a Slurm query over the link: ``squeue -h`` (with a few jobs queued) and ``sinfo``, medians of N through
  ``Runner(ssh=link)``, beside the same query through the local Runner as the same Unix user (a child process
  running as that user, timed in alternation with the link's). Target: 1.5 x local + one round trip, the round
  trip being the median of ``true`` over the link, timed in the same loop;
* ``%salloc`` to control over SSH: the magic through IPython until it returns the Allocation (the request checked
  against the cluster's cached inventory, salloc started in the background, its job id known), beside the same
  magic through the local runner (as root, the sandbox's owner). Target: < 0.2 s;
* a cut link -> the panel says so: while an allocation made as ``%salloc`` makes it (salloc held over the link)
  runs, the login node's sshd is stopped and the laptop's master connection killed (a dropped network, a login
  node rebooting); seconds until its panel says "the link ... is down since". Target: <= 5 s;
* a silent link -> the panel says so: the sshd process serving the connection is frozen (SIGSTOP: no answer and
  no reset, as a laptop's sleep or a dead Wi-Fi leaves a connection); ssh gives the connection up once its
  keep-alives go unanswered. Same target.

Everything started here (the sandbox, the sshd, the user, what that user runs) is removed on every exit Python
sees: a finished run, an exception, Ctrl-C or SIGTERM. A SIGKILL cannot be caught: the next start of a loopback
sshd then removes the orphaned user, and the sandbox's daemons must be stopped by hand
(``slurmlab sandbox down --dir /tmp/slsb-bench-ssh-*/sb``). The whole module takes under a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row, terminate_as_exit

ROOT = Path(__file__).resolve().parents[1]
GROUP = "from a laptop over SSH (issue 32)"
REPEAT = 21
WARMUP = 2
SALLOCS = 7
BATCH_JOBS = 8  # queued for squeue to list: the seed node runs some, the rest pend
SALLOC_LINE = "--new -N 1 -t 5 --gpus=1"  # --new: each %salloc submits, none returns an earlier live one
DOWN_WORDS = "is down since"
PANEL_WAIT_S = 30.0  # how long a panel may take to say the link is down before the row reads inf
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

# The local Runner as the link's user: reads argv lists (JSON, one a line), runs each and answers
# [seconds, returncode, stdout] (the time taken inside, so that the pipe is not counted).
LOCAL_AS_USER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from slurmlab.slurm.runner import Runner

runner = Runner(slurm_conf=sys.argv[2], timeout=30)
for line in sys.stdin:
    argv = json.loads(line)
    t0 = time.perf_counter()
    done = runner.run(argv, check=False)
    took = time.perf_counter() - t0
    print(json.dumps([took, done.returncode, done.stdout + done.stderr[-300:]]), flush=True)
"""


def skip_reason() -> str | None:
    from slurmlab.testing.loopback_sshd import ssh_missing_reason
    from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

    return ssh_missing_reason() or slurm_missing_reason()


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _until(what: Callable[[], object], limit: float, every: float = 0.02) -> float:
    """Seconds until ``what()`` holds, inf after ``limit``."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if what():
            return time.monotonic() - start
        time.sleep(every)
    return float("inf")


class LocalAsUser:
    """The local Runner in a child process running as ``user`` (with the system's python3: root's interpreter
    may sit in a folder the user cannot enter), the same query locally as the link's user."""

    def __init__(self, user: str, conf: str, path: str) -> None:
        entry = pwd.getpwnam(user)
        python = shutil.which("python3", path=SYSTEM_PATH)
        if python is None:
            raise RuntimeError(
                f"no python3 in {SYSTEM_PATH} for the user {user} to run the local Runner with"
            )
        self.user = user
        self.errors: IO[bytes] = tempfile.TemporaryFile()
        env = {
            "PATH": path,
            "HOME": entry.pw_dir,
            "USER": user,
            "LOGNAME": user,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.proc = subprocess.Popen(
            [python, "-c", LOCAL_AS_USER, str(ROOT), conf],
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            env=env,
            cwd=entry.pw_dir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
        )

    def run(self, argv: list[str]) -> tuple[float, str]:
        """Seconds the local Runner took for ``argv`` as the user, and what it printed."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(10)
            self.errors.seek(0)
            said = self.errors.read().decode("utf-8", "replace").strip().splitlines() or ["nothing"]
            raise RuntimeError(
                f"the local Runner as {self.user} stopped (exit {self.proc.returncode}): {said[-1]}"
            )
        took, rc, out = json.loads(line)
        if rc != 0:
            raise RuntimeError(f"{' '.join(argv)} as {self.user} locally exited {rc}: {out.strip()[-300:]}")
        return float(took), str(out)

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.errors.close()


def query_rows(remote: Any, user: str, repeat: int, size: str) -> list[Row]:
    """``squeue -h`` and ``sinfo`` over the link beside the local Runner as the same user."""
    ssh = remote.runner(timeout=30)
    jobs = [
        ssh.run(["sbatch", "--parsable", "-t", "10", "--wrap", "sleep 600"]).stdout.strip().split(";")[0]
        for _ in range(BATCH_JOBS)
    ]
    local = LocalAsUser(user, str(remote.conf_path), remote.path)
    rows = []
    try:
        for argv in (["squeue", "-h"], ["sinfo"]):
            ours, theirs, trips = [], [], []
            lines = 0
            for i in range(WARMUP + repeat):
                took, out = local.run(argv)
                over = _timed(partial(ssh.run, argv))
                trip = _timed(partial(ssh.run, ["true"]))
                if i >= WARMUP:
                    theirs.append(took)
                    ours.append(over)
                    trips.append(trip)
                lines = len(out.splitlines())
            value, base, rtt = (statistics.median(x) for x in (ours, theirs, trips))
            rows.append(
                Row(
                    GROUP,
                    f"`{' '.join(argv)}` over the link (Runner(ssh=...), median of {repeat})",
                    _ms(value),
                    "ms",
                    target=_ms(1.5 * base + rtt),
                    baseline=_ms(base),
                    baseline_name=f"the local Runner as the same user ({user})",
                    size=size,
                    note=f"target 1.5 x local + one round trip (`true` over the link: {_ms(rtt):g} ms); "
                    f"{lines} lines printed; timed in alternation",
                )
            )
    finally:
        local.close()
        ssh.run(["scancel", *jobs], check=False)
    return rows


def salloc_rows(sandbox: Any, remote: Any, repeat: int, size: str) -> list[Row]:
    """``%salloc`` through IPython until it returns, over the link and locally, in alternation."""
    from IPython.core.interactiveshell import InteractiveShell

    from slurmlab.slurm.poller import get_poller
    from slurmlab.slurm.runner import set_runner

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "slurmlab")
    runners = {"ssh": remote.runner(timeout=60), "local": sandbox.runner(timeout=60)}
    # the link's first: the cluster's shared poller and cached inventory are then the link's, as on a laptop
    old = set_runner(runners["ssh"])
    made: list[Any] = []

    def once(which: str) -> float:
        set_runner(runners[which])
        t0 = time.perf_counter()
        alloc = shell.run_line_magic("salloc", SALLOC_LINE)
        took = time.perf_counter() - t0
        made.append(alloc)
        alloc.cancel()
        return took

    try:
        # warm-ups: the first %salloc fetches the inventory (cached per slurm.conf: both runners' at once)
        once("ssh")
        once("local")
        ours, theirs = [], []
        for _ in range(repeat):
            theirs.append(once("local"))
            ours.append(once("ssh"))
    finally:
        for alloc in made:
            with contextlib.suppress(Exception):  # one cancelled already, or a link that failed
                alloc.cancel()
        get_poller(runners["ssh"]).stop()  # the cluster's shared one: its link closes with over_ssh
        set_runner(old)
        shell.run_line_magic("unload_ext", "slurmlab")
    return [
        Row(
            GROUP,
            f"`%salloc` to control over SSH (the magic returns the Allocation, median of {repeat})",
            round(statistics.median(ours), 3),
            "s",
            target=0.2,
            baseline=round(statistics.median(theirs), 3),
            baseline_name="the same magic through the local runner",
            size=size,
            note=f"%salloc {SALLOC_LINE}; inventory cached (warm); each cancelled after; "
            + ", ".join(f"{x * 1000:.0f} ms" for x in ours),
        )
    ]


def _sshd_sessions(user: str) -> list[int]:
    """The sshd processes serving ``user``'s connections ("sshd: user@notty", "sshd-session: ..." in OpenSSH
    9.8+): they carry the connection's traffic, keep-alive answers included."""
    listed = subprocess.run(["pgrep", "-u", user, "-f", "^sshd"], capture_output=True, text=True, timeout=30)
    return [int(pid) for pid in listed.stdout.split()]


class Cut:
    """A link of its own (its own master) to ``server``, and allocations held over it as %salloc holds them."""

    def __init__(self, sandbox: Any, server: Any, path: str) -> None:
        from slurmlab.slurm.inventory import forget_inventories
        from slurmlab.slurm.poller import JobPoller
        from slurmlab.slurm.runner import Runner

        # the cluster's cached inventory is kept per slurm.conf, not per link: the one cached so far was fetched
        # over over_ssh's link, closed by now; this link's first %salloc-like submit fetches it again
        forget_inventories()
        self.server = server
        self.link = server.link()
        self.link.options = {**self.link.options, "ControlPath": str(server.folder / "cut")}
        self.link.connect()
        self.runner = Runner(slurm_conf=str(sandbox.conf_path), timeout=30, ssh=self.link, env={"PATH": path})
        self.poller = JobPoller(self.runner)  # the kernel's defaults
        self.made: list[Any] = []

    def running(self) -> Any:
        from slurmlab.slurm.allocation import Allocation

        alloc = Allocation.submit(["-N1", "-t", "5"], runner=self.runner, poller=self.poller)
        self.made.append(alloc)
        alloc.wait("RUNNING", timeout=120)
        return alloc

    def close(self) -> None:
        # the link back (it reconnects by itself), so that the cancels reach the cluster; what does not is
        # cancelled by the sandbox's owner afterwards
        _until(lambda: self.link.connected() and self.link.down_since is None, 20, every=0.5)
        for alloc in self.made:
            with contextlib.suppress(Exception):
                alloc.cancel()
        self.poller.stop()
        self.link.disconnect()


def said_down(alloc: Any) -> Callable[[], bool]:
    from slurmlab.widgets.panel import panel_html

    return lambda: DOWN_WORDS in panel_html(alloc)


def cut_row(cut: Cut, size: str) -> Row:
    from slurmlab.testing.loopback_sshd import resume_sshd, stop_sshd

    alloc = cut.running()
    said = said_down(alloc)
    unsettled = said()  # a panel still saying an earlier trouble of the link is not this cut's doing
    if unsettled:
        _until(lambda: not said(), 15, every=0.1)
    master = cut.link.master_pid()
    if master is None:
        raise RuntimeError("the link's master connection is not up: nothing to cut")
    began, began_wall = time.monotonic(), time.time()
    stop_sshd(cut.server)  # the login node is gone: no reconnect succeeds meanwhile
    try:
        early = said()  # whether stopping the server alone was enough
        killed = time.monotonic()
        os.kill(master, signal.SIGKILL)  # the laptop's connection with it
        after = _until(said, PANEL_WAIT_S)
        words, since = alloc.error or "", cut.link.down_since
    finally:
        resume_sshd(cut.server)
    marked = (
        "" if since is None else f"; the link marked down {since - began_wall:+.3f} s from the cut's start"
    )
    return Row(
        GROUP,
        "a cut link -> the panel says so (the login node's sshd stopped, the master connection killed)",
        round(killed - began + after, 4),
        "s",
        target=5.0,
        size=size,
        note=f"from the cut's start: sshd stopped in {(killed - began) * 1000:.0f} ms, then the master killed; "
        f"said {after * 1000:.0f} ms after the kill"
        + (" (already said once sshd had stopped)" if early else "")
        + (" (the panel said the link was down before the cut; waited for it to clear)" if unsettled else "")
        + f"{marked}; an allocation held over the link, RUNNING; said: {words[:100]!r}",
    )


def silent_row(cut: Cut, size: str) -> Row:
    from slurmlab.slurm.ssh.link import ALIVE_COUNT, ALIVE_INTERVAL

    name = "a silent link -> the panel says so (the connection's sshd frozen: no answer, no reset)"
    if _until(lambda: cut.link.connected() and cut.link.down_since is None, 60, every=0.5) == float("inf"):
        return Row(GROUP, name, float("inf"), "s", target=5.0, size=size, note="the link did not come back")
    alloc = cut.running()
    _until(lambda: not said_down(alloc)(), 15, every=0.1)  # the cut's words gone from the panel first
    frozen = _sshd_sessions(cut.server.user)
    if not frozen:
        raise RuntimeError(f"no sshd process of {cut.server.user}'s connection found to freeze")
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        took = _until(said_down(alloc), PANEL_WAIT_S)
        words = alloc.error or ""
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    return Row(
        GROUP,
        name,
        round(took, 4),
        "s",
        target=5.0,
        size=size,
        note=f"ssh gives a silent connection up after {ALIVE_COUNT + 1} unanswered keep-alives "
        f"{ALIVE_INTERVAL} s apart (ServerAliveInterval/ServerAliveCountMax); {len(frozen)} sshd process(es) "
        f"frozen; said: {words[:100]!r}",
    )


def _pids(*argv: str) -> list[int]:
    listed = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    return [int(pid) for pid in listed.stdout.split()]


def _undo_start(folder: Path) -> None:
    """What a start_sshd that failed half-way left: its sshd (found by this run's own config path), the user's
    processes and the user (each by its id or name, nothing broader)."""
    from slurmlab.testing.loopback_sshd import session_user

    for pid in _pids("pgrep", "-f", str(folder / "sshd_config")):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    user = session_user()
    with contextlib.suppress(KeyError):
        pwd.getpwnam(user)
        for pid in _pids("pgrep", "-u", user):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        subprocess.run(["userdel", "-r", user], capture_output=True, timeout=60)
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def loopback_sshd() -> Iterator[Any]:
    from slurmlab.testing.loopback_sshd import remove_sshd, start_sshd

    folder = Path(tempfile.mkdtemp(prefix="slurmlab-bench-sshd-"))
    try:
        server = start_sshd(folder)
    except BaseException:
        _undo_start(folder)
        raise
    try:
        yield server
    finally:
        remove_sshd(server)


@contextlib.contextmanager
def admitting_sandbox(user: str) -> Iterator[Any]:
    """A one-node seed sandbox that admits ``user`` (its folder passable by others; munge's stays closed)."""
    from slurmlab.sandbox import Sandbox

    base = Path(tempfile.mkdtemp(prefix="slsb-bench-ssh-", dir="/tmp"))
    try:
        base.chmod(0o755)
        sb = Sandbox.up(profile="seed", nodes=1, directory=base / "sb", admit=[user], accounting=False)
        try:
            yield sb
        finally:
            with contextlib.suppress(Exception):
                sb.runner().run(["scancel", "--user", user], check=False)
            sb.down()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(repeat: int = REPEAT, sallocs: int = SALLOCS) -> list[Row]:
    from slurmlab.testing.loopback_sshd import over_ssh

    with terminate_as_exit(), loopback_sshd() as server, admitting_sandbox(server.user) as sb:
        size = f"Slurm {sb.version[0]}.{sb.version[1]:02d}, sshd on 127.0.0.1"
        with over_ssh(sb, server) as remote:
            rows = query_rows(remote, server.user, repeat, size)
            rows += salloc_rows(sb, remote, sallocs, size)
            path = remote.path
        cut = Cut(sb, server, path)
        try:
            rows.append(cut_row(cut, size))
            rows.append(silent_row(cut, size))
        finally:
            cut.close()
        return rows


def measure(quick: bool = False) -> list[Row]:
    """The SSH rows on a sandbox behind a loopback sshd (skipped in --quick, and where root, sshd or Slurm are
    missing: the reason)."""
    if quick:
        return [
            Row(
                GROUP,
                "skipped in --quick (starts a sandbox, an sshd and a Unix user)",
                0.0,
                "",
                note="skipped",
            )
        ]
    reason = skip_reason()
    if reason:
        return [Row(GROUP, f"skipped: {reason}", 0.0, "", note="skipped")]
    return run()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=REPEAT, help="queries of each kind (medians)")
    ap.add_argument("--sallocs", type=int, default=SALLOCS, help="%%salloc of each kind (medians)")
    args = ap.parse_args()
    reason = skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    for row in run(args.repeat, args.sallocs):
        verdict = "-" if row.ok is None else "ok" if row.ok else "MISSED"
        print(
            f"{row.name}: {row.value:g} {row.unit} (target {row.target}; baseline {row.baseline} "
            f"{row.baseline_name}) {verdict} | {row.note}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
