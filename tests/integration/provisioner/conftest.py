"""A kernel spec of slurmlab's provisioner in a temporary JUPYTER_PATH, against the session's sandbox.

jupyter_client finds provisioners by their entry point. Until the package is installed again after the
entry point was added to pyproject.toml, the entry point is offered from a metadata folder made from
pyproject.toml's own line (so the test still checks that line), on sys.path and on the PYTHONPATH of the
processes the tests start.
"""

from __future__ import annotations

import getpass
import os
import sys
import time
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[3]
GROUP = "jupyter_client.kernel_provisioners"


def _registered() -> bool:
    return any(ep.name == "slurmlab-provisioner" for ep in entry_points(group=GROUP))


@pytest.fixture(scope="session")
def provisioner_entry_point(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The folder offering the entry point ("" when the installed package has it already)."""
    from jupyter_client.provisioning.factory import KernelProvisionerFactory

    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]
    assert table == {"slurmlab-provisioner": "slurmlab.provisioner.provisioner:SlurmProvisioner"}
    if _registered():
        yield ""
        return
    site = tmp_path_factory.mktemp("provisioner-entry-point")
    meta = site / "slurmlab_provisioner_entry_point-0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: slurmlab-provisioner-entry-point\nVersion: 0\n"
    )
    lines = [f"[{GROUP}]"] + [f"{name} = {target}" for name, target in table.items()]
    (meta / "entry_points.txt").write_text("\n".join(lines) + "\n")
    sys.path.append(str(site))
    KernelProvisionerFactory.clear_instance()
    try:
        yield str(site)
    finally:
        sys.path.remove(str(site))
        KernelProvisionerFactory.clear_instance()


@pytest.fixture
def kernel_home(
    slurm_sandbox: Any, provisioner_entry_point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """JUPYTER_PATH and JUPYTER_RUNTIME_DIR of the test's own; SLURM_CONF of the sandbox for the server side
    (the kernel's step inherits it from srun's environment); an empty queue of mine before and after."""
    runner = slurm_sandbox.runner()
    _clear_queue(runner)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("SLURM_CONF", str(slurm_sandbox.conf_path))
    if provisioner_entry_point:
        monkeypatch.setenv(
            "PYTHONPATH",
            os.pathsep.join(p for p in (provisioner_entry_point, os.environ.get("PYTHONPATH")) if p),
        )
    try:
        yield {"runner": runner, "share": tmp_path / "share", "tmp": tmp_path, "sandbox": slurm_sandbox}
    finally:
        _clear_queue(runner)


def _clear_queue(runner: Any) -> None:
    runner.run(["scancel", "--user", getpass.getuser()], check=False)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = runner.run(["squeue", "-h", "--me", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%A"]).stdout
        if not out.strip():
            return
        time.sleep(0.3)
