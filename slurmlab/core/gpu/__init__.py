"""GPUs of one node: topology (NVLink/PCIe/NUMA), MIG layouts, ``nvidia-smi`` parsers, best-connected sets,
hardware profiles and the sandbox's hardware file read from text, and the judgement of a job's binding; a job's
nodes together (:mod:`.job_hardware`), and how all of them show themselves in a notebook (:mod:`.figure_display`).

Builds on ``core.slurm`` (GRES); pure data, no I/O.
"""
