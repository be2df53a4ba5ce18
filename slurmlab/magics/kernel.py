"""What the magics do to the kernel's session: find the allocation a magic means, follow (attach) a job, wait
for one to start, say which Slurm the kernel uses.

Every magic module reaches these here, never through another magic module; so each magic module is a leaf
that ``%load_ext`` declares lazily and IPython imports on the first use of one of its magics. A function
without ``session`` works on the running shell's (``Session.of()``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from IPython.core.error import UsageError

from slurmlab.core.diagnosis.time_warnings import time_warning
from slurmlab.core.slurm.timefmt import duration_in_words
from slurmlab.errors import JobNotFoundError, SlurmlabError, SlurmNotConfiguredError
from slurmlab.magics.args import job_id_option
from slurmlab.magics.error_display import StepInterrupted
from slurmlab.magics.session import NOT_STARTED_STATES, Session, is_live, user_errors
from slurmlab.slurm import queries
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.leftovers import live_jobs
from slurmlab.slurm.failures import NOT_CONFIGURED_HINT
from slurmlab.slurm.own_job import find_own_job
from slurmlab.slurm.runner import Runner, classify_failure, get_runner
from slurmlab.slurm.ssh import SshLink

__all__ = [
    "SlurmStatus",
    "attach_as_default",
    "attach_job",
    "chosen_message",
    "ended_message",
    "no_allocation_message",
    "own_allocation",
    "own_line",
    "read_status",
    "resolve_allocation",
    "same_slurm",
    "slurm_status",
    "ssh_line",
    "stop_following",
    "wait_until_started",
]


def resolve_allocation(job_id: str | None, session: Session | None = None) -> Allocation:
    """The allocation a step goes to: ``--jobid`` (checked, and yours) or this notebook's default (its newest
    running one, else its newest pending one); passing over a newer pending one is said in one line."""
    session = session or Session.of()
    if job_id is not None:
        jid = job_id_option(job_id)
        alloc = next((a for a in reversed(session.allocations) if str(a.job_id) == jid), None)
        if alloc is None and is_own_job(jid, session):
            alloc = session.own
        if alloc is None:
            alloc = attach_job(jid, "use")
            if alloc.state == "GONE":
                stop_following(alloc)
                raise UsageError(
                    no_allocation_message(
                        f"cannot use job {jid}: it is unknown to Slurm (any more)",
                        "see your jobs with %squeue",
                        session,
                    )
                )
        if alloc.ended:
            raise UsageError(ended_message(alloc, session))
        return alloc
    alloc = session.default
    if alloc is None:
        alloc = own_allocation(session)
        if alloc is not None:
            print(f"using job {alloc.job_id}, the job this session runs in", file=sys.stderr, flush=True)
            return alloc
    if alloc is None:
        raise UsageError(
            no_allocation_message(
                "no live allocation in this notebook",
                "run %salloc first, e.g. %salloc --gpus=1 -t 30",
                session,
            )
        )
    passed_over = session.waiting()
    if passed_over:
        print(chosen_message(alloc, passed_over), file=sys.stderr, flush=True)
    return alloc


def chosen_message(alloc: Allocation, passed_over: list[Allocation]) -> str:
    """``using job 29 (RUNNING); job 30 is still PENDING — --jobid 30 waits for it``: the default, and the
    newer allocations it was chosen over because they have not started (newest first)."""

    def name(a: Allocation) -> str:
        return f"job {a.job_id}" if a.job_id is not None else "a request Slurm has not numbered yet"

    if len(passed_over) == 1:
        newer = f"{name(passed_over[0])} is still {passed_over[0].state}"
    else:
        newer = "newer " + ", ".join(f"{name(a)} ({a.state})" for a in passed_over) + " have not started"
    first = next((a.job_id for a in passed_over if a.job_id is not None), None)
    waits = f" — --jobid {first} waits for it" if first is not None else ""
    return f"using job {alloc.job_id} ({alloc.state}); {newer}{waits}"


def ended_message(alloc: Allocation, session: Session | None = None) -> str:
    """``allocation 5 has ended (TIMEOUT)``, the live ones and how to use one."""
    return no_allocation_message(
        f"allocation {alloc.job_id} has ended ({alloc.state})",
        "make a new one with %salloc --gpus=1 -t 30",
        session,
    )


def no_allocation_message(what: str, fix: str, session: Session | None = None) -> str:
    """``what``, then the live allocations (this notebook's and the user's other live jobs) with ``--jobid``,
    then ``fix``. The user's jobs come from one cheap squeue; when it fails they are left out."""
    session = session or Session.of()
    ended = [a for a in reversed(session.allocations) if not is_live(a) and a.job_id is not None]
    if ended and "has ended" not in what:
        what += f" (the latest, {ended[0].job_id}, has ended: {ended[0].state})"
    try:
        others: list[tuple[str, str]] | None = [(str(b.job_id), b.state) for b in live_jobs()]
    except SlurmlabError:
        others = None  # not known: say nothing about them
    live = session.live_note(others or ())
    if live:
        return f"{what}. {live}; or {fix}"
    if others is None:
        return f"{what}: {fix}, or give --jobid ID to use a live job of yours (see %squeue)"
    return f"{what}, and no job of yours is pending or running: {fix} (--jobid ID uses a live job)"


