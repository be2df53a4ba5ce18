"""Re-running an ``%salloc`` cell: which earlier allocation the same cell made, and what to say about it.

Running ``x = %salloc --gpus=1`` again is most often a re-run of the notebook, not a wish for a second job, and
a second job would hold GPUs nobody uses. A cell is known by the ``cellId`` JupyterLab (and Notebook 7) put in
the metadata of each execute request; a front end without it is matched by the request line, in this kernel.
Within one execution of a cell, several ``%salloc`` lines are meant (a loop, two lines): only an earlier
execution counts as a re-run.

The same request typed in *another* cell while this kernel's allocation for it still lives is most often a
copied line or a notebook run twice over, and is treated the same way: reused, said in one line, ``--new``
for a second job, ``--replace`` to cancel the first (``find_same_request``).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = [
    "Origin",
    "current_origin",
    "find_rerun",
    "find_same_request",
    "rerun_warning",
    "same_request_warning",
]


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where an allocation was asked for: the cell (None when the front end does not say), the execution
    request (None outside a kernel), the request in canonical form (``-t 5`` and ``--time=5`` are one) and as
    typed."""

    cell_id: str | None
    execution: str | None
    request: tuple[str, ...]
    typed: str = ""

    def same_run(self, other: Origin) -> bool:
        return self.execution is not None and self.execution == other.execution


def current_origin(shell: Any, request: Iterable[str], typed: str = "") -> Origin:
    """The Origin of the line being run in ``shell`` (an IPython shell, in a kernel or not)."""
    parent = _parent_message(shell)
    metadata = parent.get("metadata") if isinstance(parent.get("metadata"), Mapping) else {}
    header = parent.get("header") if isinstance(parent.get("header"), Mapping) else {}
    if not header:
        header = getattr(shell, "parent_header", None) or {}
        header = header.get("header", header) if isinstance(header, Mapping) else {}
    cell = metadata.get("cellId") if isinstance(metadata, Mapping) else None
    msg = header.get("msg_id") if isinstance(header, Mapping) else None
    return Origin(str(cell) if cell else None, str(msg) if msg else None, tuple(request), typed.strip())


def _parent_message(shell: Any) -> Mapping[str, Any]:
    kernel = getattr(shell, "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    if callable(get_parent):
        try:
            parent = get_parent("shell")
        except Exception:  # an older ipykernel or a kernel that keeps no parent: match by the line instead
            return {}
        return parent if isinstance(parent, Mapping) else {}
    return {}


def find_rerun(
    origin: Origin, made: Iterable[tuple[Allocation, Origin]], claimed: Iterable[Allocation] = ()
) -> Allocation | None:
    """The live allocation an earlier execution of the same cell made (same request first), or None.

    ``made`` is (allocation, origin) of this kernel's live allocations, oldest first; ``claimed`` are those
    this execution of the cell already matched (a cell with two ``%salloc`` lines re-runs as two)."""
    taken = {id(a) for a in claimed}
    candidates = [(a, o) for a, o in made if id(a) not in taken and not o.same_run(origin)]
    if origin.cell_id is not None:
        candidates = [(a, o) for a, o in candidates if o.cell_id == origin.cell_id]
        same = [a for a, o in candidates if o.request == origin.request]
        if same:
            return same[-1]
        return candidates[-1][0] if candidates else None
    same = [a for a, o in candidates if o.cell_id is None and o.request == origin.request]
    return same[-1] if same else None


def rerun_warning(alloc: Allocation, origin: Origin, earlier: Origin) -> str:
    """The one line said instead of submitting a second job."""
    flags = earlier.typed or shlex.join(earlier.request) or "no options"
    changed = (
        ""
        if earlier.request == origin.request
        else f"; this run asks for {origin.typed or shlex.join(origin.request)!r} instead"
    )
    return (
        f"warning: this cell's allocation {alloc.job_id} ({flags}) is still {alloc.state}: reusing it, "
        f"no second job{changed}. Add --replace to cancel it and submit again, or --new to keep both."
    )


def find_same_request(origin: Origin, made: Iterable[tuple[Allocation, Origin]]) -> Allocation | None:
    """The newest live allocation that an earlier execution (of any cell) made with the same request (in
    canonical form), or None. ``made`` is as for :func:`find_rerun`; this execution's own ones do not count."""
    same = [a for a, o in made if o.request == origin.request and not o.same_run(origin)]
    return same[-1] if same else None


def same_request_warning(alloc: Allocation, origin: Origin) -> str:
    """The one line said instead of submitting a second job for a request this kernel already holds."""
    asked = origin.typed or shlex.join(origin.request) or "no options"
    return (
        f"warning: this kernel already holds job {alloc.job_id} ({alloc.state}), made by another cell with the "
        f"same request ({asked}): reusing it, no second job. Add --new to submit another and keep both, or "
        "--replace to cancel it and submit again."
    )
