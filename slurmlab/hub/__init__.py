"""A real JupyterHub on the sandbox, as sites run one: each user's Jupyter server is a Slurm job.

JupyterHub and batchspawner from PyPI (``pip install 'slurmlab[hub]'``), configurable-http-proxy from npm,
batchspawner's SlurmSpawner with a form for GPUs, time and partition (:mod:`.spawner`), all on 127.0.0.1.
:class:`Hub` starts and stops it (``slurmlab hub up`` / ``down``); :mod:`.ood` is the Open OnDemand shape, a
batch script that starts ``jupyter lab`` inside a job.
"""

from slurmlab.hub.control import Hub, HubJob

__all__ = ["Hub", "HubJob"]
