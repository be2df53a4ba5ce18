"""slurmlab: a Jupyter-native toolkit for Slurm GPU clusters.

``import slurmlab`` is cheap: it loads no heavy package (bokeh, ipywidgets, cupy,
jupyter_server) and probes no hardware. Heavy features import what they need when used.
"""

from __future__ import annotations

from slurmlab.errors import (
    AllocationError,
    ControllerDownError,
    JobNotFoundError,
    MissingExtraError,
    MungeError,
    ParseError,
    RequestError,
    SandboxError,
    SlurmError,
    SlurmlabError,
    SlurmNotFoundError,
    SlurmTimeoutError,
)

__version__ = "0.1.0"

__all__ = [
    "AllocationError",
    "ControllerDownError",
    "JobNotFoundError",
    "MissingExtraError",
    "MungeError",
    "ParseError",
    "RequestError",
    "SandboxError",
    "SlurmError",
    "SlurmNotFoundError",
    "SlurmTimeoutError",
    "SlurmlabError",
    "__version__",
]
