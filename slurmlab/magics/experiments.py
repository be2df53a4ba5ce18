"""``%gpu_timeslice`` and ``%gpu_isolation``: the time-slicing and isolation experiments in the notebook's
allocation.

Both run in ``--jobid`` or the allocation ``%srun`` would use (the newest running one) and return an object that
displays itself (a TimesliceResult with its measured table, a VerifyReport with its checks); the
Gantt chart of a TimesliceResult is ``slurmlab.viz.gantt.gantt_figure(result)``.
``%gpu_timeslice`` with no allocation at all runs its workers as local processes (a laptop).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from slurmlab.magics.args import (
    argument,
    check_range,
    expand_line,
    job_id_option,
    magic_arguments,
    raw_line,
    split_line,
)
from slurmlab.magics.error_display import StepInterrupted
from slurmlab.magics.kernel import (
    ended_message,
    no_allocation_message,
    resolve_allocation,
    wait_until_started,
)
from slurmlab.magics.session import EXPANSION_HELP, Session, user_errors
from slurmlab.slurm.allocation import Allocation

__all__ = ["ExperimentMagics"]

# Bounds that keep a typo from starting thousands of workers or a run that never ends.
MAX_PROCS = 64
MAX_DURATION_S = 3600.0
MAX_TASKS = 1024


def _running(alloc: Allocation, session: Session | None = None) -> Allocation:
    # typed: mypy checks here that an Allocation is what the experiments' protocols ask for
    wait_until_started(alloc)
    if alloc.state != "RUNNING":
        if alloc.ended:
            raise UsageError(ended_message(alloc, session))
        raise UsageError(
            no_allocation_message(
                f"allocation {alloc.job_id} is {alloc.state}, not running",
                "wait for it, or make a new one with %salloc --gpus=1 -t 30",
                session,
            )
        )
    return alloc


@contextlib.contextmanager
def _interrupted(what: str, alloc: Allocation | None) -> Iterator[None]:
    """Ctrl-C during an experiment: one line saying what ended and that the allocation lives on."""
    try:
        yield
    except KeyboardInterrupt:
        where = f"; allocation {alloc.job_id} is still {alloc.state.lower()}" if alloc is not None else ""
        raise StepInterrupted(f"interrupted: {what} ended{where}") from None


def _no_extra(name: str, rest: list[str], command: list[str]) -> None:
    extra = rest + command
    if extra:
        raise UsageError(f"%{name} does not know {' '.join(extra)!r}: see %{name}? for its options")


@magics_class
class ExperimentMagics(Magics):
    @magic_arguments()
    @argument("--procs", "-n", type=int, default=3, help="number of workers sharing one GPU/core (default 3)")
    @argument("--duration", "-d", type=float, default=2.0, help="logging window in seconds (default 2)")
    @argument(
        "--backend",
        choices=("auto", "cpu", "cupy"),
        default="auto",
        help="cupy: one GPU; cpu: one CPU core; auto: cupy when the node sees a GPU",
    )
    @argument(
        "--cores",
        default=None,
        help="cpu backend: how many cores (a count) or which CPUs (0,1); default one core",
    )
    @argument("--device", type=int, default=0, help="cupy backend: the GPU ordinal the workers share")
    @argument("--nice", type=int, default=None, help="workers' niceness (negative needs privilege)")
    @argument(
        "--jobid",
        metavar="ID",
        help="run in this job (default: the one %%srun uses, the newest running allocation)",
    )
    @argument("--local", action="store_true", help="run local processes even when there is an allocation")
    @raw_line
    @line_magic
    def gpu_timeslice(self, line: str, local_ns: dict[str, Any] | None = None) -> Any:
        """Time-slicing: N workers share one GPU (or one CPU core) of the allocation; returns the result.

        ``%gpu_timeslice --procs 3 --duration 2`` starts 3 workers as steps of the allocation, all on
        one GPU (cupy) or one core (cpu), with a common start, and shows shares, slices, overlap,
        fairness and the classification (time-sliced / concurrent / mixed) with a Gantt chart.
        """
        from slurmlab.experiments.timeslice import TimeslicePlan, run  # numpy: loaded when an experiment runs

        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "gpu_timeslice", line)
        _no_extra("gpu_timeslice", rest, command)
        if ns.jobid is not None:
            job_id_option(ns.jobid)
        check_range(ns.procs, "--procs", 1, MAX_PROCS)
        check_range(ns.duration, "--duration", 0.01, MAX_DURATION_S)
        check_range(ns.device, "--device", 0, 1023)
        check_range(ns.nice, "--nice", -20, 19)
        cores: Any = ns.cores
        # isascii: "²".isdigit() is true but int("²") fails; a count has few digits
        if cores is not None and cores.isascii() and cores.isdigit() and len(cores) <= 4:
            cores = int(cores)
        alloc: Allocation | None = None
        session = Session.of(self.shell)
        # once this notebook has allocated, "none live" is a mistake to name, not a reason to run locally
        if not ns.local and (ns.jobid is not None or session.allocations):
            alloc = _running(resolve_allocation(ns.jobid, session), session)
        elif not ns.local:
            print(
                "no allocation: the workers run here as local processes (%salloc first for a GPU)",
                file=sys.stderr,
                flush=True,
            )
        with _interrupted("the time-slicing run", alloc), user_errors("the time-slicing run failed"):
            plan = TimeslicePlan(ns.procs, ns.duration, ns.backend, cores, device=ns.device, nice=ns.nice)
            return run(alloc, plan)

    @magic_arguments()
    @argument(
        "--jobid",
        metavar="ID",
        help="check this job (default: the one %%srun uses, the newest running allocation)",
    )
    @argument("--tasks", "-n", type=int, default=None, help="tasks in the check step (default: the job's)")
    @argument("--backend", choices=("auto", "cpu", "cupy"), default="auto")
    @argument("--timeslice", action="store_true", help="also run a short time-slicing test (I6, I10)")
    @raw_line
    @line_magic
    def gpu_isolation(self, line: str, local_ns: dict[str, Any] | None = None) -> Any:
        """Isolation checks I1–I10 in the allocation: PASS / FAIL / SKIP (why) / INFO, with evidence.

        Runs one step with the job's tasks and GPU request, compares what each task sees with what
        Slurm granted, and says whether the tasks' GPUs are isolated or shared. Extra srun options
        after ``--`` replace the derived ones (``%gpu_isolation -- -n2 --gpus-per-task=1``).
        """
        from slurmlab.experiments.verify import verify  # numpy: loaded when an experiment runs

        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "gpu_isolation", line)
        if rest:
            raise UsageError(f"%gpu_isolation does not know {' '.join(rest)!r}; put srun options after --")
        if ns.jobid is not None:
            job_id_option(ns.jobid)
        check_range(ns.tasks, "--tasks", 1, MAX_TASKS)
        session = Session.of(self.shell)
        alloc = _running(resolve_allocation(ns.jobid, session), session)
        with _interrupted("the isolation check", alloc), user_errors("the isolation check failed"):
            return verify(
                alloc,
                tasks=ns.tasks,
                backend=ns.backend,
                step_args=command or None,
                timeslice=True if ns.timeslice else None,
            )


for _magic in (ExperimentMagics.gpu_timeslice, ExperimentMagics.gpu_isolation):
    _magic.__doc__ = (_magic.__doc__ or "") + "\n" + EXPANSION_HELP
