from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.sandbox_jobs import clear_queue


@pytest.fixture
def dgx(slurm_sandbox: Any) -> Iterator[Any]:
    """The session's dgx-h100 sandbox with an empty queue before and after the test."""
    clear_queue(slurm_sandbox.runner())
    yield slurm_sandbox
    clear_queue(slurm_sandbox.runner())


@pytest.fixture
def h200_mig(sandbox_factory: Any) -> Iterator[Any]:
    sb = sandbox_factory("h200-mig")
    clear_queue(sb.runner())
    yield sb
    clear_queue(sb.runner())
