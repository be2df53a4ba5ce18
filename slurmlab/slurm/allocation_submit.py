"""Submitting an allocation: the request pipeline against the live cluster, the salloc command, and the salloc
process that runs in the background until the controller has given the job an id.

The functions taking an ``alloc`` are :class:`~slurmlab.slurm.allocation.Allocation`'s own, kept apart so that
the class reads as its lifecycle; they change its state the way its methods would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from slurmlab.core.request.request import GpuRequest
from slurmlab.errors import AllocationError, ControllerDownError, MungeError, ParseError, SlurmError
from slurmlab.slurm.runner import Runner, get_runner
from slurmlab.slurm.steps import close_quietly

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = [
    "check_request",
    "find_id_by_name",
    "kill_salloc",
    "known_version",
    "may_still_be_made",
    "not_created",
    "options_and_name",
    "request_to_submit",
    "salloc_argv",
    "start_salloc",
]

_SALLOC_ID = re.compile(r"(?:Pending|Granted) job allocation (\d+)")
_SALLOC_ERROR = re.compile(r"^salloc: error: (.*)$")


# ---- the request -------------------------------------------------------------------------------
def check_request(
    tokens_or_request: Sequence[str] | GpuRequest, runner: Runner | None = None, *, need_cluster: bool = True
) -> GpuRequest:
    """The one request pipeline (:func:`slurmlab.core.request.pipeline.check_request`) against the live cluster.

    The request is read first, so a malformed line or a command never reaches Slurm; then the cluster is asked
    what it offers and which Slurm it runs. With ``need_cluster`` a controller that does not answer is an
    error; without (a dry run) the request is checked on its own and ``request.checked`` says why.
    Raises RequestError (``RequestProblems``) listing every problem with its fix.
    """
    from slurmlab.core.request import pipeline
    from slurmlab.slurm.inventory import check_with_inventory

    request = pipeline.read_request(tokens_or_request)
    runner = runner or get_runner()
    try:
        # the inventory cached per cluster; a refusal is confirmed against a fresh one (slurm/inventory.py).
        # What one Slurm accepts another refuses (--uid, --gres=gpu beside --gpus-per-node): hence the version
        return check_with_inventory(request, runner, version=known_version(runner))
    except SlurmError as exc:
        if need_cluster:
            raise
        return pipeline.check_request(request, None, why_no_inventory=exc.message)


def known_version(runner: Runner) -> tuple[int, ...] | None:
    """The cluster's Slurm version for validation, or None where it cannot be read (validation then warns
    about what differs between versions instead of refusing)."""
    from slurmlab.slurm import queries

    try:
        return queries.slurm_version(runner)
    except (SlurmError, ParseError):
        return None


def request_to_submit(
    request: Sequence[str] | GpuRequest, *, name: str | None, runner: Runner | None, validate: bool
) -> tuple[list[str], str | None, tuple[str, ...]]:
    """What :meth:`Allocation.submit` hands salloc: (options, job name, validation warnings).

    A GpuRequest the pipeline already checked is not checked twice; tokens are checked unless ``validate`` is
    false, and then go to Slurm as given."""
    from slurmlab.core.request.pipeline import is_checked

    if isinstance(request, str):
        raise TypeError("argv must be a list of arguments, e.g. ['--gpus=2', '-t', '30']")
    if isinstance(request, GpuRequest):
        if name is not None:
            raise TypeError("a GpuRequest carries its own job name: check the request with --job-name=NAME "
                            "instead of passing name=")
        if not is_checked(request):
            request = check_request(request, runner)
    elif validate:
        tokens = [f"--job-name={name}", *request] if name else list(request)
        request = check_request(tokens, runner)
    if isinstance(request, GpuRequest):
        argv, name = options_and_name(request)
        return argv, name, request.warnings
    return list(request), name, ()  # unchecked: the tokens go to Slurm as given


def salloc_argv(
    request: Sequence[str] | GpuRequest, *, name: str | None = None, tag: str | None = None
) -> list[str]:
    """The exact command an allocation runs (``--dry-run`` shows it to the user).

    A GpuRequest's own job name stands first, where ``name`` would: the same place whoever named the job."""
    if isinstance(request, GpuRequest):
        options, own_name = options_and_name(request)
        return salloc_argv(options, name=own_name or name, tag=tag)
    argv = ["salloc", "--no-shell"]
    if name:
        argv.append(f"--job-name={name}")
    if tag:
        argv.append(f"--comment={tag}")
    return argv + [str(a) for a in request]


def options_and_name(request: GpuRequest) -> tuple[list[str], str | None]:
    """The request's salloc options without its job name, and the name (rendered apart, first)."""
    return dataclasses.replace(request, job_name=None).to_argv(), request.job_name


