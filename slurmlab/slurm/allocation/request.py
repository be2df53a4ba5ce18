"""What an allocation asks for: the request pipeline against the live cluster, and the salloc command it becomes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from slurmlab.core.request.request import GpuRequest
from slurmlab.errors import ParseError, SlurmError
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["check_request", "known_version", "options_and_name", "request_to_submit", "salloc_argv"]


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
            raise TypeError(
                "a GpuRequest carries its own job name: check the request with --job-name=NAME "
                "instead of passing name="
            )
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
