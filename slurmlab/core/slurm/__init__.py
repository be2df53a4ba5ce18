"""What Slurm prints, read: the models, the text and JSON parsers, hostlists, GRES/TRES, times, job ids.

Imports nothing else of slurmlab but ``errors``: the other sub-rooms of ``core`` build on it.
"""
