from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def ip() -> Iterator[Any]:
    """An IPython shell with the slurmlab magics loaded and a fresh magics session."""
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics import session

    shell = get_ipython()
    shell.run_line_magic("load_ext", "slurmlab.magics")
    old = session._session
    session._session = session.Session()
    try:
        yield shell
    finally:
        for alloc in session._session.allocations:
            try:
                alloc.cancel()
            except Exception:  # the test already ended it, or the controller is gone
                pass
        session._session = old
        shell.run_line_magic("unload_ext", "slurmlab.magics")


@pytest.fixture
def sandbox_ip(slurm_sandbox: Any, ip: Any) -> Any:
    """The shell, with the process-wide runner pointed at the session's sandbox."""
    return ip
