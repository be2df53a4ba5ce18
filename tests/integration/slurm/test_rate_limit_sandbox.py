"""The kernel's poller on a controller that rate-limits its user (issue 27, point 3), on a real slurmctld with
``SlurmctldParameters=rl_enable`` (a bucket of 10 requests, 5 more a second: room for the poller's own squeue
once a second, about 3 requests each, so that it can come back to its usual rate; at 1 a second it could not, and
stays backed off, as it should).

slurmctld exempts its SlurmUser and root from the limit, and the sandbox runs its daemons as the user who starts
it, so the poller runs as a second Unix user (needs root), with that user's own ``squeue`` loop beside it as a
neighbour draining the bucket (``watch squeue`` in a terminal). The poller must stretch its waits while its
answers come slowly, say so once, read the job RUNNING all along (never gone, never an error), come back to its
usual second when the neighbour stops, and see the job's cancel. Before, the runner's check of a command that had
not answered in 2 s asked ``scontrol ping``, which a refused user's ping answers "DOWN" at once: the poller's
squeue was stopped and the job's panel said the controller was down. 22.05 has no rate limit: skipped there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from slurmlab.sandbox import RateLimit, Sandbox
from slurmlab.sandbox.installed import daemon, detect_version
from slurmlab.sandbox.render import RATE_LIMIT_SINCE
from slurmlab.slurm.throttle import CALM_NOTE, RATE_LIMITED_NOTE
from slurmlab.testing.other_user import OTHER_USER, admit, as_user, ensure_user

pytestmark = [
    pytest.mark.sandbox,
    # serial: the neighbours must drain the token bucket faster than it refills, which a loaded machine (another
    # pytest worker beside it) can stop them from doing; the roots run the serial tests alone
    pytest.mark.serial,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="needs root: the limit spares root and the sandbox's own user"
    ),
]

REPO = Path(__file__).resolve().parents[3]

# Run as the second user: the poller watches the job while the user's own squeue loop drains the bucket for
# `busy` seconds, then alone until its waits are back to one second, then the job is cancelled (by the user).
_CHILD = r"""
import json, logging, sys, threading, time
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import Runner

job, busy = sys.argv[1], float(sys.argv[2])
runner = Runner(timeout=120)
said = []
class Said(logging.Handler):
    def emit(self, record):
        said.append(record.getMessage())
logging.getLogger("slurmlab.slurm.poller").addHandler(Said())
poller = JobPoller(runner, interval=1.0, node_check_interval=1e9)
seen = []
poller.watch(job, lambda u: seen.append(
    {"state": u.brief.state if u.brief else None, "gone": u.gone, "error": str(u.error) if u.error else None}))
end, factors = time.monotonic() + busy, []
polls_before = poller.polls
stop = threading.Event()
def neighbour():  # squeue as fast as it answers
    while not stop.is_set():
        runner.run(["squeue", "--me", "-h"], check=False)
# three at once: one squeue after another drains the bucket only where starting a process is quick (a loaded
# 2-core machine started too few to empty it: the 24.11 root then saw no back-off at all)
neighbours = [threading.Thread(target=neighbour) for _ in range(3)]
for t in neighbours:
    t.start()
while time.monotonic() < end:
    factors.append(poller.backoff.factor)
    time.sleep(0.2)
stop.set()
for t in neighbours:
    t.join()
polls_busy = poller.polls - polls_before
calm_by = time.monotonic() + 180  # the factor back to 1 (about 45 s), then a minute of quick answers
while poller.backoff.in_episode and time.monotonic() < calm_by:
    time.sleep(0.5)
calm = not poller.backoff.backing_off and not poller.backoff.in_episode
runner.run(["scancel", job])
ended_by = time.monotonic() + 60
while not (seen and seen[-1]["state"] in ("CANCELLED", "COMPLETED")) and time.monotonic() < ended_by:
    time.sleep(0.2)
poller.stop()
print(json.dumps({"seen": seen, "said": said, "max_factor": max(factors or [1.0]), "calm": calm,
                  "polls_busy": polls_busy}))
"""


@pytest.fixture(scope="module")
def limited() -> Any:
    version = detect_version(daemon("slurmctld"))
    if version < RATE_LIMIT_SINCE:
        pytest.skip(f"Slurm {version[0]}.{version[1]:02d} has no RPC rate limit (rl_enable came with 23.02)")
    # the second user must reach the munge socket and the child script: not under pytest's 0700 folder
    folder = Path(tempfile.mkdtemp(prefix="slurmlab-rl-", dir="/tmp"))
    folder.chmod(0o755)
    ensure_user(OTHER_USER)
    sb = Sandbox.up(
        profile="seed",
        directory=folder / "sb",
        rate_limit=RateLimit(bucket_size=10, refill_rate=5, refill_period=1),
        accounting=False,
    )
    try:
        admit(sb, OTHER_USER)
        yield sb
    finally:
        sb.down()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_kernel_poller_backs_off_under_the_rate_limit_and_stays_right(
    limited: Sandbox, tmp_path: Path
) -> None:
    runner = limited.runner(120)
    job = runner.run(
        as_user(OTHER_USER, ["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 600"]), timeout=120
    ).stdout.strip()
    script = limited.directory.parent / "child.py"
    script.write_text(_CHILD)
    script.chmod(0o644)
    env = {**os.environ, **limited.env(), "PYTHONPATH": str(REPO)}
    busy = 20
    done = subprocess.run(
        as_user(OTHER_USER, [sys.executable, str(script), job, str(busy)]),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    seen = got["seen"]
    assert got["max_factor"] >= 2.0, got  # it asked less often while throttled
    assert got["polls_busy"] < busy, got  # fewer squeue than one a second
    # one episode, said once and named (the sandbox's slurm.conf turns rl_enable on), ended once after a minute
    # of quick answers: the bucket refilling mid-load (the 24.11 root saw it: "rate-limiting" and "answers quickly
    # again" by turns within the 20 s, before the back-off had its hysteresis) does not end it
    said = [line for line in got["said"] if line.startswith("slurmlab: ")]
    assert said == [f"slurmlab: {RATE_LIMITED_NOTE}", f"slurmlab: {CALM_NOTE}"], said
    assert got["calm"], got  # back to its usual second once the neighbour stopped, the episode over
    assert not any(u["gone"] or u["error"] for u in seen), seen
    states = [u["state"] for u in seen]
    assert states[-1] == "CANCELLED", states
    assert set(states[:-1]) <= {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"}, (
        states
    )  # nothing in between but the truth
