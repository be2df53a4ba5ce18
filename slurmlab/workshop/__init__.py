"""A workshop on one machine: seats (Unix accounts), a sandbox with accounting that shares its GPUs fairly
among them, the JupyterHub they log in to, and each student's copy of the lessons (``slurmlab workshop``).

:class:`Workshop` brings a class up, resets it and takes it down; :mod:`.plan` and :mod:`.seats` decide what
that means without doing it.
"""

from slurmlab.workshop.control import ResetReport, SeatJob, Workshop
from slurmlab.workshop.plan import WorkshopPlan

__all__ = ["ResetReport", "SeatJob", "Workshop", "WorkshopPlan"]
