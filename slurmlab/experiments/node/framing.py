"""The markers a task prints its report between, so that srun's interleaved pieces can be joined again.

The reading side is :mod:`slurmlab.experiments.task_reports`; this half runs in every task of a step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["BEGIN", "END", "frame"]

BEGIN = "<slurmlab-report>"
END = "</slurmlab-report>"


def frame(report: Mapping[str, Any]) -> str:
    """The line a task prints: its report between the markers, with no raw newline inside."""
    # json.dumps escapes every control character, so the text between the markers is one line;
    # "<" escaped as JSON allows keeps a marker that a value holds (a job name, a path) from
    # ending the report early
    return BEGIN + json.dumps(report, default=str).replace("<", "\\u003c") + END
