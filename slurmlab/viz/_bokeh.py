"""Lazy access to bokeh, raising an error that names the ``viz`` extra when it is missing."""

from __future__ import annotations

from types import ModuleType

from slurmlab._extras import require

# colour-blind-friendly categorical palette (Okabe-Ito), then Tableau-like extras
PALETTE = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
    "#4E79A7", "#F28E2B", "#59A14F", "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7", "#9C755F",
)
HIGHLIGHT = "#D55E00"


def bokeh(module: str, feature: str) -> ModuleType:
    return require(f"bokeh.{module}", feature=feature, extra="viz")
