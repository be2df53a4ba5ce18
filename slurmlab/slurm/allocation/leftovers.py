"""The tag that names the process (and notebook) an allocation belongs to, and the jobs dead processes left.

Every allocation slurmlab submits carries ``--comment=slurmlab:<host>:<pid>:<notebook>:<random>``: a restarted
kernel finds the jobs of its predecessors by that tag and by whether the process it names still lives.
``<notebook>`` is a short hash of the notebook's path, which jupyter_server hands the kernel as
``JPY_SESSION_NAME`` (empty outside Jupyter), so that a notebook reopened after a crash lists its own jobs and
not every notebook's. Tags written before the notebook was part of them (``slurmlab:<host>:<pid>:<random>``)
are still read: their notebook is unknown.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import os
import socket
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT, JobBrief, parse_squeue_brief
from slurmlab.core.slurm.timefmt import format_duration
from slurmlab.slurm.query import Query, run_query
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = [
    "NOTEBOOK_ENV",
    "TAG_PREFIX",
    "Leftovers",
    "TagInfo",
    "find_leftovers",
    "live_jobs",
    "make_tag",
    "notebook_key",
    "parse_tag",
    "tagged_jobs",
]

TAG_PREFIX = "slurmlab"
NOTEBOOK_ENV = "JPY_SESSION_NAME"  # set by jupyter_server in the kernel's environment: the notebook's path
# the states in which a job holds or waits for resources: what "live" means to a user
_LIVE_STATES = "PENDING,CONFIGURING,RUNNING,COMPLETING,SUSPENDED,REQUEUED,RESIZING"


def notebook_key(session_name: str | None = None) -> str:
    """A short, stable name for the notebook this kernel serves ("" outside Jupyter).

    A hash, not the path: the comment is visible to every user of the cluster (``squeue -o %k``), and a
    path can hold anything, ``:`` included, which would break the tag's fields."""
    name = os.environ.get(NOTEBOOK_ENV, "") if session_name is None else session_name
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10] if name else ""


def make_tag() -> str:
    """A tag naming this process and notebook: ``slurmlab:<host>:<pid>:<notebook>:<random>``.

    The random part stays last: the default job name is ``slurmlab-<random>``."""
    return f"{TAG_PREFIX}:{socket.gethostname()}:{os.getpid()}:{notebook_key()}:{uuid.uuid4().hex[:8]}"


@dataclasses.dataclass(frozen=True)
class TagInfo:
    """What a tag says: the host and pid of the kernel, and its notebook (None: an old tag, unknown)."""

    host: str
    pid: int | None
    notebook: str | None


def parse_tag(comment: str | None) -> TagInfo | None:
    """The fields of a slurmlab tag (either layout), or None when ``comment`` is not one."""
    parts = (comment or "").split(":")
    if len(parts) not in (4, 5) or parts[0] != TAG_PREFIX:
        return None
    pid = int(parts[2]) if parts[2].isascii() and parts[2].isdigit() else None
    return TagInfo(parts[1], pid, parts[3] if len(parts) == 5 else None)


class Leftovers(list[Job]):
    """Jobs earlier kernels left: a list of Jobs that shows itself as a short table (id, state, node, GPUs,
    age) with how to attach or cancel one."""

    def rows(self, now: datetime | None = None) -> list[dict[str, str]]:
        now = now or datetime.now(timezone.utc)
        return [_row(j, now) for j in self]

    def text(self) -> str:
        if not self:
            return "no jobs left by earlier kernels"
        rows = self.rows()
        cols = ("job", "state", "nodes", "gpus", "age")
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
        lines = ["  ".join(c.upper().ljust(widths[c]) for c in cols).rstrip()]
        lines += ["  ".join(r[c].ljust(widths[c]) for c in cols).rstrip() for r in rows]
        lines.append(f"attach: %slurm attach {rows[0]['job']}   cancel: %scancel {rows[0]['job']}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        if not self:
            return "<div class='slurmlab-leftovers'>no jobs left by earlier kernels</div>"
        esc = html.escape
        cols = ("job", "state", "nodes", "gpus", "age")
        head = "".join(f"<th>{c}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{esc(r[c])}</td>" for c in cols) + "</tr>" for r in self.rows())
        first = esc(str(self[0].job_id))
        return (
            f"<div class='slurmlab-leftovers'><table><tr>{head}</tr>{body}</table>"
            f"<div>attach: <code>%slurm attach {first}</code> · cancel: <code>%scancel {first}</code></div></div>"
        )


