"""What runs ON a compute node, inside a step: the workers, their backends, the CUDA kernels, the verify task.

These modules are started as ``python -m slurmlab.experiments.node.<module>`` on the allocation's nodes,
whose Python may have little more than slurmlab itself, so they import only the standard library, NumPy and
CuPy (both where the timing work needs them), each other, slurmlab's own foundation (``errors``,
``_extras``, which ``import slurmlab`` loads anyway) and the one framing every node program prints its
report in (:mod:`slurmlab.core.framing`, standard library only). No other room of slurmlab: what the tasks
print is judged on the allocation side, by the rest of :mod:`slurmlab.experiments`.
"""

from __future__ import annotations