def own_allocation(session: Session | None = None) -> Allocation | None:
    """The job this kernel runs in (JupyterHub's batchspawner, Open OnDemand, a kernel started by salloc) as an
    allocation the kernel does not own (:meth:`Allocation.own`: never cancelled by it), or None: not inside a job,
    or Slurm did not confirm the job ``SLURM_JOB_ID`` names (``session.own_problem`` says why). Looked for once
    per session: one squeue when the environment names a job, nothing otherwise."""
    session = session or Session.of()
    if not session.own_checked:
        session.own_checked = True
        found = find_own_job()
        session.own_problem = found.problem
        if found.job_id is not None:
            try:
                alloc = Allocation.own(found.job_id)
                alloc.refresh()
            except SlurmlabError as exc:
                session.own_problem = (
                    f"the job this session runs in ({found.job_id}) could not be followed: {exc}"
                )
            else:
                session.own = alloc
    own = session.own
    if own is None or not is_live(own):
        return None
    # after `%slurm sandbox up` the kernel talks to another Slurm, where the job it runs in does not exist
    mine, now = own.runner.settings(), get_runner().settings()
    return own if (mine["conf"], mine["cluster"]) == (now["conf"], now["cluster"]) else None


def is_own_job(jid: str, session: Session | None = None) -> bool:
    """Whether job ``jid`` is the one this kernel runs in (confirmed with Slurm, see :func:`own_allocation`)."""
    from slurmlab.slurm.job_environment import job_id_of

    if job_id_of(os.environ) != jid:
        return False  # no squeue for an id the environment does not even name
    own = own_allocation(session)
    return own is not None and str(own.job_id) == jid


def own_line(alloc: Allocation) -> str:
    """``this session: job 14 on node1, 2 × h100, 1 h 12 min left …``: the job this kernel runs in, and that the
    kernel never ends it."""
    nodes = ",".join(alloc.nodes) or "its nodes"
    counts: dict[str, int] = {}
    for grant in alloc.job.gpu_allocs if alloc.job is not None else ():
        for kind, indices in grant.gpu_types.items():
            counts[kind or "GPU"] = counts.get(kind or "GPU", 0) + len(indices)
    gpus = ", ".join(f"{n} × {kind}" for kind, n in counts.items()) or "no GPU"
    left = alloc.time_left()
    if left is None:
        time_words = "no time limit known"
    else:
        hours, minutes = int(left) // 3600, int(left) % 3600 // 60
        time_words = (f"{hours} h {minutes} min" if hours else f"{minutes} min") + " left"
    line = (
        f"this session: job {alloc.job_id} on {nodes}, {gpus}, {time_words} (the job this kernel runs in; "
        "slurmlab never cancels it, not when the kernel ends either: it ends when the session is stopped or "
        "its time runs out)"
    )
    # the walltime warnings of a normal panel: here the kernel itself ends with the job
    limit = alloc.job.time_limit if alloc.job is not None else None
    warning = time_warning(left, float(limit) if limit else None) if alloc.running else None
    return line if warning is None else f"{line}\n  {warning.message}; this kernel ends with it"


