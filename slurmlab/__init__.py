"""slurmlab: a Jupyter-native toolkit for Slurm GPU clusters.

The public surface is what ``__all__`` names: the names below, and the modules among them with their own
``__all__`` (``slurmlab.viz``: figures; ``slurmlab.teach``: what the workshop lessons use to look at the cluster
and check an exercise). Every other module is internal and may move; the lessons use public names only.

``import slurmlab`` is cheap: it loads no heavy package (bokeh, ipywidgets, cupy,
jupyter_server, numpy) and probes no hardware. Each name is loaded on first use.
"""

import typing as _typing

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
# registers their figures with the running shell's display formatter, by class name (nothing imported; bokeh
# loads with the first figure). Elsewhere, on an allocation's nodes above all, `import slurmlab` loads none of it
# (IPython is looked up, never imported, here).
import sys as _sys

_ipython = _sys.modules.get("IPython")
if _ipython is not None and callable(getattr(_ipython, "get_ipython", None)):
    from slurmlab.viz import notebook as _viz_notebook

    _viz_notebook.install(_ipython.get_ipython())

# The library's front door, loaded on first use so that `import slurmlab` stays light: name -> its module
_LAZY = {
    "Allocation": "slurmlab.slurm.allocation",
    "find_leftovers": "slurmlab.slurm.allocation",
    # which Slurm this process talks to: every Slurm command goes through the one runner
    "Runner": "slurmlab.slurm.runner",
    "get_runner": "slurmlab.slurm.runner",
    "set_runner": "slurmlab.slurm.runner",
    "list_nodes": "slurmlab.slurm.queries",
    "Sandbox": "slurmlab.sandbox",
    "parse_request": "slurmlab.core.request.request",
    "explain": "slurmlab.core.request.explain",
    # what a node holds, without an allocation: a saved capture, a profile or text (one function each, the
    # source as an argument); an allocation's nodes answer live through alloc.topology() / alloc.mig()
    "topology": "slurmlab.slurm.hardware_files",
    "mig": "slurmlab.slurm.hardware_files",
    "explain_binding": "slurmlab.slurm.binding_probe",
    "NodeTopology": "slurmlab.core.gpu.node_models",
    "NodeMig": "slurmlab.core.gpu.node_models",
    "JobTopology": "slurmlab.core.gpu.job_hardware",
    "JobMig": "slurmlab.core.gpu.job_hardware",
    "BindingTable": "slurmlab.core.gpu.binding",
    "MigLayout": "slurmlab.core.gpu.mig",
    "best_gpus": "slurmlab.core.gpu.placement",
    "TopologyExplorer": "slurmlab.widgets.explorer",
    # the experiments, named as `slurmlab timeslice|isolation` and %gpu_timeslice / %gpu_isolation name them
    "timeslice": "slurmlab.experiments.timeslice",
    "TimeslicePlan": "slurmlab.experiments.plan",
    "isolation": "slurmlab.experiments.verify",
    # `slurmlab doctor` as a function: the report of the checks on the cluster, a job or a node
    "doctor": "slurmlab.slurm.doctor",
}
# a public name whose module calls it otherwise: public name -> the module's name for it
_RENAMED = {"timeslice": "run", "isolation": "verify"}
# the public modules, each with its own curated __all__
_SUBMODULES = ("teach", "viz")

if _typing.TYPE_CHECKING:  # what type checkers and editors see: the same names from the same modules as _LAZY
    from slurmlab import teach, viz
    from slurmlab.core.gpu.binding import BindingTable
    from slurmlab.core.gpu.job_hardware import JobMig, JobTopology
    from slurmlab.core.gpu.mig import MigLayout
    from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
    from slurmlab.core.gpu.placement import best_gpus
    from slurmlab.core.request.explain import explain
    from slurmlab.core.request.request import parse_request
    from slurmlab.experiments.plan import TimeslicePlan
    from slurmlab.experiments.timeslice import run as timeslice
    from slurmlab.experiments.verify import verify as isolation
    from slurmlab.sandbox import Sandbox
    from slurmlab.slurm.allocation import Allocation, find_leftovers
    from slurmlab.slurm.binding_probe import explain_binding
    from slurmlab.slurm.doctor import doctor
    from slurmlab.slurm.hardware_files import mig, topology
    from slurmlab.slurm.queries import list_nodes
    from slurmlab.slurm.runner import Runner, get_runner, set_runner
    from slurmlab.widgets.explorer import TopologyExplorer


def __getattr__(name: str) -> object:
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slurmlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBMODULES})


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
    "MigLayout",
    "MissingExtraError",
    "MungeError",
    "NodeMig",
    "NodeTopology",
    "NotYourJobError",
    "ParseError",
    "RequestError",
    "Runner",
    "Sandbox",
    "SandboxError",
    "SlurmError",
    "SlurmNotConfiguredError",
    "SlurmNotFoundError",
    "SlurmTimeoutError",
    "SlurmlabError",
    "SourceUnavailable",
    "TimeslicePlan",
    "TopologyExplorer",
    "__version__",
    "best_gpus",
    "doctor",
    "explain",
    "explain_binding",
    "find_leftovers",
    "get_runner",
    "isolation",
    "list_nodes",
    "load_ipython_extension",
    "mig",
    "parse_request",
    "set_runner",
    "teach",
    "timeslice",
    "topology",
    "unload_ipython_extension",
    "viz",
]
