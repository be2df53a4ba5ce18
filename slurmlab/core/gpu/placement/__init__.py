"""The best-connected set of GPUs on a node, what a worse set loses, and the salloc line that asks for it.

:mod:`.choice` scores the sets (:func:`best_gpus`), :mod:`.loss` says in words what a chosen set loses against the
ideal one, :mod:`.request` turns a choice into ``salloc`` advice and reads which GPUs a node's jobs hold. Pure data,
no I/O.
"""

from __future__ import annotations

from slurmlab.core.gpu.placement.choice import GpuChoice, best_gpus
from slurmlab.core.gpu.placement.loss import is_switched, links_phrase, numa_phrase, set_phrase, what_is_lost
from slurmlab.core.gpu.placement.request import (
    INDICES_NOTE,
    SallocAdvice,
    TakenGpus,
    salloc_advice,
    taken_on_node,
)

__all__ = [
    "INDICES_NOTE",
    "GpuChoice",
    "SallocAdvice",
    "TakenGpus",
    "best_gpus",
    "is_switched",
    "links_phrase",
    "numa_phrase",
    "salloc_advice",
    "set_phrase",
    "taken_on_node",
    "what_is_lost",
]
