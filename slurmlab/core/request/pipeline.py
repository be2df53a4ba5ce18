"""The one request pipeline: salloc tokens -> GpuRequest -> checked against what the cluster offers.

Every allocation request slurmlab submits is built here, whoever asks (``Allocation.submit``, ``%salloc``,
the request form)::

    request = check_request(["--gpus=h100:2", "-t", "30"], inventory, version=(24, 11, 5))
    request.to_argv()       # what salloc gets
    request.checked.note()  # 'checked against the cluster (2 partitions), Slurm 24.11.5'

Pure: the Slurm room fetches the inventory and the version and calls :func:`check_request`
(:func:`slurmlab.slurm.allocation.check_request`). A malformed or impossible request raises
:class:`~slurmlab.core.request.request.RequestProblems` (a RequestError) naming every problem and its fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from slurmlab.core.request.inventory import ClusterInventory
from slurmlab.core.request.request import Checked, GpuRequest, parse_request
from slurmlab.core.request.validate import validate
from slurmlab.errors import RequestError

__all__ = ["CommandInRequest", "check_request", "is_checked", "read_request"]


class CommandInRequest(RequestError):
    """An allocation request with a command after its options: an allocation runs nothing itself.

    ``command`` holds what was given, so a caller with its own words for this (``%salloc``) can use them."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = tuple(command)
        super().__init__(
            f"an allocation takes no command, but got {' '.join(self.command)!r}",
            hint="run commands as steps once it is granted: alloc.srun([...]) or %srun …",
        )


def read_request(tokens_or_request: Sequence[str] | GpuRequest) -> GpuRequest:
    """The request the tokens stand for (a GpuRequest passes through), refused if malformed or with a command.

    The first stage of :func:`check_request`, apart so that the Slurm room refuses a malformed line before it
    asks the cluster anything."""
    if isinstance(tokens_or_request, GpuRequest):
        request = tokens_or_request
    else:
        request = parse_request(tokens_or_request)
    if request.command:
        raise CommandInRequest(request.command)
    return request


def check_request(
    tokens_or_request: Sequence[str] | GpuRequest,
    inventory: ClusterInventory | None,
    *,
    version: Sequence[int] | None = None,
    why_no_inventory: str = "",
) -> GpuRequest:
    """The validated request: parsed (unless already a GpuRequest), checked, with ``checked`` saying against what.

    ``inventory`` is what the cluster offers; None runs only the checks the request and ``version`` allow
    (a dry run whose controller did not answer: ``why_no_inventory`` says why). ``version`` is the cluster's
    Slurm version: what one version takes another refuses. Raises RequestProblems listing every problem.
    """
    request = read_request(tokens_or_request)
    checked = validate(request, inventory, version=version)
    # a request checked before (a dry run's, checked again against the cluster) keeps each warning once
    return dataclasses.replace(
        checked,
        warnings=tuple(dict.fromkeys(checked.warnings)),
        checked=Checked(
            argv=tuple(checked.to_argv()),
            partitions=len(inventory.partitions) if inventory is not None else None,
            version=tuple(version) if version else None,
            why_not="" if inventory is not None else why_no_inventory,
        ),
    )


def is_checked(request: GpuRequest) -> bool:
    """True when :func:`check_request` checked ``request`` against a cluster and it has not changed since."""
    done = request.checked
    return done is not None and done.against_cluster and done.argv == tuple(request.to_argv())
