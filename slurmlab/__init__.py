"""slurmlab: a Jupyter-native toolkit for Slurm GPU clusters.

``import slurmlab`` is cheap: it loads no heavy package (bokeh, ipywidgets, cupy,
jupyter_server) and probes no hardware. Heavy features import what they need when used.
"""

from __future__ import annotations

from slurmlab.errors import (
    AccountingOffError,
    AllocationError,
    ControllerDownError,
    ExperimentError,
    JobNotFoundError,
    KernelCompileError,
    MissingExtraError,
    MungeError,
    NotYourJobError,
    ParseError,
    RequestError,
    SandboxError,
    SlurmError,
    SlurmlabError,
    SlurmNotConfiguredError,
    SlurmNotFoundError,
    SlurmTimeoutError,
    SourceUnavailable,
)

__version__ = "0.1.0"

# In IPython (a notebook kernel has it loaded before any cell runs) the hardware models draw themselves: viz
# registers their drawers with core, bokeh loading with the first figure. Elsewhere, on an allocation's nodes
# above all, `import slurmlab` loads none of it.
import sys as _sys

if "IPython" in _sys.modules:
    from slurmlab.viz import notebook as _viz_notebook  # noqa: F401

# The library's front door, loaded on first use so that `import slurmlab` stays light.
_LAZY = {
    "Allocation": "slurmlab.slurm.allocation",
    "Runner": "slurmlab.slurm.runner",
    "Sandbox": "slurmlab.sandbox",
    "find_leftovers": "slurmlab.slurm.allocation",
    "parse_request": "slurmlab.core.request.request",
    "explain": "slurmlab.core.request.explain",
    # what an allocation's nodes hold: probes run as its steps, or files read without one
    "node_topology": "slurmlab.slurm.probes",
    "node_mig": "slurmlab.slurm.probes",
    "explain_binding": "slurmlab.slurm.binding_probe",
    "topology_from_file": "slurmlab.slurm.hardware_files",
    "topology_from_profile": "slurmlab.slurm.hardware_files",
    "mig_from_file": "slurmlab.slurm.hardware_files",
    "mig_from_profile": "slurmlab.slurm.hardware_files",
    "NodeTopology": "slurmlab.core.gpu.node_models",
    "NodeMig": "slurmlab.core.gpu.node_models",
    "JobTopology": "slurmlab.core.gpu.job_hardware",
    "JobMig": "slurmlab.core.gpu.job_hardware",
    "BindingTable": "slurmlab.core.gpu.binding",
    "best_gpus": "slurmlab.core.gpu.placement",
    # `slurmlab doctor` as a function: the report of the checks on the cluster, a job or a node
    "doctor": "slurmlab.slurm.doctor",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slurmlab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def load_ipython_extension(ip: object) -> None:
    """``%load_ext slurmlab``: registers the magics (nothing registers at import)."""
    from slurmlab.magics import load_ipython_extension as load

    load(ip)


def unload_ipython_extension(ip: object) -> None:
    from slurmlab.magics import unload_ipython_extension as unload

    unload(ip)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "slurmlab"}]

__all__ = [
    "AccountingOffError",
    "Allocation",
    "AllocationError",
    "BindingTable",
    "ControllerDownError",
    "ExperimentError",
    "JobMig",
    "JobNotFoundError",
    "JobTopology",
    "KernelCompileError",
    "MissingExtraError",
    "MungeError",
    "NodeMig",
    "NodeTopology",
    "NotYourJobError",
    "Runner",
    "Sandbox",
    "ParseError",
    "RequestError",
    "SandboxError",
    "SlurmError",
    "SlurmNotConfiguredError",
    "SlurmNotFoundError",
    "SlurmTimeoutError",
    "SlurmlabError",
    "SourceUnavailable",
    "__version__",
    "best_gpus",
    "explain",
    "explain_binding",
    "find_leftovers",
    "load_ipython_extension",
    "mig_from_file",
    "mig_from_profile",
    "node_mig",
    "node_topology",
    "parse_request",
    "topology_from_file",
    "topology_from_profile",
    "unload_ipython_extension",
]
