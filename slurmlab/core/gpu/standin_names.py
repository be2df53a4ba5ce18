"""What slurmlab's readers share with the sandbox's stand-in ``nvidia-smi``: the mark on the stand-in's first and
last lines (so a parser skips them and a check can tell the stand-in from the real tool) and the UUIDs it makes up
for each GPU and MIG slice (so a binding table names a sandbox's GPUs as the step saw them).

Standard library only and no slurmlab import: the sandbox copies this module into its ``bin/nvidia-smi``
(:mod:`slurmlab.sandbox.standin`), run by the nodes' ``python3``, where slurmlab may not be installed.
"""

from __future__ import annotations

import hashlib

__all__ = ["STANDIN_MARK", "made_up_uuid"]

STANDIN_MARK = "slurmlab sandbox stand-in"


def made_up_uuid(*parts: object) -> str:
    """A stable made-up UUID for one device of one node of one profile (distinct across nodes)."""
    h = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
