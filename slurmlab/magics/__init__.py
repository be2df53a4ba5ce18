"""IPython magics: ``%salloc``, ``%srun``/``%%srun``, ``%squeue``, ``%sinfo``, ``%scancel``, ``%slurm``,
``%gpu_timeslice``, ``%gpu_isolation``, ``%sacct``, ``%sshare``.

Load with ``%load_ext slurmlab`` (or ``%load_ext slurmlab.magics``). Nothing registers at import. Loading
declares every magic with IPython's lazy registration (``MagicsManager.register_lazy``, as IPython declares
its own): the module that defines a magic is imported the first time one of its magics is used, so loading
imports none of the Slurm layer, the widgets or the request language
(``tests/unit/magics/test_load_ext_imports.py`` holds the list). An IPython without lazy registration of a
magics class gets them registered at once, as before. Each magic module is a leaf: what the magics share
lives in the kernel's :class:`~slurmlab.magics.session.Session` and the operations on it in
:mod:`slurmlab.magics.kernel`. Loading also makes slurmlab's expected errors, from magics and plain calls
alike (``a.mig()``), show as one line with the fix instead of a traceback (:mod:`slurmlab.magics.error_display`;
``%slurm debug on`` for the full one), and registers how an Allocation displays (its live panel) and the
hardware models' figures with IPython's own display formatter, by class name (``for_type_by_name``: nothing is
imported to register them). With ``SLURMLAB_USE`` set (``ssh://user@login.example [/remote/slurm.conf]`` or a
slurm.conf path), loading also does what ``%slurm use`` with those words does: a kernel, every lesson of the
course among them, drives that Slurm unchanged.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from IPython.core import magic as ipython_magic
from IPython.core.error import UsageError

from slurmlab.errors import SlurmlabError
from slurmlab.magics import cell_report, error_display
from slurmlab.magics.session import Session
from slurmlab.viz import notebook as notebook_figures

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

# the class an allocation is, by name: its live panel is registered with IPython's display formatter without
# importing the allocation machinery (asyncio, the poller, the queries) at %load_ext
_ALLOCATION_TYPE = ("slurmlab.slurm.allocation.lifecycle", "Allocation")

# (module, Magics class, {kind: its magics}), in the order the magics are documented
_MAGICS: tuple[tuple[str, str, dict[str, tuple[str, ...]]], ...] = (
    ("slurmlab.magics.allocate", "AllocateMagics", {"line": ("salloc", "scancel")}),
    ("slurmlab.magics.steps", "StepMagics", {"line": ("srun",), "cell": ("srun",)}),
    ("slurmlab.magics.status", "StatusMagics", {"line": ("squeue", "sinfo", "slurm")}),
    ("slurmlab.magics.experiments", "ExperimentMagics", {"line": ("gpu_timeslice", "gpu_isolation")}),
    ("slurmlab.magics.accounting", "AccountingMagics", {"line": ("sacct", "sshare")}),
)

_MAGIC_NAMES = {
    kind: tuple(name for _, _, names in _MAGICS for name in names.get(kind, ())) for kind in ("line", "cell")
}


def load_ipython_extension(ip: Any) -> None:
    manager = ip.magics_manager
    # LazyMagic is the placeholder of an IPython that declares "module:Class" lazily; without it, register at once
    lazy = getattr(ipython_magic, "LazyMagic", None) is not None
    for module, cls, names in _MAGICS:
        if not lazy or module in sys.modules:
            # already imported (a second load after unload_ext): IPython would not import it again for the
            # declaration, and registering it costs nothing now
            ip.register_magics(getattr(importlib.import_module(module), cls))
            continue
        for kind in ("line", "cell"):
            for name in names.get(kind, ()):
                both = kind == "line" and name in names.get("cell", ())
                if kind == "cell" and name in names.get("line", ()):
                    continue  # declared with its line magic
                manager.register_lazy(name, f"{module}:{cls}", "line_cell" if both else kind)
    error_display.install(ip, debug=lambda: Session.of(ip).debug, offer=_offer_sandbox)
    cell_report.install(ip)  # in a workshop's seat only: how each cell ended, for the teacher's view
    # an Allocation now displays as its live panel; the hardware models draw their figures (`import slurmlab`
    # registered them already where a shell was running; again is harmless)
    ip.display_formatter.mimebundle_formatter.for_type_by_name(*_ALLOCATION_TYPE, _panel_bundle)
    notebook_figures.install(ip)
    _use_environment()


def _use_environment() -> None:
    """``SLURMLAB_USE`` applied as ``%slurm use`` (:func:`slurmlab.magics.status.use_environment`), said under
    the cell; when it cannot be, why, and the magics are loaded all the same (``%slurm use`` can be tried again)."""
    if not os.environ.get("SLURMLAB_USE", "").strip():
        return  # the status magics' module is imported only when there is something to apply
    from slurmlab.magics.status import use_environment

    try:
        said = use_environment()
    except (UsageError, SlurmlabError) as exc:
        print(f"SLURMLAB_USE not applied: {exc}", file=sys.stderr)
        return
    if said:
        print(said)


def unload_ipython_extension(ip: Any) -> None:
    error_display.uninstall(ip)
    cell_report.uninstall(ip)
    ip.display_formatter.mimebundle_formatter.pop(".".join(_ALLOCATION_TYPE), None)
    manager = ip.magics_manager
    magics = manager.magics
    for kind, names in _MAGIC_NAMES.items():
        for name in names:
            magics[kind].pop(name, None)
    lazy_magics = getattr(manager, "lazy_magics", {})
    ours = {f"{module}:{cls}" for module, cls, _ in _MAGICS}
    for name in [n for n, spec in lazy_magics.items() if spec in ours]:
        del lazy_magics[name]  # a magic used after unload_ext must not bring the extension back
    # `%load_ext slurmlab` and `%load_ext slurmlab.magics` load this one extension: unloaded under one name, it is
    # unloaded under both, or IPython would take a later load under the other name for a no-op
    loaded = getattr(getattr(ip, "extension_manager", None), "loaded", None)
    if isinstance(loaded, set):
        loaded.difference_update({"slurmlab", "slurmlab.magics"})


def _offer_sandbox() -> object:
    """The sandbox picker under the message of a magic that found no Slurm; Start runs ``%slurm sandbox up``."""
    return error_display.offer_sandbox(_start_sandbox)


def _start_sandbox(profile: str) -> str:
    # the sandbox module is imported when someone presses Start, as the magic that uses it is
    from slurmlab.magics.sandbox import start_sandbox

    return start_sandbox(profile)


def _panel_bundle(alloc: Any) -> dict[str, object]:
    """The live panel of an Allocation (what IPython's formatter shows for one); the widgets room is imported
    when the first one displays. Without ipywidgets: the allocation's own dated text and HTML."""
    from slurmlab.slurm.allocation.display import mime_bundle
    from slurmlab.widgets.panel import display_bundle

    bundle = display_bundle(alloc)
    return mime_bundle(alloc) if bundle is None else bundle
