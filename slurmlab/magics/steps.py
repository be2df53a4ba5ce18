"""``%srun`` and ``%%srun``: run a command, a shell script or Python code in the allocation.

Output streams into the cell line by line as the step prints it; Ctrl-C ends the step and leaves
the allocation running.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

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
from slurmlab.magics.kernel import resolve_allocation, wait_until_started
from slurmlab.magics.session import EXPANSION_HELP, Session, user_errors
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.failures import refusal_hint
from slurmlab.slurm.runner import get_runner

__all__ = ["StepMagics"]

_STEP_ID = re.compile(r"\bSTEP (\d+\.\d+)\b|\bStepId=(\d+\.\d+)\b|\bstep (\d+\.\d+)\b")


def _print(stream: str, line: str) -> None:
    print(line, file=sys.stderr if stream == "stderr" else sys.stdout, flush=True)


@magics_class
class StepMagics(Magics):
    @magic_arguments()
    @argument(
        "--jobid",
        metavar="ID",
        help="run in this job (default: the newest running %%salloc allocation, else the newest pending one)",
    )
    @argument("--label", "-l", action="store_true", help="prefix every line with its task number")
    @argument("--python", action="store_true", help="(cell) run the cell as Python code instead of bash")
    @argument(
        "--interpreter",
        metavar="PATH",
        default=None,
        help="(cell, with --python) the Python to run on the node; default: this kernel's (over SSH: python3)",
    )
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
                raise UsageError(
                    f"%%srun runs the cell; it takes no command on its line (got {command[0]!r})"
                )
            check_text(cell, "the %%srun cell", cell=True)
            if not cell.strip():
                raise UsageError(
                    "the %%srun cell is empty: write the shell (or --python) code to run below it"
                )
            python = ns.interpreter or get_runner().python()
            command = [python, "-u", "-c", cell] if ns.python else ["bash", "-c", cell]
        elif ns.python:
            raise UsageError("--python runs a cell: use %%srun --python with the code in the cell")
        if not command:
            raise UsageError("what should run? e.g. %srun hostname, or a %%srun cell")
        options = [*req.to_argv()]
        session = Session.of(self.shell)
        alloc = resolve_allocation(ns.jobid, session)
        wait_until_started(alloc)
        try:
            with user_errors("the step could not run"):
                result = alloc.srun(
                    command, args=options, on_output=_print, label=ns.label, timeout=ns.timeout
                )
        except KeyboardInterrupt:
            # one line, no traceback: Ctrl-C is how a step is meant to end early
            raise StepInterrupted(
                f"interrupted: step {_step_name(alloc, command)} ended; allocation "
                f"{alloc.job_id} is still {alloc.state.lower()}"
            ) from None
        session.last_step = result
        if result.interrupted:
            print(f"step ended after --timeout {ns.timeout:g} s", file=sys.stderr)
        elif result.returncode != 0:
            # srun's words are in the cell already; a step srun could not run (munge, the controller) gets the
            # runner's reading of them and its hint, as every other path to Slurm does
            failure = result.failure
            print(
                f"step exited with code {result.returncode}" + (f": {failure.message}" if failure else ""),
                file=sys.stderr,
            )
            hint = failure.hint if failure is not None else _refusal_hint(alloc, result.stderr)
            if hint:
                print(f"-> {hint}", file=sys.stderr)


def _refusal_hint(alloc: Allocation, stderr: list[str]) -> str | None:
    """What to do when srun refused the step (Slurm's own words stay above it), with what the allocation holds."""
    hint = refusal_hint("\n".join(stderr[-20:]))
    if hint is None or "more processors requested" not in "\n".join(stderr[-20:]).lower():
        return hint
    view = alloc.view
    if view is not None and view.num_tasks:
        return (
            f"allocation {alloc.job_id} holds {view.num_tasks} task(s): ask for at most -n {view.num_tasks} "
            f"(or fewer CPUs per task with -c), or make a bigger allocation with %salloc"
        )
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
