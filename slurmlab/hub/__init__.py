"""A real JupyterHub on the sandbox, as sites run one: each user's Jupyter server is a Slurm job.

JupyterHub and batchspawner from PyPI (``pip install 'slurmlab[hub]'``), configurable-http-proxy from npm,
batchspawner's SlurmSpawner with a form for GPUs, time and partition (:mod:`.spawner`), all on 127.0.0.1.
:class:`Hub` starts and stops it (``slurmlab hub up`` / ``down``); :mod:`.ood` is the Open OnDemand shape, a
batch script that starts ``jupyter lab`` inside a job.
"""

from __future__ import annotations

import typing as _typing

__all__ = ["Hub", "HubJob"]

if _typing.TYPE_CHECKING:
    from slurmlab.hub.control import Hub, HubJob


def __getattr__(name: str) -> object:
    # loaded on first use: every user's job imports this package for slurmlab.hub.seat, before its server, and
    # needs none of the hub's control (the sandbox's modules with it: 0.1 CPU-s a server)
    if name in __all__:
        from slurmlab.hub import control

        return getattr(control, name)
    raise AttributeError(f"module 'slurmlab.hub' has no attribute {name!r}")
