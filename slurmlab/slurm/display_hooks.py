"""The renderers an allocation displays itself with, registered by the widgets room (``%load_ext slurmlab`` adds
the live panel). A module of its own, outside :mod:`slurmlab.slurm.allocation`: registering a renderer must not load
the allocation machinery (the poller, the queries, the guardian), so that ``%load_ext`` stays cheap."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmlab.slurm.allocation.lifecycle import Allocation

__all__ = ["DISPLAY_HOOKS"]

# each returns a mime bundle for the allocation, or None to leave it to the next (the newest is asked first)
DISPLAY_HOOKS: list[Callable[[Allocation], dict[str, object] | None]] = []