def attach_as_default(jid: str, session: Session | None = None) -> Allocation:
    """``%salloc --attach ID`` / ``%slurm attach ID``: follow job ``jid`` and make it the default allocation."""
    alloc = attach_job(jid, "attach to")
    if alloc.state == "GONE" or alloc.ended:
        stop_following(alloc)
        raise UsageError(
            f"cannot attach to job {jid}: it is "
            f"{'unknown to Slurm' if alloc.state == 'GONE' else 'over (' + alloc.state + ')'}; "
            "see your jobs with %squeue"
        )
    (session or Session.of()).remember(alloc)
    return alloc


def attach_job(jid: str, verb: str) -> Allocation:
    """Follow job ``jid`` (a checked id) after Slurm confirmed, by uid, that it is this user's.

    The owner check comes first so that a wrong or foreign id never joins the kernel's shared poller.
    ``verb`` says what the user asked for in the messages ("use", "attach to").
    """
    with user_errors(f"cannot {verb} job {jid}"):
        try:
            queries.check_mine(jid)
        except JobNotFoundError:
            raise UsageError(
                f"cannot {verb} job {jid}: it is unknown to Slurm (a wrong id, or it ended "
                "long ago); see your jobs with %squeue"
            ) from None
        alloc = Allocation.attach(jid)
        try:
            alloc.refresh()
        except BaseException:
            stop_following(alloc)
            raise
    return alloc


def stop_following(alloc: Allocation) -> None:
    """Take an attached allocation off the shared poller without cancelling the job."""
    alloc.forget()


def wait_until_started(alloc: Allocation) -> None:
    """Wait for a pending allocation to run (saying so); Ctrl-C stops the wait in one line, not the job."""
    if alloc.state not in NOT_STARTED_STATES:
        return
    print(f"waiting for allocation {alloc.job_id} to start ({alloc.state})…", file=sys.stderr, flush=True)
    try:
        with user_errors(f"allocation {alloc.job_id} did not start"):
            alloc.wait("RUNNING")
    except KeyboardInterrupt:
        raise StepInterrupted(
            f"interrupted: stopped waiting; allocation {alloc.job_id} is still {alloc.state.lower()}"
        ) from None


@dataclass
class SlurmStatus:
    """Which Slurm the kernel uses, whether its controller answers, and the notebook's allocations, in lines."""

    runner: Runner
    lines: list[str] = field(default_factory=list)
    answers: bool = False  # the controller answered the ping
    no_slurm: bool = False  # no Slurm configured here at all: the sandbox picker is the way on
    own: Allocation | None = None  # the job this kernel runs in, confirmed with Slurm (its panel comes first)


