"""Importing the parsers and slurmlab.viz loads no bokeh; a missing bokeh names the `viz` extra."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import MissingExtraError


def test_imports_stay_light() -> None:
    code = (
        "import sys, slurmlab.viz, slurmlab.core.gpu.smi, slurmlab.core.gpu.placement, slurmlab.commands.topo; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('bokeh', 'playwright')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_missing_bokeh_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.viz.topology_view import topology_figure

    for name in [m for m in sys.modules if m == "bokeh" or m.startswith("bokeh.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "bokeh", None)  # makes `import bokeh...` fail
    topo = Topology.from_profile({"gpus": 2, "nvlink": "all:4"})
    with pytest.raises(MissingExtraError, match=r"slurmlab\[viz\]"):
        topology_figure(topo)
