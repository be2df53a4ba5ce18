"""IPython magics: ``%salloc``, ``%srun``/``%%srun``, ``%squeue``, ``%sinfo``, ``%scancel``, ``%slurm``,
``%gpu_timeslice``, ``%gpu_isolation``, ``%sacct``, ``%sshare``.

Load with ``%load_ext slurmlab`` (or ``%load_ext slurmlab.magics``). Nothing registers at import, and loading
imports only what registering the magics needs: the Slurm layer, the widgets and the request language load
on first use (``tests/unit/magics/test_load_ext_imports.py`` holds the list). Loading
also makes slurmlab's expected errors, from magics and plain calls alike (``a.mig()``), show as one line with
the fix instead of a traceback (:mod:`slurmlab.magics.error_display`; ``%slurm debug on`` for the full one).
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

_MAGIC_NAMES = {
    "line": ("salloc", "scancel", "squeue", "sinfo", "slurm", "srun", "gpu_timeslice", "gpu_isolation", "sacct",
             "sshare"),
    "cell": ("srun",),
}


def load_ipython_extension(ip: Any) -> None:
    from slurmlab.magics import error_display
    from slurmlab.magics.accounting import AccountingMagics
    from slurmlab.magics.allocate import AllocateMagics
    from slurmlab.magics.experiments import ExperimentMagics
    from slurmlab.magics.status import StatusMagics
    from slurmlab.magics.steps import StepMagics

    for cls in (AllocateMagics, StepMagics, StatusMagics, ExperimentMagics, AccountingMagics):
        ip.register_magics(cls)
    error_display.install(ip)  # slurmlab's expected errors: one line with the fix, not a traceback
    hooks, hook = _display_hooks()
    if hook not in hooks:
        hooks.append(hook)  # an Allocation now displays as its live panel


def unload_ipython_extension(ip: Any) -> None:
    from slurmlab.magics import error_display

    error_display.uninstall(ip)
    hooks, hook = _display_hooks()
    while hook in hooks:
        hooks.remove(hook)
    magics = ip.magics_manager.magics
    for kind, names in _MAGIC_NAMES.items():
        for name in names:
            magics[kind].pop(name, None)


def _panel_bundle(alloc: Any) -> dict[str, object] | None:
    """The live panel of an Allocation; the widgets room is imported when the first one displays."""
    from slurmlab.widgets.panel import display_bundle

    return display_bundle(alloc)


def _display_hooks() -> tuple[list[Any], Any]:
    # allocation_display holds the hook list without the Slurm layer: %load_ext must not import the
    # allocation machinery (asyncio, the poller, the queries), only what registering the magics needs
    from slurmlab.slurm.allocation_display import DISPLAY_HOOKS

    return DISPLAY_HOOKS, _panel_bundle
