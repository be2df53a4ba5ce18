"""A GPU request: read from salloc/srun options, checked against what the cluster offers, explained.

Builds on ``core.slurm`` and ``core.gpu``.
"""
