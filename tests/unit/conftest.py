"""Fixtures the unit tests of several packages share."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def slurm_conf_kept() -> Iterator[None]:
    """The hub's configure() sets SLURM_CONF for the hub's process (setdefault): put back what this worker had, so
    that a later test on the same worker does not run Slurm's commands against the settings' made-up slurm.conf
    (monkeypatch.delenv of an unset name records nothing to undo). A module whose tests call configure() uses it
    for each of them: ``pytestmark = pytest.mark.usefixtures("slurm_conf_kept")``."""
    before = os.environ.get("SLURM_CONF")
    yield
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before
