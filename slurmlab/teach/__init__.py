"""The teacher's helpers: what a lesson uses, beside :mod:`slurmlab`, to look at the cluster it runs on and to
check an exercise. Each is the one the library itself uses, so a lesson reads the cluster as slurmlab does::

    from slurmlab.teach import is_mig_type
    mig_types = {t for n in slurmlab.list_nodes() for t in n.gpu_types() if is_mig_type(t)}

- ``current_user()``: whose jobs this process acts on (the effective uid's name, as Slurm's munge credential
  carries it; never ``$USER``, which anyone can set).
- ``sandbox_in_use()``: the sandbox this kernel talks to, or None on a real cluster (or with no Slurm at all).
- ``gpu_cap()``: the most GPUs this user may hold at once under the site's QOS and association limits (a
  workshop seat's share), with the limit that sets it: a lesson sizes its requests to fit every seat.
- ``explain_reason(reason)``: a pending job's reason (``QOSMaxGRESPerUser``, ``Priority``, ``Reservation`` …)
  in the words slurmlab's panels use (``.words``), with what would help (``.hint``); None for no reason.
- ``probe_node(alloc, node=None)``: what a one-task step of ``alloc`` sees there: its node, its CPUs, and whether
  its Python can use a GPU (``backend``: ``"cupy"`` or ``"cpu"``), as the experiments decide it.
- ``is_mig_type(name)``: whether a GPU type names a MIG profile (``1g.18gb``), as Slurm types a MIG slice.
- ``table_for_model(model)``: a GPU model's MIG profile table (``"H200-141GB"``, or a name as nvidia-smi prints
  it): each profile's compute and memory slices, how many fit, where each may start.
- ``parse_cpu_list(text)``: ``"0-3,8"`` -> the set of CPU ids, as Slurm and Linux write a CPU list.
- ``fmt_ns(ns)``: a duration in nanoseconds in words a reader takes in (``"1.024 ms"``, ``"830.0 µs"``).

Nothing is imported until used: ``import slurmlab.teach`` stays as light as ``import slurmlab``.
"""

import typing as _typing

__all__ = [
    "current_user",
    "explain_reason",
    "fmt_ns",
    "gpu_cap",
    "is_mig_type",
    "parse_cpu_list",
    "probe_node",
    "sandbox_in_use",
    "table_for_model",
]

# name -> the module that defines it (loaded on first use)
_LAZY = {
    "current_user": "slurmlab.slurm.identity",
    "explain_reason": "slurmlab.core.slurm.reasons",
    "fmt_ns": "slurmlab.experiments.timeslice_result",
    "gpu_cap": "slurmlab.slurm.gpu_cap",
    "is_mig_type": "slurmlab.core.gpu.mig",
    "parse_cpu_list": "slurmlab.core.gpu.devices",
    "probe_node": "slurmlab.experiments.steps",
    "sandbox_in_use": "slurmlab.magics.sandbox",
    "table_for_model": "slurmlab.core.gpu.mig",
}
_RENAMED: dict[str, str] = {}

if _typing.TYPE_CHECKING:  # what type checkers and editors see: the same names from the same modules as _LAZY
    from slurmlab.core.gpu.devices import parse_cpu_list
    from slurmlab.core.gpu.mig import is_mig_type, table_for_model
    from slurmlab.core.slurm.reasons import explain_reason
    from slurmlab.experiments.steps import probe_node
    from slurmlab.experiments.timeslice_result import fmt_ns
    from slurmlab.magics.sandbox import sandbox_in_use
    from slurmlab.slurm.gpu_cap import gpu_cap
    from slurmlab.slurm.identity import current_user


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slurmlab.teach' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
