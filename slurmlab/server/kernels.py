"""The kernels this server started inside Slurm jobs (slurmlab's kernel provisioner), for the sidebar's "kernels on
GPU nodes" section, and the kernel specs that start one.

The provisioner runs inside the Jupyter server's process: each kernel's ``provisioner`` has a public ``status``
(phase, job id, why it waits, expected start, nodes, GPUs) and ``allocation`` (its time left). A kernel whose job
still pends is not yet in the kernel manager's list (jupyter_client adds a kernel once it started), so the
server notes every kernel manager its kernel manager makes (:class:`KernelWatch` wraps the public
``kernel_manager_factory``; it only records, weakly) and shows those whose provisioner is slurmlab's.
Duck-typed: the server does not import the provisioner (it imports only what every kernel manager has).

Only this server's kernels are listed: the server is the user's own. A kernel's job is never offered for cancel
here: the kernel owns it, and shutting the kernel down releases it (``KERNEL_WORDS``). Reading costs no Slurm RPC:
the provisioner's allocation is polled anyway for the kernel.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable
from typing import Any

from slurmlab.server.contract import KernelGpu, KernelJobView, KernelsAnswer, KernelSpecView

__all__ = ["KERNEL_WORDS", "PROVISIONER_NAME", "KernelWatch"]

# the entry point's name in jupyter_client.kernel_provisioners (the provisioner's package says the same)
PROVISIONER_NAME = "slurmlab-provisioner"
KERNEL_WORDS = (
    "the kernel owns its job: shutting the kernel down (Kernel > Shut Down Kernel) releases it; "
    "a restart keeps it (a new step)"
)
# a start still under way: shown although the kernel manager does not list the kernel yet
_STARTING = ("checking", "pending", "starting")


class KernelWatch:
    """The kernel managers ``kernel_manager`` (jupyter_server's MappingKernelManager) makes, and what their
    slurmlab provisioners say."""

    def __init__(self, kernel_manager: Any, kernel_spec_manager: Any = None, root_dir: str = "") -> None:
        self.kernel_manager = kernel_manager
        self.kernel_spec_manager = kernel_spec_manager
        self.root_dir = (
            root_dir  # the server's root: notebooks are named relative to it, as the file browser does
        )
        self._made: weakref.WeakSet[Any] = weakref.WeakSet()
        self._factory: Callable[..., Any] | None = None
        if kernel_manager is not None and hasattr(kernel_manager, "kernel_manager_factory"):
            self._factory = kernel_manager.kernel_manager_factory
            kernel_manager.kernel_manager_factory = self._recording

    def _recording(self, *args: Any, **kwargs: Any) -> Any:
        assert self._factory is not None
        km = self._factory(*args, **kwargs)
        self._made.add(km)
        return km

    def stop(self) -> None:
        """Hands the kernel manager its own factory back."""
        if self._factory is not None and self.kernel_manager.kernel_manager_factory == self._recording:
            self.kernel_manager.kernel_manager_factory = self._factory
        self._factory = None

    def kernels(self, now: float | None = None) -> list[KernelJobView]:
        """Every kernel of this server whose provisioner is slurmlab's: started, or still starting."""
        listed = set(self.kernel_manager.list_kernel_ids()) if self.kernel_manager is not None else set()
        views = []
        for km in list(self._made):
            provisioner = getattr(km, "provisioner", None)
            status = getattr(provisioner, "status", None)
            if status is None or not hasattr(status, "to_dict"):
                continue  # another provisioner's kernel (a local one)
            kernel_id = str(getattr(km, "kernel_id", "") or "")
            if kernel_id not in listed and status.phase not in _STARTING:
                continue  # shut down (or given up): gone from the server
            views.append(_view(km, provisioner, status, kernel_id, now, self.root_dir))
        return sorted(views, key=lambda view: (view["notebook"] or view["kernel_name"], view["kernel_id"]))

    def holds(self, job_id: str) -> bool:
        """Whether one of this server's kernels runs in (or waits for) job ``job_id``."""
        return any(view["job_id"] == job_id for view in self.kernels())

    def specs(self) -> list[KernelSpecView]:
        """The installed kernel specs that start a kernel through slurmlab's provisioner."""
        if self.kernel_spec_manager is None:
            return []
        found: list[KernelSpecView] = []
        for name, entry in sorted(self.kernel_spec_manager.get_all_specs().items()):
            spec = entry.get("spec") or {}
            provisioner = (spec.get("metadata") or {}).get("kernel_provisioner") or {}
            if provisioner.get("provisioner_name") == PROVISIONER_NAME:
                found.append(KernelSpecView(name=name, display_name=str(spec.get("display_name") or name)))
        return found

    def answer(self, now: float | None = None) -> KernelsAnswer:
        return KernelsAnswer(kernels=self.kernels(now), specs=self.specs(), words=KERNEL_WORDS)


def _view(
    km: Any, provisioner: Any, status: Any, kernel_id: str, now: float | None, root: str
) -> KernelJobView:
    shown = status.to_dict()
    allocation = getattr(provisioner, "allocation", None)
    left = allocation.time_left(now) if allocation is not None and status.phase == "running" else None
    at = time.time() if now is None else now
    session = _relative(str(getattr(provisioner, "session_name", "") or ""), root)
    return KernelJobView(
        kernel_id=kernel_id,
        kernel_name=str(getattr(km, "kernel_name", "") or ""),
        notebook=session or None,
        phase=str(shown["phase"]),
        job_id=shown["job_id"],
        message=str(shown["message"]),
        reason=shown["reason"],
        why=str(shown["why"]),
        expected_start=shown["expected_start"],
        nodes=list(shown["nodes"]),
        gpus=[KernelGpu(node=node, indices=list(idx)) for node, idx in shown["gpus"].items()],
        step=shown["step"],
        request=str(shown["request"]),
        ends_at=_iso(at + left) if left is not None else None,
    )


def _relative(path: str, root: str) -> str:
    """jupyter_server names the notebook by its absolute path (2.x) or relative to its root: the latter."""
    if root and os.path.isabs(path):
        inside = os.path.relpath(path, root)
        return path if inside.startswith("..") else inside
    return path


def _iso(epoch: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat()
