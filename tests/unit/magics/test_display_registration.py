"""``%load_ext slurmlab`` and ``import slurmlab`` register slurmlab's rich displays with IPython's own display
formatter (issue 26, point 4): an Allocation shows as its live panel and the hardware models draw their figures
through the shell's mime-bundle formatter, registered by module and class name (``for_type_by_name``), so that
registering imports neither the allocation machinery nor ipywidgets nor bokeh. Each load runs in a fresh
interpreter: this test process has long imported all of it."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.viz.notebook import FIGURE_TYPES

ALLOCATION = ("slurmlab.slurm.allocation.lifecycle", "Allocation")
WIDGET = "application/vnd.jupyter.widget-view+json"

_PROBE = textwrap.dedent("""
    import sys
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    formatter = ip.display_formatter.mimebundle_formatter
    def ours():
        return sorted(k for k in formatter.deferred_printers if k[0].startswith("slurmlab"))
    ip.run_line_magic("load_ext", "slurmlab")
    loaded = sorted(
        m for m in sys.modules
        if m.split(".")[0] in ("bokeh", "ipywidgets") or m.startswith("slurmlab.slurm.allocation")
        or m in ("slurmlab.widgets.panel", "slurmlab.core.gpu.node_models", "slurmlab.core.gpu.binding")
    )
    print(repr((ours(), loaded)))
    ip.run_line_magic("unload_ext", "slurmlab")
    print(repr(ours()))
""")


def test_load_ext_registers_the_panel_and_figures_with_the_shells_formatter_importing_none_of_them() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, after_unload = out.stdout.splitlines()
    registered, loaded = ast.literal_eval(first)
    assert registered == sorted([ALLOCATION, *FIGURE_TYPES])
    assert loaded == [], f"%load_ext imported {loaded}"
    # unloaded: an Allocation is its dated text again; the figures stay (`import slurmlab` put them there)
    assert ast.literal_eval(after_unload) == sorted(FIGURE_TYPES)


def _allocation() -> Allocation:
    # a poller whose fetchers are never reached: nothing asks Slurm
    poller = JobPoller(
        runner=object(),  # type: ignore[arg-type]
        fetch_brief=lambda ids, r: {},
        fetch_detail=lambda jid, r: None,
        interval=3600,
    )
    alloc = Allocation("7", runner=object(), poller=poller, release_at_exit=False)  # type: ignore[arg-type]
    poller.stop()
    return alloc


@pytest.fixture
def shell() -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab")
    yield ip
    ip.run_line_magic("unload_ext", "slurmlab")


def test_the_shell_shows_an_allocation_as_its_live_panel_until_unloaded(shell: Any) -> None:
    pytest.importorskip("ipywidgets")
    alloc = _allocation()
    data, _ = shell.display_formatter.format(alloc)
    assert WIDGET in data  # the live panel, from the registration
    assert "slurmlab-saved-allocation" in data["text/html"] and "as of" in data["text/plain"]
    assert WIDGET not in alloc._repr_mimebundle_()  # the allocation itself knows no widget
    shell.run_line_magic("unload_ext", "slurmlab")
    try:
        data, _ = shell.display_formatter.format(alloc)
        assert WIDGET not in data and "slurmlab-saved-allocation" in data["text/html"]
    finally:
        shell.run_line_magic("load_ext", "slurmlab")
