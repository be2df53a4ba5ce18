"""Experiments that run inside an allocation: time-slicing and isolation.

- :mod:`.node`: what runs ON a compute node — the workers (NumPy on the CPU, CuPy on a GPU) that log
  when they run on one shared clock, the CUDA kernels, the verify task. Standard library, NumPy and
  CuPy only, so a node needs little more than slurmlab's files.
- orchestration, on the login node: :mod:`.plan` (one :class:`~.plan.TimeslicePlan` per run),
  :mod:`.timeslice` (placing and running it, locally or as steps), :mod:`.workers` (the common start),
  :mod:`.steps` (workers as ``srun --overlap`` steps), :mod:`.verify` (the isolation step), all typed
  against :mod:`.protocols` (what an allocation offers), never importing ``slurmlab.slurm``.
- judging and results: :mod:`.analysis` turns logs into a :class:`~.timeslice_result.TimesliceResult`;
  :mod:`.isolation` and :mod:`.slurm_view` check what a task got against what Slurm granted, into an
  :mod:`.isolation_result`; :mod:`.bandwidth` compares copy rates with the hardware's.

The Gantt chart of a run is drawn by :mod:`slurmlab.viz.gantt`. Nothing here imports a heavy package
or probes hardware at import time.
"""

from __future__ import annotations
