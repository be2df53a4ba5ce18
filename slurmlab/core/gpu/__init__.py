"""GPUs of one node: topology (NVLink/PCIe/NUMA), MIG layouts, ``nvidia-smi`` parsers, best-connected sets.

Builds on ``core.slurm`` (GRES); pure data, no I/O.
"""
