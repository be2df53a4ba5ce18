"""What the teacher's view shows: the room, from one ``squeue`` of the class and one call of the hub's REST API.

    jobs = parse_room_queue(text_of(ROOM_QUEUE_ARGV))           # every active job, one line each
    room = build_room(seats, cap, hub_users, jobs, now)         # one SeatView per seat, in seat order
    html = render_room(room, cap, refresh=15)                   # the page (refreshes itself)

Nothing here runs anything: :mod:`.view` asks Slurm and the hub (at most once per refresh, whoever looks) and
hands the answers in. A student's pending job is *stuck* when the reason is of their own making: a request that
can never start (``never`` in :mod:`slurmlab.core.slurm.reasons`) or a per-user or per-job limit their own jobs
hit (``QOSMaxGRESPerUser``: over the seat's GPU cap). Waiting for the class's share, for resources or in line is
waiting, not being stuck. A seat is stuck too when the last cell run in its newest lesson notebook ended in an
error (:mod:`.notebooks` reads it; ``build_room`` is handed what it found).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from slurmlab.core import palette
from slurmlab.core.slurm.reasons import explain_reason, limit_parts, plain_reason
from slurmlab.errors import ParseError
from slurmlab.workshop.notebooks import LastCell

__all__ = [
    "ROOM_QUEUE_ARGV",
    "RoomJob",
    "SeatView",
    "build_room",
    "gpus_held",
    "own_making",
    "parse_room_queue",
    "render_room",
]

# every active job once, fields Slurm writes alone (no job name: free text its submitter chose); ":|" after a
# field is squeue's own separator with no width, so nothing is cut. tres-alloc is what a running job holds
# ("cpu=1,mem=1G,node=1,billing=1,gres/gpu=1"); a pending one's is what it asks for.
ROOM_QUEUE_ARGV: tuple[str, ...] = (
    "squeue",
    "-h",
    "-t",
    "PENDING,RUNNING,SUSPENDED,CONFIGURING,COMPLETING",
    "-O",
    "JobID:|,UserName:|,State:|,Reason:|,tres-alloc:|",
)
_FIELDS = 5
_GPU_TRES = re.compile(r"^gres/gpu(?::[^=]+)?=(\d+)$")


@dataclass(frozen=True)
class RoomJob:
    """One active job, as the class's squeue said it."""

    job_id: str
    user: str
    state: str
    reason: str
    gpus: int  # GPUs it holds (0 while it waits)


@dataclass
class SeatView:
    """One seat as the teacher sees it."""

    name: str
    server: str  # "running", "starting", "stopping" or "none"
    last_activity: datetime | None
    jobs: list[RoomJob] = field(default_factory=list)
    gpus: int = 0  # GPUs its running jobs hold
    # "<lesson>: <ename>: <evalue>" for an error in the last cell run, "job 12: <why, in words>" for each stuck job
    stuck: list[str] = field(default_factory=list)
    notebook_note: str = ""  # why the newest notebook was not read ("00-hello.ipynb: unreadable notebook")


def gpus_held(tres_alloc: str) -> int:
    """GPUs in a ``tres-alloc`` string: the untyped ``gres/gpu=N`` where Slurm writes it, else the typed ones
    summed (``gres/gpu:h100=2``)."""
    untyped = 0
    typed = 0
    for item in tres_alloc.split(","):
        m = _GPU_TRES.match(item.strip())
        if m is None:
            continue
        if ":" in item.split("=", 1)[0]:
            typed += int(m.group(1))
        else:
            untyped = max(untyped, int(m.group(1)))
    return untyped or typed


def parse_room_queue(text: str) -> list[RoomJob]:
    """The lines of :data:`ROOM_QUEUE_ARGV`'s output; a line of another shape raises ParseError naming it."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) < _FIELDS or not fields[0].strip():
            raise ParseError(
                "a line of the class's squeue",
                line[:200],
                hint="expected JOBID|USER|STATE|REASON|TRES: is squeue of another Slurm version on PATH?",
            )
        job_id, user, state, reason, tres = (f.strip() for f in fields[:_FIELDS])
        # a pending job's tres-alloc is what it asks for (measured on 22.05): it holds nothing yet
        held = 0 if state == "PENDING" else gpus_held(tres)
        jobs.append(RoomJob(job_id, user, state, "" if reason == "None" else reason, held))
    return jobs


def own_making(reason: str) -> bool:
    """Whether a pending job waits for a reason of its owner's making: a request that can never start, or a
    limit on the owner's own jobs (per user, per job, per node); not the class's or the account's share."""
    explained = explain_reason(reason)
    if explained is None:
        return False
    if explained.never:
        return True
    parts = limit_parts(reason)
    return parts is not None and parts["kind"] in ("Max", "Min") and parts["per"] != "PerAccount"


