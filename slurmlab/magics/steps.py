"""``%srun`` and ``%%srun``: run a command, a shell script or Python code in the allocation.

Output streams into the cell line by line as the step prints it; Ctrl-C ends the step and leaves
the allocation running.
"""

from __future__ import annotations

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
from slurmlab.magics.session import EXPANSION_HELP, get_session, user_errors

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["StepMagics", "attach_job", "resolve_allocation", "stop_following"]


def resolve_allocation(job_id: str | None) -> Allocation:
    """The allocation a step goes to: ``--jobid`` (checked, and yours) or this notebook's latest one."""
    session = get_session()
    if job_id is not None:
        jid = job_id_option(job_id)
        for alloc in session.allocations:
            if str(alloc.job_id) == jid:
                return alloc
        alloc = attach_job(jid, "use")
        if alloc.state == "GONE":
            stop_following(alloc)
            raise UsageError(f"cannot use job {jid}: it is unknown to Slurm (any more); see your jobs with %squeue")
        return alloc
    if session.default is None:
        raise UsageError("no allocation yet: run %salloc first (e.g. %salloc --gpus=1), or give --jobid=ID")
    return session.default


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


def _print(stream: str, line: str) -> None:
    print(line, file=sys.stderr if stream == "stderr" else sys.stdout, flush=True)


@magics_class
class StepMagics(Magics):
    @magic_arguments()
    @argument("--jobid", metavar="ID", help="run in this job (default: the latest %%salloc allocation)")
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
        if alloc.state in ("SUBMITTING", "PENDING", "CONFIGURING"):
            print(f"waiting for allocation {alloc.job_id} to start ({alloc.state})…", file=sys.stderr, flush=True)
            try:
                with user_errors(f"allocation {alloc.job_id} did not start"):
                    alloc.wait("RUNNING")
            except KeyboardInterrupt:
                print(f"stopped waiting; allocation {alloc.job_id} is still {alloc.state}", file=sys.stderr)
                raise
        try:
            with user_errors("the step could not run"):
                result = alloc.srun(command, args=options, on_output=_print, label=ns.label, timeout=ns.timeout)
        except KeyboardInterrupt:
            print(f"step interrupted; allocation {alloc.job_id} is still {alloc.state}", file=sys.stderr,
                  flush=True)
            raise
        get_session().last_step = result
        if result.interrupted:
            print(f"step ended after --timeout {ns.timeout:g} s", file=sys.stderr)
        elif result.returncode != 0:
            print(f"step exited with code {result.returncode}", file=sys.stderr)


StepMagics.srun.__doc__ = (StepMagics.srun.__doc__ or "") + "\n" + EXPANSION_HELP
