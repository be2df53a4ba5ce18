"""The kernel spec of a provisioned kernel: ``kernel.json`` naming the provisioner and its default request."""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from slurmlab.errors import RequestError
from slurmlab.provisioner.request import KernelRequest

__all__ = ["PROVISIONER_NAME", "install_kernel_spec", "kernel_spec"]

PROVISIONER_NAME = "slurmlab-provisioner"  # the entry point's name in pyproject.toml
_SPEC_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def kernel_spec(
    request: KernelRequest, *, display_name: str | None = None, python: str | None = None
) -> dict[str, object]:
    """The ``kernel.json`` of a kernel that starts inside an allocation asking for ``request``."""
    return {
        "argv": [python or sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name or f"Python 3 (slurmlab: {request.describe()})",
        "language": "python",
        "interrupt_mode": "signal",
        "metadata": {
            "debugger": True,
            "kernel_provisioner": {"provisioner_name": PROVISIONER_NAME, "config": request.to_config()},
        },
    }


def install_kernel_spec(
    request: KernelRequest,
    name: str,
    *,
    display_name: str | None = None,
    user: bool = True,
    prefix: str | None = None,
    python: str | None = None,
    argv_extra: Sequence[str] = (),
) -> str:
    """Install the spec (as ``jupyter kernelspec install`` would) and return the folder it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    if _SPEC_NAME.fullmatch(name) is None:
        raise RequestError(
            f"not a kernel name: {name!r}",
            hint="use lower-case letters, digits, '.', '_' or '-', e.g. --name slurmlab-gpu",
        )
    spec = kernel_spec(request, display_name=display_name, python=python)
    if argv_extra:
        spec["argv"] = [*spec["argv"], *argv_extra]  # type: ignore[misc]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "kernel.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
        return str(
            KernelSpecManager().install_kernel_spec(tmp, name, user=user and prefix is None, prefix=prefix)
        )