def _when(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def _server(user: Mapping[str, Any]) -> str:
    server = (user.get("servers") or {}).get("")
    if not isinstance(server, dict):
        return "none"
    if server.get("stopped") or server.get("pending") == "stop":
        return "stopping"
    return "running" if server.get("ready") else "starting"


def build_room(
    seats: Sequence[str],
    hub_users: Sequence[Mapping[str, Any]],
    jobs: Sequence[RoomJob],
    cells: Mapping[str, LastCell] | None = None,
) -> list[SeatView]:
    """One :class:`SeatView` per seat, in seat order: its server (from the hub's ``/users``), its last activity,
    its jobs (another user's are not the class's), the GPUs they hold, and whether it is stuck: an error in the
    last cell of its newest notebook (``cells``, from :class:`~.notebooks.LastCells`) or a stuck job."""
    cells = cells or {}
    by_name = {str(u.get("name")): u for u in hub_users if isinstance(u, Mapping)}
    room = []
    for name in seats:
        user = by_name.get(name, {})
        seat = SeatView(name, _server(user), _when(user.get("last_activity")))
        seat.jobs = [j for j in jobs if j.user == name]
        seat.gpus = sum(j.gpus for j in seat.jobs if j.state == "RUNNING")
        cell = cells.get(name)
        if cell is not None and cell.error:
            seat.stuck.append(cell.words())
        elif cell is not None:
            seat.notebook_note = cell.words()
        seat.stuck += [
            f"job {j.job_id}: {plain_reason(j.reason)}"
            for j in seat.jobs
            if j.state == "PENDING" and own_making(j.reason)
        ]
        room.append(seat)
    return room


def _ago(stamp: datetime | None, now: datetime) -> str:
    if stamp is None:
        return "never logged in"
    seconds = max(0, int((now - stamp).total_seconds()))
    if seconds < 60:
        return "active just now"
    if seconds < 3600:
        return f"active {seconds // 60} min ago"
    return f"active {seconds // 3600} h ago"


def _job_cell(job: RoomJob) -> str:
    words = f"job {job.job_id} {job.state.lower()}"
    if job.state == "RUNNING" and job.gpus:
        words += f", {job.gpus} GPU(s)"
    if job.state == "PENDING" and job.reason:
        words += f": {plain_reason(job.reason)}"
    return f'<li data-job-id="{html.escape(job.job_id)}">{html.escape(words)}</li>'


_STYLE = (
    "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
    f"td,th{{border:1px solid {palette.RULE};padding:.3em .6em;vertical-align:top;text-align:left}}"
    f"tr.stuck{{background:{palette.FLAGGED_BACKGROUND}}}ul{{margin:0;padding-left:1.1em}}"
    f".note{{color:{palette.INK_SOFT};font-size:90%}}.trouble{{color:{palette.FAILED}}}"
)


def render_room(
    room: Sequence[SeatView],
    cap: int,
    *,
    refresh: int,
    now: datetime,
    asked: datetime | None,
    trouble: str = "",
) -> str:
    """The teacher's page: one row per seat (server, activity, jobs and why they wait, GPUs held of the cap,
    stuck or not), the class's GPUs in use, when Slurm was last asked; it reloads itself every ``refresh`` s."""
    rows = []
    for seat in room:
        jobs = "".join(_job_cell(j) for j in seat.jobs) or "<li>no job</li>"
        stuck = "; ".join(seat.stuck)
        note = f' <span class="note">{html.escape(seat.notebook_note)}</span>' if seat.notebook_note else ""
        rows.append(
            f'<tr class="seat{" stuck" if stuck else ""}" data-seat="{html.escape(seat.name)}">'
            f"<td>{html.escape(seat.name)}</td>"
            f'<td class="server">{html.escape(seat.server)}</td>'
            f'<td class="activity">{html.escape(_ago(seat.last_activity, now))}</td>'
            f'<td class="gpus">{seat.gpus} of {cap}</td>'
            f'<td class="jobs"><ul>{jobs}</ul></td>'
            f'<td class="stuck-why">{html.escape("stuck: " + stuck) if stuck else ""}{note}</td></tr>'
        )
    in_use = sum(s.gpus for s in room)
    logged = sum(1 for s in room if s.server != "none")
    stuck_count = sum(1 for s in room if s.stuck)
    when = asked.astimezone(timezone.utc).strftime("%H:%M:%S UTC") if asked else "not yet"
    problem = f'<p class="trouble">{html.escape(trouble)}</p>' if trouble else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f'<meta http-equiv="refresh" content="{int(refresh)}">'
        f"<title>The room: {logged} of {len(room)} seats</title><style>{_STYLE}</style></head><body>"
        f"<h1>The room</h1>{problem}"
        f'<p class="summary">{logged} of {len(room)} seats have a server; the class holds {in_use} GPU(s) '
        f"(at most {cap} per student); {stuck_count} stuck.</p>"
        "<table><tr><th>seat</th><th>server</th><th>last seen</th><th>GPUs held</th><th>jobs</th>"
        f"<th>stuck</th></tr>{''.join(rows)}</table>"
        f'<p class="note">Slurm asked at {when}, at most once every {int(refresh)} s however many pages are '
        "open; this page reloads itself. A seat's last cell is read from the newest notebook of its lessons "
        "folder, again only once it is saved anew.</p></body></html>"
    )
