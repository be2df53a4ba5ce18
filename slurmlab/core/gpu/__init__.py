"""GPUs of one node: topology (NVLink/PCIe/NUMA), MIG layouts, ``nvidia-smi`` parsers, best-connected sets,
hardware profiles and the sandbox's hardware file read from text, and the judgement of a job's binding.

Builds on ``core.slurm`` (GRES); pure data, no I/O.
"""
