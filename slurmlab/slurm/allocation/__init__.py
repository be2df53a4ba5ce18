"""Allocations that live as long as the kernel: one class, :class:`Allocation`, and its collaborators.

- :mod:`.lifecycle`: the :class:`Allocation` class (submit/attach, state, wait, refresh, steps, cancel/detach);
- :mod:`.salloc`: the salloc process of a submission and the thread that reads it (:class:`.salloc.SallocProcess`);
- :mod:`.release`: this process's live allocations and their release (the guardian, atexit and TERM/HUP, the
  follower that makes a cancel stick);
- :mod:`.request`: the request pipeline against the live cluster and the salloc command;
- the questions asked of a job, over the class's public API, each reached from a one-line method that imports it
  when used: :mod:`.pending` (why it waits), :mod:`.switch` (the switch to a change that starts sooner),
  :mod:`.how_ended`, :mod:`.sampler` (usage), :mod:`.display`, the probes (:mod:`slurmlab.slurm.probes`,
  :mod:`slurmlab.slurm.binding_probe`); and :mod:`.leftovers` (the tag, and the jobs dead kernels left).

A collaborator that the class imports at its top (:mod:`.salloc`, :mod:`.release`) knows the allocation only
through a small Protocol of what it asks and reports (:class:`.salloc.Submission`, :class:`.release.Releasable`),
so no two modules here import each other (``tests/unit/test_import_rules.py``).

This package's ``__init__`` is the one place that hands out their public names.
"""

from __future__ import annotations

from slurmlab.slurm.allocation.leftovers import TAG_PREFIX, Leftovers, find_leftovers, make_tag
from slurmlab.slurm.allocation.lifecycle import ENDED_STATES, Allocation
from slurmlab.slurm.allocation.pending import PendingWhy
from slurmlab.slurm.allocation.release import RELEASE_DEADLINE, RELEASE_SIGNALS, release_all
from slurmlab.slurm.allocation.request import check_request, known_version, salloc_argv
from slurmlab.slurm.steps import RunningStep, StepResult

__all__ = [
    "ENDED_STATES",
    "RELEASE_DEADLINE",
    "RELEASE_SIGNALS",
    "TAG_PREFIX",
    "Allocation",
    "Leftovers",
    "PendingWhy",
    "RunningStep",
    "StepResult",
    "check_request",
    "find_leftovers",
    "known_version",
    "make_tag",
    "release_all",
    "salloc_argv",
]
