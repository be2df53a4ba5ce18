"""A GPU request: read from salloc/srun options, checked against what the cluster offers, explained.

A request that is submitted is built in one place only: :func:`.pipeline.check_request` (tokens -> GpuRequest ->
checked against the cluster's inventory). Builds on ``core.slurm`` and ``core.gpu``.
"""
