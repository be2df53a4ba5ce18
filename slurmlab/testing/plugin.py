"""pytest plugin of slurmlab (registered through the ``pytest11`` entry point).

Fixtures for a real local Slurm sandbox are added by :mod:`slurmlab.sandbox`.
"""
