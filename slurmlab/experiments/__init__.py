"""Experiments that run inside an allocation: time-slicing and isolation.

Workers (NumPy on the CPU, CuPy on a GPU) log when they run on one shared clock;
:mod:`.analysis` turns the logs into slices, shares, overlap and a classification;
:mod:`.isolation` checks what a task really got against what Slurm granted. Nothing
here imports a heavy package or probes hardware at import time.
"""

from __future__ import annotations
