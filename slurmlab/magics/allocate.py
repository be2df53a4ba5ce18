"""``%salloc`` and ``%scancel``: allocations that live as long as the kernel."""

from __future__ import annotations

import dataclasses
import html
import shlex
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from slurmlab.core.diagnosis.time_warnings import signal_note
from slurmlab.core.palette import INK_SOFT, WARN
from slurmlab.core.request.explain import explain
from slurmlab.core.request.pipeline import CommandInRequest
from slurmlab.core.request.request import GpuRequest
from slurmlab.core.slurm.jobid import is_job_id
from slurmlab.errors import SlurmlabError
from slurmlab.magics.args import (
    argument,
    expand_line,
    job_id_option,
    magic_arguments,
    raw_line,
    split_line,
)
from slurmlab.magics.kernel import attach_as_default, is_own_job, no_allocation_message
from slurmlab.magics.rerun import (
    Origin,
    current_origin,
    find_rerun,
    find_same_request,
    rerun_warning,
    same_request_warning,
)
from slurmlab.magics.salloc_checks import (
    asks_for_gpu,
    no_gpu_message,
    partition_for,
    time_limit_note,
    unlimited,
    zero_time_message,
)
from slurmlab.magics.session import EXPANSION_HELP, Session, user_errors
from slurmlab.slurm import queries
from slurmlab.slurm.allocation import ENDED_STATES, Allocation, check_request, salloc_argv
from slurmlab.slurm.allocation.release import follow_cancelled
from slurmlab.slurm.inventory import cluster_inventory
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["AllocateMagics", "DryRun", "prepare_request"]


@dataclasses.dataclass(frozen=True)
class DryRun:
    """What ``%salloc --dry-run`` shows: the exact command, what it means, and what was not checked."""

    argv: tuple[str, ...]
    explanation: str
    warnings: tuple[str, ...] = ()
    checked_against: str = ""

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def text(self) -> str:
        lines = [self.command, "", "What it asks for: " + self.explanation]
        if self.checked_against:
            lines.append(self.checked_against)
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        esc = html.escape
        warn = "".join(f"<div style='color:{WARN}'>warning: {esc(w)}</div>" for w in self.warnings)
        checked = (
            f"<div style='color:{INK_SOFT}'>{esc(self.checked_against)}</div>" if self.checked_against else ""
        )
        return (
            f"<div class='slurmlab-dryrun'><pre style='margin:0'>{esc(self.command)}</pre>"
            f"<div><b>What it asks for:</b> {esc(self.explanation)}</div>{checked}{warn}</div>"
        )


def prepare_request(
    tokens: list[str], runner: Runner | None = None, *, need_cluster: bool = True
) -> tuple[GpuRequest, str]:
    """A %salloc line's request through the one pipeline; returns (request, what it was checked against).

    With ``need_cluster`` a controller that does not answer is an error; without (dry run) the
    static checks still run and the note says the cluster was not asked.
    """
    try:
        req = check_request(tokens, runner, need_cluster=need_cluster)
    except CommandInRequest as exc:
        raise UsageError(
            f"%salloc takes no command (got {' '.join(exc.command)!r}): it only allocates; "
            "run commands in the allocation with %srun"
        ) from None
    return req, req.checked.note() if req.checked is not None else ""


def _time_note(req: GpuRequest) -> str | None:
    """The one line about a request without a time limit; the partition's limits when the cluster says them."""
    if not unlimited(req):
        return None
    if (
        req.checked is None or not req.checked.against_cluster
    ):  # a dry run that could not ask: do not wait twice
        return time_limit_note(req, None)
    try:  # the partitions the check just read, cached per cluster (default filled in from sinfo): no Slurm call
        partition = partition_for(req, cluster_inventory().get().partitions, None)
    except SlurmlabError:  # the note then says the limit is not known here; the submit says what failed
        partition = None
    return time_limit_note(req, partition)


