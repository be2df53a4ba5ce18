"""How deep the slow property and fuzz tests go: ``HYPOTHESIS_PROFILE`` = ``dev`` (default) or ``ci``.

The fast tier (``pytest -m "not sandbox and not browser"``) runs ``dev``; ``make test`` runs ``ci``, where every
fuzz test runs its full count. One switch for Hypothesis properties and the hand-rolled corpus fuzzers alike.
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

PROFILE_ENV = "HYPOTHESIS_PROFILE"
# the share of a test's full example count each profile runs
SCALE = {"dev": 0.2, "ci": 1.0}


def profile() -> str:
    name = os.environ.get(PROFILE_ENV, "dev")
    return name if name in SCALE else "ci"


def scaled(full: int, *, floor: int = 1) -> int:
    """``full`` under ``ci``; a fifth of it (at least ``floor``) under ``dev``."""
    return max(floor, round(full * SCALE[profile()]))


def sample(items: list[T]) -> list[T]:
    """Every item under ``ci``; every other one (the same ones each run) under ``dev``."""
    return items if profile() == "ci" else items[::2]
