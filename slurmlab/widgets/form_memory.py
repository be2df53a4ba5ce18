"""The request form's last values, kept between sessions (issue 28: the form forgot them; Open OnDemand's
remembers): partition, sharing, GPU type, count, nodes, tasks, time, ``--gpu-bind`` and enforce-binding, as
the user last submitted them. Nothing else, and nothing secret: these are the words of a ``salloc`` line.

They live in one small JSON file of the user's own, ``$XDG_CONFIG_HOME/slurmlab/request-form.json``
(``~/.config/...``), written atomically (a new file renamed over the old). A value the cluster no longer offers
(a partition gone, a GPU type the partition lacks, a count out of bounds) is left at the form's default; a file
that cannot be read or is not this JSON is ignored, and a file that cannot be written only costs the memory.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["FIELDS", "default_path", "recall", "remember"]

# the form's controls, in the order they depend on each other (sharing's options follow the partition,
# the GPU types follow the sharing)
FIELDS = (
    "partition",
    "sharing",
    "gpu_type",
    "count",
    "per_node",
    "nodes",
    "tasks",
    "gpu_bind",
    "enforce",
    "time",
)
log = logging.getLogger("slurmlab.widgets")


def default_path() -> Path:
    """Where ``%salloc --form`` keeps the last values: the user's config folder."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "slurmlab" / "request-form.json"


def remember(form: Any, path: Path) -> None:
    """Keep the form's current values in ``path`` (best effort: a read-only home only loses the memory)."""
    values = {name: getattr(form, name).value for name in FIELDS}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".request-form.", dir=path.parent)
        with os.fdopen(fd, "w") as out:
            json.dump(values, out)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("slurmlab: cannot keep the form's values in %s: %s", path, exc)


def _allowed(control: Any, value: Any) -> bool:
    options = getattr(control, "options", None)
    if options is not None:  # a dropdown: one of its values now
        return value in [o[1] if isinstance(o, tuple) else o for o in options]
    current = control.value
    if isinstance(current, bool):
        return isinstance(value, bool)
    if isinstance(current, int):
        low, high = getattr(control, "min", None), getattr(control, "max", None)
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (low is None or value >= low)
            and (high is None or value <= high)
        )
    return isinstance(value, str) and len(value) < 100


def recall(form: Any, path: Path) -> list[str]:
    """Set the form's controls to the values kept in ``path`` where the cluster still offers them; the names
    of the fields set. ``form.sync()`` (its choices after a partition or sharing change) runs between them."""
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(kept, dict):
        return []
    restored = []
    for name in FIELDS:
        if name not in kept:
            continue
        control = getattr(form, name)
        if _allowed(control, kept[name]):
            control.value = kept[name]
            restored.append(name)
        form.sync_choices()
    return restored