@magics_class
class AllocateMagics(Magics):
    @magic_arguments()
    @argument(
        "--dry-run",
        action="store_true",
        help="show the exact salloc command and what it asks for, in plain words; submit nothing",
    )
    @argument(
        "--form",
        action="store_true",
        help="show a request form (only what the cluster offers, checked as you type) instead",
    )
    @argument(
        "--attach",
        metavar="JOBID",
        help="follow an existing allocation (e.g. one a previous kernel left) instead of submitting",
    )
    @argument(
        "--replace",
        action="store_true",
        help="re-running a cell (or the same request) whose allocation still lives: cancel it and submit",
    )
    @argument(
        "--new",
        action="store_true",
        help="re-running a cell (or the same request) whose allocation still lives: submit another, keep both",
    )
    @argument(
        "--no-gpu",
        action="store_true",
        help="a CPU-only job is meant (without it, a request with no GPU is refused)",
    )
    @raw_line
    @line_magic
    def salloc(self, line: str, local_ns: dict[str, Any] | None = None) -> Any:
        """Allocate GPUs for this kernel: ``%salloc [--dry-run] <salloc options>``.

        Validates the request against the cluster (a mistake comes back with its fix), submits
        ``salloc --no-shell`` in the background and returns the Allocation at once; displayed, it is a
        live panel (state, why it waits, nodes and GPU indices, time left, Cancel). The newest running
        allocation (else the newest pending one) is where %srun runs. It is released when the kernel shuts
        down.

        Re-running a cell whose allocation is still pending or running submits nothing: it says so and
        returns that allocation (``--replace`` cancels it and submits; ``--new`` keeps both); so does the same
        request in another cell while this kernel's allocation for it lives. A request for no GPU is refused
        unless ``--no-gpu`` says a CPU-only job is meant; ``-t 0`` (Slurm's "no limit") is refused, and one
        without ``-t`` says which limit it will get.

        Examples: ``%salloc --gpus=2 -t 30``, ``%salloc -N2 --gpus-per-node=h100:4 --gpu-bind=closest``,
        ``%salloc --gres=shard:2``, ``%salloc --dry-run --gres=gpu:1g.18gb:1``.
        Options %salloc does not know pass to Slurm unchanged (with a warning).
        """
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "salloc", line)
        if command:
            raise UsageError("%salloc takes no command after --: run commands with %srun")
        if ns.replace and ns.new:
            raise UsageError("--replace cancels the cell's earlier allocation and --new keeps it: give one")
        session = Session.of(self.shell)
        if ns.form:
            if rest:
                raise UsageError("--form takes no salloc options: choose them in the form")
            from slurmlab.widgets.form import RequestForm
            from slurmlab.widgets.form_memory import default_path

            with user_errors("cannot build the request form"):
                return RequestForm(on_submit=session.remember, memory=default_path())
        if ns.attach is not None:
            if rest:
                raise UsageError("--attach takes only a job id; it cannot be combined with salloc options")
            return attach_as_default(job_id_option(ns.attach, "--attach"), session)
        with user_errors("cannot submit this request"):
            req, note = prepare_request(rest, need_cluster=not ns.dry_run)
        if ns.no_gpu and asks_for_gpu(req):
            raise UsageError(
                "--no-gpu says a CPU-only job is meant, but the request asks for GPUs: drop one of them"
            )
        no_gpu = None if ns.no_gpu or asks_for_gpu(req) else no_gpu_message(req)
        zero_time = zero_time_message(req)
        if ns.dry_run:
            notes = (no_gpu, zero_time, None if zero_time else _time_note(req))
            extra = tuple(w.removeprefix("note: ") for w in notes if w)
            said = explain(req) + (f". {n}" if (n := signal_note(req.extra)) else "")  # --signal in words
            return DryRun(tuple(salloc_argv(req)), said, tuple(req.warnings) + extra, note)
        if no_gpu is not None:
            raise UsageError(no_gpu)
        if zero_time is not None:
            raise UsageError(zero_time)
        origin = current_origin(self.shell, req.to_argv(), typed=" ".join(rest))
        if not ns.new:
            earlier = self._rerun(origin, replace=ns.replace)
            if earlier is not None:
                return earlier
        for w in req.warnings:
            print(f"warning: {w}", file=sys.stderr)
        time_note = _time_note(req)
        if time_note:
            print(time_note, file=sys.stderr)
        with user_errors("salloc failed"):
            alloc = Allocation.submit(req)  # checked against the cluster above: not checked twice
        session.remember(alloc, origin)
        return alloc

    def _rerun(self, origin: Origin, *, replace: bool) -> Allocation | None:
        """The live allocation to return instead of submitting (after saying so), or None: the one an earlier
        run of this cell made, else one another cell made with the same request.

        With ``replace`` that one is cancelled and None returned, so that the request is submitted."""
        session = Session.of(self.shell)
        made = [(a, session.origins[id(a)]) for a in reversed(session.live()) if id(a) in session.origins]
        earlier = find_rerun(origin, made)
        same_cell = earlier is not None
        if earlier is None:
            earlier = find_same_request(origin, made)
        if earlier is None:
            return None
        was = session.origins[id(earlier)]
        if replace:
            with user_errors(f"cannot cancel allocation {earlier.job_id}"):
                earlier.cancel()
            whose = "this cell's" if same_cell else "the same request's"
            print(
                f"cancelled {whose} allocation {earlier.job_id} (--replace); submitting the new request",
                file=sys.stderr,
            )
            return None
        said = rerun_warning(earlier, origin, was) if same_cell else same_request_warning(earlier, origin)
        print(said, file=sys.stderr, flush=True)
        # this execution has claimed it: a second %salloc line of the same cell run is a request of its own
        session.origins[id(earlier)] = dataclasses.replace(was, execution=origin.execution)
        session.remember(earlier)
        return earlier

    @magic_arguments()
    @argument(
        "job_ids",
        nargs="*",
        metavar="JOBID",
        help="jobs to cancel (default: this notebook's default allocation, the one %%srun uses)",
    )
    @argument("--all", action="store_true", help="cancel every live allocation of this notebook")
    @raw_line
    @line_magic
    def scancel(self, line: str, local_ns: dict[str, Any] | None = None) -> None:
        """Cancel jobs: ``%scancel`` (the default allocation, the one %srun uses), ``%scancel --all`` (every
        live allocation of this notebook) or ``%scancel 12 13``.

        A bare ``%scancel`` cancels one allocation: with several live, it names the ones still live and how to
        cancel them, so that none is left running unnoticed."""
        line = expand_line(self, line, local_ns)
        ns, rest, _ = split_line(self, "scancel", line)
        ids = [*ns.job_ids, *rest]
        session = Session.of(self.shell)
        bad = [i for i in ids if not is_job_id(i)]
        if bad:
            shown = ", ".join(b if len(b) <= 40 else b[:40] + "…" for b in bad[:5])
            raise UsageError(
                f"not a job id: {shown} (give numbers like 42 or 42_3, or nothing for the default allocation)"
            )
        if ns.all and ids:
            raise UsageError("--all cancels every live allocation of this notebook: give it no job ids")
        ids = list(dict.fromkeys(ids))  # the same id twice would be cancelled, then reported unknown
        chosen: list[Allocation] = []
        if not ids:
            chosen = session.live() if ns.all else [a for a in (session.default,) if a is not None]
            if not chosen:
                raise UsageError(
                    no_allocation_message(
                        "no live allocation to cancel in this notebook",
                        "give a job id, e.g. %scancel 42",
                        session,
                    )
                )
            for alloc in [a for a in chosen if a.job_id is None]:  # salloc has not heard back: withdraw it
                with user_errors("cannot withdraw the request"):
                    alloc.cancel()
                print("withdrew the pending request")
            ids = [str(a.job_id) for a in chosen if a.job_id is not None]
        if ids:
            self._cancel_ids(ids, session)
        if not ns.all and chosen:
            _say_still_live(session, chosen)

    @staticmethod
    def _cancel_ids(ids: list[str], session: Session) -> None:
        mine = {str(a.job_id): a for a in session.allocations}
        runner = get_runner()
        with user_errors("cannot read the queue"):
            known = queries.brief_states(ids, runner)
        for jid in ids:
            if is_own_job(jid, session):
                raise UsageError(
                    f"job {jid} is the job this session runs in: cancelling it would end this kernel too; "
                    "stop the session itself (the hub's control panel), or scancel it in a terminal"
                )
            brief = known.get(jid)
            if brief is None:
                # scancel of an unknown id succeeds silently on some Slurm versions: say it here
                raise UsageError(
                    f"cannot cancel job {jid}: Slurm does not know it (a wrong id, or it ended "
                    "long ago); see your jobs with %squeue"
                )
            if brief.state in ENDED_STATES:
                print(f"job {jid} already ended ({brief.state})")
                continue
            with user_errors(f"cannot cancel job {jid}"):
                if jid in mine:
                    mine[jid].cancel()
                else:
                    queries.cancel_job(jid, runner)
                    # followed as an allocation's cancel is: a controller restart can bring the job back
                    follow_cancelled(jid, runner)
            print(f"cancelled job {jid}")


def _say_still_live(session: Session, cancelled: list[Allocation]) -> None:
    """After a bare ``%scancel``: the allocations of this notebook that still live, and how to end them.
    ``cancelled`` (just asked to end: Slurm has not confirmed it yet) are not among them."""
    left = [a for a in session.live() if a.job_id is not None and all(a is not c for c in cancelled)]
    if left:
        shown = ", ".join(f"{a.job_id} ({a.state})" for a in left)
        ids = " ".join(str(a.job_id) for a in left)
        print(
            f"still live in this notebook: {shown}; %scancel {ids} cancels "
            f"{'them' if len(left) > 1 else 'it'} (%scancel --all: every one)"
        )


for _m in (AllocateMagics.salloc, AllocateMagics.scancel):
    _m.__doc__ = (_m.__doc__ or "") + "\n" + EXPANSION_HELP
