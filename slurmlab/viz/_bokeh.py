"""Lazy access to bokeh, raising an error that names the ``viz`` extra when it is missing."""

from __future__ import annotations

from types import ModuleType

from slurmlab._extras import require


def bokeh(module: str, feature: str) -> ModuleType:
    return require(f"bokeh.{module}", feature=feature, extra="viz")
