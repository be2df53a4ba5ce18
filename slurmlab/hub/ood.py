"""The Open OnDemand shape: a batch script that starts ``jupyter lab`` inside a job, and how to reach it.

Open OnDemand's Jupyter app submits a script like :data:`SCRIPT`: on the node the job picks a free port and a
token, writes them where the portal (here :func:`launch`) reads them, and runs ``jupyter lab`` bound to that node;
the portal then offers a link to it. The session ends when its job ends (``scancel``, or the time limit).

    session = launch(sandbox, user="alice", gpus=2, runtime="30")   # a running job, its lab answering
    session.url       # http://127.0.0.1:PORT/lab?token=...
    stop(sandbox, session)
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shlex
import shutil
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from slurmlab.errors import SlurmlabError
from slurmlab.hub.control import user_python
from slurmlab.hub.settings import jupyter_paths
from slurmlab.sandbox import Sandbox
from slurmlab.slurm.identity import current_user
from slurmlab.slurm.job_queries import ACTIVE_STATES, brief_states, cancel_job
from slurmlab.slurm.runner import Runner

__all__ = ["JOB_NAME", "SCRIPT", "OodSession", "batch_script", "launch", "stop"]

JOB_NAME = "slurmlab-ood"
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"

# {python} and {folder} are filled in by batch_script (quoted); the rest is the node's shell
SCRIPT = """#!/bin/bash
#SBATCH --job-name={job_name}
#SBATCH --output={folder}/output.log
{directives}
set -euo pipefail
umask 077
export PYTHONPATH={pythonpath} JUPYTER_CONFIG_PATH={config_path} JUPYTER_PATH={data_path}
# a free port and a token, chosen on the node, where the portal reads them (only the user can)
port=$({python} -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export JUPYTER_TOKEN=$({python} -c 'import secrets; print(secrets.token_hex(24))')
printf '{{"host": "127.0.0.1", "port": %s, "token": "%s", "job": "%s"}}\\n' \\
    "$port" "$JUPYTER_TOKEN" "$SLURM_JOB_ID" > {folder}/connection.json.part
mv {folder}/connection.json.part {folder}/connection.json
exec {python} -m jupyterlab --no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port="$port" \\
    --ServerApp.port_retries=0 --ServerApp.root_dir="$HOME"{allow_root}
"""


@dataclass(frozen=True)
class OodSession:
    """A running session: its job, the user it runs as, and where its lab answers."""

    job_id: str
    user: str
    folder: str
    port: int
    token: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/lab?token={self.token}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def batch_script(
    folder: Path,
    *,
    gpus: int = 0,
    runtime: str = "30",
    partition: str = "",
    as_root: bool = False,
    python: str = sys.executable,
    pythonpath: str = "",
) -> str:
    """The session's batch script: the job's requests as ``#SBATCH`` lines, then jupyter lab on the node."""
    paths = jupyter_paths(sys.prefix)
    lines = [f"#SBATCH --time={runtime}"]
    if gpus:
        lines.append(f"#SBATCH --gpus={int(gpus)}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    return SCRIPT.format(
        job_name=JOB_NAME,
        folder=shlex.quote(str(folder)),
        directives="\n".join(lines),
        python=shlex.quote(python),
        pythonpath=shlex.quote(pythonpath),
        config_path=shlex.quote(paths["JUPYTER_CONFIG_PATH"]),
        data_path=shlex.quote(paths["JUPYTER_PATH"]),
        allow_root=" --allow-root" if as_root else "",  # jupyter refuses root unless told
    )


def launch(
    sandbox: Sandbox,
    user: str,
    *,
    gpus: int = 0,
    runtime: str = "30",
    partition: str = "",
    timeout: float = 120.0,
) -> OodSession:
    """Submit the session's script as ``user`` (``runuser``, when that is not us) and wait until its lab
    answers. A session that does not come up is cancelled, its output's end in the error."""
    entry = pwd.getpwnam(user)
    folder = Path(entry.pw_dir) / ".slurmlab" / "ood" / time.strftime("%Y%m%d-%H%M%S")
    me = current_user()
    prefix: list[str] = []
    if user != me:
        runuser = shutil.which("runuser") or shutil.which("runuser", path=_SBIN)
        if runuser is None:
            raise SlurmlabError("runuser (util-linux) is missing", hint="it submits the job as the user")
        prefix = [runuser, "-u", user, "--"]
        if user not in sandbox.admitted:
            sandbox.admit(*sandbox.admitted, user)
    _make_folder(folder, entry)
    runner = sandbox.runner()
    python, pythonpath = user_python([user], ("jupyterlab", "slurmlab"))
    script = batch_script(
        folder,
        gpus=gpus,
        runtime=runtime,
        partition=partition,
        as_root=entry.pw_uid == 0,
        python=python,
        pythonpath=pythonpath,
    )
    # the job takes the submitting environment (sbatch's --export=ALL): the user's own home and name, not ours
    as_user = {"HOME": entry.pw_dir, "USER": user, "LOGNAME": user}
    submitted = runner.run(
        [*prefix, "sbatch", "--parsable", f"--chdir={entry.pw_dir}"], input=script, env=as_user
    )
    job_id = submitted.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmlabError(f"sbatch printed no job id: {submitted.stdout.strip()[:200]!r}")
    try:
        return _wait_up(folder, job_id, user, timeout, runner)
    except BaseException:
        with contextlib.suppress(SlurmlabError):
            cancel_job(job_id, runner, only_mine=False)
        raise


def _make_folder(folder: Path, owner: pwd.struct_passwd) -> None:
    """``folder`` and the folders above it up to the user's home, made the user's own (mode 0700)."""
    home = Path(owner.pw_dir)
    for part in reversed([folder, *folder.parents]):
        if part == home or home not in part.parents:
            continue
        part.mkdir(mode=0o700, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(part, owner.pw_uid, owner.pw_gid)


def _wait_up(folder: Path, job_id: str, user: str, timeout: float, runner: Runner) -> OodSession:
    deadline = time.monotonic() + timeout
    connection = folder / "connection.json"
    while time.monotonic() < deadline:
        brief = brief_states([job_id], runner).get(job_id)
        if brief is None or brief.state not in ACTIVE_STATES:
            break  # the job ended before its lab answered: its output says why
        if connection.exists():
            said = json.loads(connection.read_text(encoding="utf-8"))
            session = OodSession(job_id, user, str(folder), int(said["port"]), str(said["token"]))
            if _answers(session):
                return session
        time.sleep(0.5)
    log = folder / "output.log"
    tail = log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.exists() else "(no output yet)"
    raise SlurmlabError(
        f"the session's jupyter lab (job {job_id}) did not answer; its output ends:\n{tail}",
        hint="is the job still pending? squeue -j " + job_id,
    )


def _answers(session: OodSession) -> bool:
    url = f"http://127.0.0.1:{session.port}/api/status"
    req = urllib.request.Request(url, headers={"Authorization": f"token {session.token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as answer:  # our own loopback address
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def stop(sandbox: Sandbox, session: OodSession, *, timeout: float = 30.0) -> None:
    """Cancel the session's job (the portal ends the sessions it started) and wait until it is no longer active."""
    runner = sandbox.runner()
    with contextlib.suppress(SlurmlabError):  # already gone: nothing to cancel
        cancel_job(session.job_id, runner, only_mine=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        brief = brief_states([session.job_id], runner).get(session.job_id)
        if brief is None or brief.state not in ACTIVE_STATES:
            return
        time.sleep(0.5)
    raise SlurmlabError(f"job {session.job_id} is still active {timeout:.0f} s after its cancel")