# ---- the salloc process ------------------------------------------------------------------------
def start_salloc(alloc: Allocation) -> None:
    """Run ``salloc --no-shell`` for ``alloc`` and read what it says in a thread of its own."""
    argv = salloc_argv(alloc.request_argv, name=alloc.name, tag=alloc.tag)
    proc = alloc.runner.popen(argv)
    alloc._salloc = proc
    alloc._guard(salloc_pid=proc.pid)

    def stuck_on_munge(exc: SlurmError) -> None:
        alloc._lookup_error = exc  # what not_created says, in the runner's words

    # the runner's munge probe, as for every command: a salloc stuck on munged is stopped within seconds
    alloc.runner.watch(proc, argv, answered=alloc._id_known.is_set, on_error=stuck_on_munge)
    threading.Thread(target=_read_salloc, args=(alloc, proc), name="slurmlab-salloc", daemon=True).start()


def _read_salloc(alloc: Allocation, proc: subprocess.Popen[str]) -> None:
    """salloc's stderr, line by line: the job id as soon as the controller queued it, then its errors."""
    assert proc.stderr is not None
    try:
        _read_lines(alloc, proc.stderr)
    finally:
        close_quietly(proc.stderr, proc.stdout)  # salloc --no-shell prints nothing on stdout
    rc = proc.wait()
    if rc != 0 and alloc.job_id is None:
        alloc.error = alloc.error or "\n".join(alloc.salloc_messages) or f"salloc exited with {rc}"
        alloc._set_state("REJECTED")
        alloc._id_known.set()
    elif alloc.job_id is not None:
        alloc.poller.poke()


def _read_lines(alloc: Allocation, stderr: Iterable[str]) -> None:
    for raw in stderr:
        line = raw.rstrip("\n")
        alloc.salloc_messages.append(line)
        m = _SALLOC_ID.search(line)
        if m and alloc.job_id is None:
            alloc.job_id = m.group(1)
            alloc._guard()
            alloc._set_state("PENDING" if "Pending" in line else "RUNNING")
            alloc._id_known.set()
            alloc._start_watch()
            continue
        m = _SALLOC_ERROR.match(line)
        if m:
            alloc.error = m.group(1) if alloc.error is None else f"{alloc.error}; {m.group(1)}"


def find_id_by_name(alloc: Allocation) -> None:
    """Look the job up by its unique name (salloc can be slow to print its id)."""
    from slurmlab.slurm import queries

    try:
        ids = queries.job_ids_by_name(alloc.name or "", alloc.runner)
    except SlurmError as exc:
        alloc._lookup_error = exc
        return
    if ids:
        alloc.job_id = ids[-1]
        alloc._guard()
        alloc._id_known.set()
        alloc._start_watch()


def kill_salloc(proc: subprocess.Popen[str] | None) -> None:
    """End a salloc still running; SIGINT first, which withdraws a pending request. One deaf to it (started
    with SIGINT ignored, or hung) is killed with its whole session (the runner starts it in its own), so no
    process it started outlives it."""
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)  # salloc withdraws a pending request on SIGINT
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired, PermissionError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # a leader that left its session, still ours to end
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def may_still_be_made(alloc: Allocation) -> bool:
    """Whether the controller may still make the job of a submission given up before salloc said its id: salloc
    was stopped while it waited, or gave up on a controller that did not answer. Its request can sit unread in a
    frozen controller's socket and be read later (a refusal, or a munge failure before sending, makes nothing)."""
    from slurmlab.slurm.failures import classify_failure

    if alloc.state != "REJECTED":
        return True
    return isinstance(classify_failure(["salloc"], 1, alloc.error or ""), ControllerDownError)


def not_created(alloc: Allocation) -> AllocationError:
    """Why no job came out, with the one hint that fits the cause.

    A request hint only when Slurm refused the request; munge, the controller and timeouts
    keep the runner's own hint, never a second one stacked on it.
    """
    cause = alloc._lookup_error
    if cause is None and alloc.error is not None:
        cause = alloc.runner.failure(["salloc"], 1, alloc.error)  # with the hint that fits (a sandbox's --dir)
    if isinstance(cause, (MungeError, ControllerDownError)):
        return AllocationError(f"the allocation was not created: {cause.message}", hint=cause.hint)
    if cause is None:
        return AllocationError(
            "the allocation was not created: salloc gave no job id in time",
            hint="the controller may be slow or down: check it with `scontrol ping`, then retry",
        )
    return AllocationError(
        f"the allocation was not created: {alloc.error or cause.message}",
        hint=cause.hint or "check the request with `%salloc --dry-run …` and the cluster with `sinfo`",
    )
