"""Import optional heavy packages where they are used, naming the extra when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from slurmlab.errors import MissingExtraError


def require(module: str, *, feature: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``slurmlab[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(feature, module.split(".")[0], extra) from exc
