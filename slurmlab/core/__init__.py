"""The pure room: standard library only, no I/O, mypy --strict.

Three sub-rooms, each importing only those before it: ``core.slurm`` (what Slurm prints, read),
``core.gpu`` (a node's GPUs: topology, MIG, nvidia-smi), ``core.request`` (a GPU request, checked and explained).
"""