def _row(job: Job, now: datetime) -> dict[str, str]:
    since = job.start_time or job.submit_time
    age = format_duration((now - since).total_seconds(), clamp=True) if since is not None else "-"
    gpus = " ".join(f"{a.node}:{','.join(map(str, a.gpu_indices))}" for a in job.gpu_allocs if a.gpu_indices)
    return {
        "job": str(job.job_id),
        "state": job.state,
        "nodes": job.nodelist or "-",
        "gpus": gpus or "-",
        "age": age,
    }


def find_leftovers(
    runner: Runner | None = None,
    *,
    include_alive: bool = False,
    notebook: str | None = None,
    exclude: Iterable[str] = (),
) -> Leftovers:
    """Jobs this user left from earlier kernels (tag ``slurmlab:``) whose process is gone, and jobs this process
    cancelled that hold or wait for resources again (a controller restart lost the cancel): nobody follows either.

    ``notebook`` (a :func:`notebook_key`) keeps only that notebook's jobs and those whose tag predates
    notebooks; ``exclude`` leaves out job ids (those this kernel already follows). Returns a
    :class:`Leftovers` list of Jobs; attach with ``%slurm attach ID`` / ``Allocation.attach(j.job_id)`` or
    cancel them. One cheap squeue finds the tags; only the jobs it keeps are read in detail.
    """
    from slurmlab.errors import JobNotFoundError, ParseError, RequestError
    from slurmlab.slurm import queries
    from slurmlab.slurm.allocation.release import LIVE
    from slurmlab.slurm.guardian import BACK_STATES

    runner = runner or get_runner()
    skip = {str(j) for j in exclude}
    released = LIVE.released_tags()
    found = Leftovers()
    host = socket.gethostname()
    for job_id, comment in tagged_jobs(runner):
        tag = parse_tag(comment)
        if job_id in skip or tag is None:
            continue
        if notebook is not None and tag.notebook not in (None, notebook):
            continue
        alive = tag.host == host and tag.pid is not None and _pid_alive(tag.pid)
        # its kernel lives, but asked for its cancel: the job is alive only because Slurm lost that cancel
        released_but_back = alive and comment in released
        if include_alive or not alive or released_but_back:
            try:
                job = queries.job_detail(job_id, runner)
            except JobNotFoundError:  # ended between the two calls
                continue
            except (
                RequestError,
                ParseError,
            ):  # not a job id, or a record that does not read: not ours to list
                continue
            if job.comment != comment:  # not the very job squeue named, but a line a comment forged
                continue
            if released_but_back and not include_alive and job.state not in BACK_STATES.split(","):
                continue  # the cancel still completing
            found.append(job)
    return found


def tagged_jobs(runner: Runner | None = None) -> list[tuple[str, str]]:
    """(job id, comment) of this user's live jobs whose comment is a slurmlab tag, in one cheap text call.

    ``--me`` is Slurm's own check of the owner (by uid); the comment is the line's last field, so spaces in
    someone's own comment cannot shift the id."""

    def parse(result: RunResult) -> list[tuple[str, str]]:
        pairs = []
        for line in result.stdout.splitlines():
            job_id, _, comment = line.strip().partition(" ")
            if job_id and comment.startswith(TAG_PREFIX + ":"):
                pairs.append((job_id, comment.strip()))
        return pairs

    query = Query(("squeue", "-h", "--me", "-t", _LIVE_STATES, "-o", "%i %k"), parse)
    return run_query(query, runner or get_runner())


def live_jobs(runner: Runner | None = None) -> list[JobBrief]:
    """This user's pending and running jobs, in one cheap text call (for "which allocations are there")."""

    def parse(result: RunResult) -> list[JobBrief]:
        return list(parse_squeue_brief(result.stdout))

    query: Query[list[JobBrief]] = Query(
        ("squeue", "-h", "--me", "-t", _LIVE_STATES, "-o", BRIEF_FORMAT), parse
    )
    return run_query(query, runner or get_runner())


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not reaped yet: state Z or X in /proc) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:
        return True  # as before: not a pid this host can name, never judged gone
    except PermissionError:
        pass  # someone else's process: alive unless /proc says it is a zombie
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False  # gone between the two looks
    except OSError:
        return True  # no /proc to ask: os.kill found it
    # the command name may hold spaces and parentheses: the state is the field after the last ')'
    fields = raw[raw.rfind(")") + 1 :].split()
    return not fields or fields[0] not in ("Z", "X")
