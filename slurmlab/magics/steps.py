"""``%srun`` and ``%%srun``: run a command, a shell script or Python code in the allocation.

Output streams into the cell line by line as the step prints it; Ctrl-C ends the step and leaves
the allocation running.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from slurmlab.magics.args import (
    argument,
    check_range,
    check_text,
    expand_line,
    job_id_option,
    magic_arguments,
    parse_tokens,
    raw_line,
    split_line,
)
from slurmlab.magics.error_display import StepInterrupted
from slurmlab.magics.session import EXPANSION_HELP, get_session, is_live, user_errors

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = [
    "StepMagics",
    "attach_as_default",
    "attach_job",
    "ended_message",
    "no_allocation_message",
    "resolve_allocation",
    "stop_following",
]

_STEP_ID = re.compile(r"\bSTEP (\d+\.\d+)\b|\bStepId=(\d+\.\d+)\b|\bstep (\d+\.\d+)\b")


def resolve_allocation(job_id: str | None) -> Allocation:
    """The allocation a step goes to: ``--jobid`` (checked, and yours) or this notebook's newest live one."""
    session = get_session()
    if job_id is not None:
        jid = job_id_option(job_id)
        alloc = next((a for a in reversed(session.allocations) if str(a.job_id) == jid), None)
        if alloc is None:
            alloc = attach_job(jid, "use")
            if alloc.state == "GONE":
                stop_following(alloc)
                raise UsageError(no_allocation_message(f"cannot use job {jid}: it is unknown to Slurm (any more)",
                                                       "see your jobs with %squeue"))
        if alloc.ended:
            raise UsageError(ended_message(alloc))
        return alloc
    alloc = session.default
    if alloc is None:
        raise UsageError(no_allocation_message("no live allocation in this notebook",
                                               "run %salloc first, e.g. %salloc --gpus=1 -t 30"))
    return alloc


def ended_message(alloc: Allocation) -> str:
    """``allocation 5 has ended (TIMEOUT)``, the live ones and how to use one."""
    return no_allocation_message(f"allocation {alloc.job_id} has ended ({alloc.state})",
                                 "make a new one with %salloc --gpus=1 -t 30")


def no_allocation_message(what: str, fix: str) -> str:
    """``what``, then the live allocations (this notebook's and the user's other live jobs) with ``--jobid``,
    then ``fix``. The user's jobs come from one cheap squeue; when it fails they are left out."""
    from slurmlab.errors import SlurmlabError
    from slurmlab.slurm.allocation_leftovers import live_jobs

    session = get_session()
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


def attach_as_default(jid: str) -> Allocation:
    """``%salloc --attach ID`` / ``%slurm attach ID``: follow job ``jid`` and make it the default allocation."""
    alloc = attach_job(jid, "attach to")
    if alloc.state == "GONE" or alloc.ended:
        stop_following(alloc)
        raise UsageError(f"cannot attach to job {jid}: it is "
                         f"{'unknown to Slurm' if alloc.state == 'GONE' else 'over (' + alloc.state + ')'}; "
                         "see your jobs with %squeue")
    get_session().remember(alloc)
    return alloc


def attach_job(jid: str, verb: str) -> Allocation:
    """Follow job ``jid`` (a checked id) after Slurm confirmed, by uid, that it is this user's.

    The owner check comes first so that a wrong or foreign id never joins the kernel's shared poller.
    ``verb`` says what the user asked for in the messages ("use", "attach to").
    """
    from slurmlab.errors import JobNotFoundError
    from slurmlab.slurm import queries
    from slurmlab.slurm.allocation import Allocation

    with user_errors(f"cannot {verb} job {jid}"):
        try:
            queries.check_mine(jid)
        except JobNotFoundError:
            raise UsageError(f"cannot {verb} job {jid}: it is unknown to Slurm (a wrong id, or it ended "
                             "long ago); see your jobs with %squeue") from None
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
    if alloc.state not in ("SUBMITTING", "PENDING", "CONFIGURING"):
        return
    print(f"waiting for allocation {alloc.job_id} to start ({alloc.state})…", file=sys.stderr, flush=True)
    try:
        with user_errors(f"allocation {alloc.job_id} did not start"):
            alloc.wait("RUNNING")
    except KeyboardInterrupt:
        raise StepInterrupted(f"interrupted: stopped waiting; allocation {alloc.job_id} is still "
                              f"{alloc.state.lower()}") from None


def _print(stream: str, line: str) -> None:
    print(line, file=sys.stderr if stream == "stderr" else sys.stdout, flush=True)


