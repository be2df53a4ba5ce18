"""Shared test set-up: ``tests/`` on sys.path (helpers such as shared_paths, fake_slurm), Hypothesis profiles.

``kept_shell``: an IPython shell with the magics loaded whose process-wide runner is put back after the test.

Hypothesis profiles (``HYPOTHESIS_PROFILE``):

- ``dev`` (default): 25 examples per property, and a property that asks for more in its own
  ``@settings(max_examples=N)`` runs a fifth of N (at least 25): the fast tier stays fast.
- ``ci``: 200 examples by default and every property's own N in full; ``make test`` uses it.

No deadline in either: the machine is shared, and a slow example is not a failure.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profiles import PROFILE_ENV
from profiles import SCALE as _SCALE
from profiles import profile as _profile

_DEV_FLOOR = 25

try:
    from hypothesis import settings as _hsettings
except ImportError:  # hypothesis is a test extra; without it the property tests fail to import anyway
    _hsettings = None  # type: ignore[assignment]

if _hsettings is not None:
    _hsettings.register_profile("dev", max_examples=_DEV_FLOOR, deadline=None)
    _hsettings.register_profile("ci", max_examples=200, deadline=None)
    _hsettings.load_profile(_profile())


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {_profile()} (set {PROFILE_ENV}=ci for every property's full example count)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Scale the example count a property set for itself to the profile (a profile alone cannot: a
    test's own ``@settings`` wins over it)."""
    scale = _SCALE[_profile()]
    if _hsettings is None or scale >= 1.0:
        return
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is None or getattr(test, "_slurmlab_scaled", False):
            continue
        wanted = max(_DEV_FLOOR, int(own.max_examples * scale))
        if wanted < own.max_examples:
            test._hypothesis_internal_use_settings = _hsettings(own, max_examples=wanted)  # type: ignore[union-attr]
        test._slurmlab_scaled = True  # type: ignore[union-attr]


KEPT_CONF = "/nonexistent/kept/slurm.conf"


@pytest.fixture
def kept_shell() -> Iterator[Any]:
    """An IPython shell with the slurmlab magics loaded, a fresh magics session, and a process-wide runner a test
    may switch (``%slurm use``): :data:`KEPT_CONF`'s, put back as it was afterwards."""
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session
    from slurmlab.slurm.runner import Runner, set_runner

    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")
    old, _ = Session.of(ip), Session(ip)
    before = set_runner(Runner(slurm_conf=KEPT_CONF))
    try:
        yield ip
    finally:
        set_runner(before)
        old.install(ip)
        # under whichever name the test left it loaded (unloading one unloads both)
        loaded = [name for name in ("slurmlab.magics", "slurmlab") if name in ip.extension_manager.loaded]
        if loaded:
            ip.run_line_magic("unload_ext", loaded[0])
