"""The switch of a pending allocation to a change that starts sooner: the new one is submitted first, and the old
one cancelled only once Slurm accepted it.

API::

    resubmit(alloc, alternative=None, **changes) -> Allocation     submit the new one, then cancel the old
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmlab.core.diagnosis.alternatives import Alternative, changed_options, kept_options
from slurmlab.errors import AllocationError
from slurmlab.slurm.allocation.pending import job_id_of
from slurmlab.slurm.job_queries import job_detail

if TYPE_CHECKING:
    from slurmlab.slurm.allocation.lifecycle import Allocation

__all__ = ["resubmit"]


def resubmit(
    alloc: Allocation,
    alternative: Alternative | None = None,
    *,
    partition: str | None = None,
    gpus: int | None = None,
    gpu_type: str | None = None,
    minutes: int | None = None,
    validate: bool = True,
) -> Allocation:
    """Submit the changed request as a new allocation and, once Slurm accepted it, cancel ``alloc``.

    ``alternative``: one of :func:`why`'s (its options as ``sbatch --test-only`` checked them); otherwise the
    allocation's own request with ``partition``/``gpus``/``gpu_type``/``minutes`` changed. A refusal raises
    AllocationError and leaves ``alloc`` untouched."""
    from slurmlab.slurm.allocation.lifecycle import (
        Allocation,  # at call time: the class imports this module late
    )

    if alloc.ended:
        raise AllocationError(
            f"allocation {alloc.job_id} has ended ({alloc.state}): nothing to switch",
            hint="use %salloc for a new one",
        )
    if alternative is not None:
        options: Sequence[str] = alternative.variant.options
        validate = False  # Slurm itself checked these options with --test-only
    else:
        if partition is None and gpus is None and gpu_type is None and minutes is None:
            raise AllocationError(
                "resubmit needs an alternative or a change",
                hint="e.g. alloc.resubmit(gpus=2) or alloc.resubmit(alloc.why().sooner[0])",
            )
        job = job_detail(job_id_of(alloc), alloc.runner)
        options = changed_options(job, partition=partition, gpus=gpus, gpu_type=gpu_type, minutes=minutes)
    # what the job record cannot give back (--signal, --gpu-bind, account ...) and the name come from the request;
    # an account or QOS the alternative names itself replaces the request's (the last one given would win)
    replaced = [o.partition("=")[0] for o in options if o.startswith(("--qos=", "--account="))]
    carried = kept_options(getattr(alloc, "request_argv", ()), replaced)
    new = Allocation.submit(
        [*options, *carried],
        runner=alloc.runner,
        poller=alloc.poller,
        validate=validate,
        release_at_exit=alloc.release_at_exit,
        name=getattr(alloc, "name", None),
    )
    alloc.replaced_by = new  # before the cancel: its update tells a panel to follow the new job
    alloc.cancel()
    return new