def read_status(session: Session | None = None) -> SlurmStatus:
    """What ``%slurm`` says before the jobs earlier kernels left: one ping of the controller."""
    session = session or Session.of()
    runner = get_runner()
    status = SlurmStatus(runner, _where_lines(runner, session))
    lines = status.lines
    answer = queries.ping(runner)
    status.answers = bool(answer.get("ok"))
    if status.answers:
        lines.append(f"controller: answering (Slurm {answer.get('version')})")
    else:
        lines.append(f"controller: NOT answering — {answer.get('message')}")
        status.no_slurm = _not_configured(runner, str(answer.get("message") or ""))
        if status.no_slurm and NOT_CONFIGURED_HINT not in lines[-1]:
            lines.append(NOT_CONFIGURED_HINT)
    own = own_allocation(session) if status.answers else None
    status.own = own
    if own is not None:
        lines.append(own_line(own))
    elif session.own_problem:
        lines.append(f"{session.own_problem}: slurmlab works as from a login node")
    default = session.default
    # a job id means something only on its own Slurm: after `%slurm sandbox up OTHER`, job 12 of the sandbox
    # before is not job 12 of this one
    here = [a for a in session.allocations if same_slurm(a.runner, runner)]
    if here:
        lines.append("allocations of this notebook:")
        lines += [
            f"  {a.summary()}" + ("  (default for %srun)" if a is default else "") for a in reversed(here)
        ]
        if default is None:
            lines.append(
                f"none of them is live: %srun runs in job {own.job_id}; %salloc for another"
                if own is not None
                else "none of them is live: %salloc --gpus=1 -t 30 for a new one"
            )
    elif own is not None:
        lines.append(
            f"no allocation of this notebook yet: %srun runs in job {own.job_id}; %salloc for another"
        )
    else:
        lines.append("no allocation yet: %salloc --gpus=1 -t 30")
    elsewhere = [a for a in session.allocations if a not in here]
    if elsewhere:
        confs = sorted({str(a.runner.configuration() or "Slurm's default configuration") for a in elsewhere})
        lines.append(
            f"not listed: {len(elsewhere)} allocation(s) of this notebook on another Slurm ({', '.join(confs)}); "
            "`%slurm use` that slurm.conf to see them"
        )
    return status


def _where_lines(runner: Runner, session: Session) -> list[str]:
    """Which Slurm: its configuration, the SSH link it is reached over, the sandbox it is."""
    conf = runner.slurm_conf or os.environ.get("SLURM_CONF") or "Slurm's default (/etc/slurm/slurm.conf)"
    lines = [f"Slurm config: {conf}" + (f", cluster {runner.cluster}" if runner.cluster else "")]
    if runner.ssh is not None:
        lines.append(ssh_line(runner.ssh))
    if session.sandbox is not None:
        lines.append(
            f"sandbox: {session.sandbox.profile_name} ({len(session.sandbox.nodes)} nodes) "
            f"in {session.sandbox.directory}"
        )
    return lines


def ssh_line(link: SshLink) -> str:
    """Where the kernel's Slurm commands run over SSH, as whom, and its lease: how long the link may stay down
    before the cluster releases the allocations this kernel holds there (``%slurm use ssh://… --lease``)."""
    who = f" as {link.remote_user[1]} (uid {link.remote_user[0]} there)" if link.remote_user else ""
    lease = duration_in_words(int(link.lease)) or f"{link.lease:g} seconds"
    return (
        f"over SSH: {link.target.url()}{who}; lease {lease}: if the link stays down that long, the cluster "
        "releases the allocations this kernel holds there (%slurm use … --lease DURATION sets it)"
    )


def same_slurm(one: Runner, other: Runner) -> bool:
    """Whether two runners talk to the same Slurm: the same slurm.conf and cluster (:meth:`Runner.settings`)."""
    a, b = one.settings(), other.settings()
    return (a["conf"], a["cluster"]) == (b["conf"], b["cluster"])


def slurm_status(session: Session | None = None) -> str:
    """Which Slurm this kernel uses, whether it answers, and the notebook's allocations."""
    return "\n".join(read_status(session).lines)


def _not_configured(runner: Runner, message: str) -> bool:
    """Whether the controller's silence is "no Slurm configured here" (then the sandbox picker is offered):
    the runner refuses a SLURM_CONF that is not there, or Slurm said it found no configuration source."""
    try:
        queries.slurm_version(runner)
    except SlurmNotConfiguredError:
        return True
    except SlurmlabError:
        pass
    return isinstance(classify_failure([], 1, message), SlurmNotConfiguredError)
