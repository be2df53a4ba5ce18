"""The stand-in tools a sandbox puts on its nodes: ``bin/nvidia-smi``, which answers from the sandbox's hardware
file, and ``bin/task-prolog``, which puts them first on every task's PATH.

:mod:`.scripts` writes the texts of both files; :mod:`.nvidia_smi` renders the stand-in's answers from its data side
(:mod:`.devices`). The stand-in runs on the nodes' ``python3``, where slurmlab may not be installed: those two modules
and the ones of slurmlab they use are standard library only, and the script holds them all.
"""

from __future__ import annotations

from slurmlab.sandbox.standin.nvidia_smi import answer
from slurmlab.sandbox.standin.scripts import STANDIN_DIR, TASK_PROLOG, nvidia_smi_script, task_prolog_script

__all__ = ["STANDIN_DIR", "TASK_PROLOG", "answer", "nvidia_smi_script", "task_prolog_script"]