@magics_class
class StepMagics(Magics):
    @magic_arguments()
    @argument("--jobid", metavar="ID", help="run in this job (default: the newest live %%salloc allocation)")
    @argument("--label", "-l", action="store_true", help="prefix every line with its task number")
    @argument("--python", action="store_true", help="(cell) run the cell as Python code instead of bash")
    @argument("--interpreter", metavar="PATH", default=sys.executable,
              help="(cell, with --python) the Python to run on the node; default: this kernel's")
    @argument("--timeout", type=float, metavar="SECONDS", help="end the step after this many seconds")
    @raw_line
    @line_cell_magic
    def srun(self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None) -> None:
        """Run a step in the allocation: ``%srun [srun options] command`` or a ``%%srun`` cell.

        ``%srun -n2 --label hostname`` runs a command (no shell: use ``bash -c '…'`` for pipes and
        variables); ``%%srun -n2`` runs the cell with bash on every task; ``%%srun --python`` runs it
        as Python. Output appears line by line while the step runs. srun options (``-n``, ``-N``,
        ``--gpus-per-task``, ``--gpu-bind``, ...) pass to srun; put ``--`` before a command whose own
        flags look like ours. Ctrl-C ends the step, not the allocation.
        """
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "srun", line)
        if ns.jobid is not None:
            job_id_option(ns.jobid)  # before anything else, so a bad id is named as such
        check_range(ns.timeout, "--timeout", 0.001, 366 * 86400.0)
        with user_errors("the srun options are not valid"):
            req = parse_tokens(rest)
        if req.command:
            command = list(req.command) + command
            req = parse_tokens(rest[: len(rest) - len(req.command)])
        if cell is not None:
            if command:
                raise UsageError(f"%%srun runs the cell; it takes no command on its line (got {command[0]!r})")
            check_text(cell, "the %%srun cell", cell=True)
            if not cell.strip():
                raise UsageError("the %%srun cell is empty: write the shell (or --python) code to run below it")
            command = [ns.interpreter, "-u", "-c", cell] if ns.python else ["bash", "-c", cell]
        elif ns.python:
            raise UsageError("--python runs a cell: use %%srun --python with the code in the cell")
        if not command:
            raise UsageError("what should run? e.g. %srun hostname, or a %%srun cell")
        options = [*req.to_argv()]
        alloc = resolve_allocation(ns.jobid)
        wait_until_started(alloc)
        try:
            with user_errors("the step could not run"):
                result = alloc.srun(command, args=options, on_output=_print, label=ns.label, timeout=ns.timeout)
        except KeyboardInterrupt:
            # one line, no traceback: Ctrl-C is how a step is meant to end early
            raise StepInterrupted(f"interrupted: step {_step_name(alloc, command)} ended; allocation "
                                  f"{alloc.job_id} is still {alloc.state.lower()}") from None
        get_session().last_step = result
        if result.interrupted:
            print(f"step ended after --timeout {ns.timeout:g} s", file=sys.stderr)
        elif result.returncode != 0:
            # srun's words are in the cell already; a step srun could not run (munge, the controller) gets the
            # runner's reading of them and its hint, as every other path to Slurm does
            failure = result.failure
            print(f"step exited with code {result.returncode}" + (f": {failure.message}" if failure else ""),
                  file=sys.stderr)
            hint = failure.hint if failure is not None else _refusal_hint(alloc, result.stderr)
            if hint:
                print(f"-> {hint}", file=sys.stderr)


def _refusal_hint(alloc: Allocation, stderr: list[str]) -> str | None:
    """What to do when srun refused the step (Slurm's own words stay above it), with what the allocation holds."""
    from slurmlab.slurm.failures import refusal_hint

    hint = refusal_hint("\n".join(stderr[-20:]))
    if hint is None or "more processors requested" not in "\n".join(stderr[-20:]).lower():
        return hint
    view = alloc.view
    if view is not None and view.num_tasks:
        return (f"allocation {alloc.job_id} holds {view.num_tasks} task(s): ask for at most -n {view.num_tasks} "
                f"(or fewer CPUs per task with -c), or make a bigger allocation with %salloc")
    return hint


def _step_name(alloc: Allocation, command: list[str]) -> str:
    """The step's id where srun printed it (``19.3``), else the command it ran."""
    steps = alloc.steps
    for line in reversed(steps[-1].stderr if steps else []):
        found = _STEP_ID.search(line)
        if found:
            return next(g for g in found.groups() if g)
    shown = shlex.join(command)
    return f"({shown if len(shown) <= 40 else shown[:39] + '…'})"


StepMagics.srun.__doc__ = (StepMagics.srun.__doc__ or "") + "\n" + EXPANSION_HELP
