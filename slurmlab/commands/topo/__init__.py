"""``slurmlab topo`` and ``slurmlab mig``: saved nvidia-smi output (or a sandbox hardware profile) read into a
summary and, on request, the Bokeh view as HTML or PNG.

:mod:`.command` registers both subcommands and runs them; :mod:`.best` answers ``--best N`` (the best-connected GPUs
and the salloc line), :mod:`.nvlink` reads ``--nvlink`` (a saved ``nvidia-smi nvlink -s``).
"""

from __future__ import annotations

from slurmlab.commands.topo.command import handle_mig, handle_topo, register

__all__ = ["handle_mig", "handle_topo", "register"]
