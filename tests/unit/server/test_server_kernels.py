"""Issue 30 point 4 in the server: the ``kernels`` route shows each kernel this server started through slurmlab's
kernel provisioner (what its public ``status`` says: the job, why it waits, the nodes and GPUs, the time left) and
the installed kernel specs that start one; the cancel route refuses a kernel's job (the kernel owns it).

A real jupyter_server with the extension and its own kernel manager; the kernel managers come from the server's
``kernel_manager_factory`` and hold a real :class:`SlurmProvisioner` made by jupyter_client's provisioner factory
(the spec names the entry point). Nothing is started on Slurm here (the sandbox tests and the browser test do):
the provisioner's status is set as its start sets it, with Slurm 22.05's words for a pending job."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from slurmlab.provisioner import install_kernel_spec, kernel_spec, request_from_config

WHY = "waiting for resources: the GPUs/CPUs asked for are in use by other jobs"
EXPECTED = datetime(2026, 12, 5, 11, 30, tzinfo=timezone.utc)


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"slurmlab.server": True},
                "tornado_settings": {"slurmlab_poll_interval": 30.0, "slurmlab_cluster_poll_interval": 30.0},
            }
        }
    )


@pytest.fixture
def gpu_spec(jp_environ: Any, jp_serverapp: Any) -> dict[str, Any]:
    """A slurmlab kernel spec installed where the server's kernel spec manager looks (the user's data dir)."""
    request = request_from_config({"gpus": 1, "time": 10})
    install_kernel_spec(request, "slurmlab-gpu", display_name="Python 3 (slurmlab: 1 GPU)")
    return kernel_spec(request, display_name="Python 3 (slurmlab: 1 GPU)")


def _kernel(serverapp: Any, spec: dict[str, Any], kernel_id: str) -> Any:
    """A kernel manager as the server's kernel manager makes one for ``spec``, with its provisioner."""
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.provisioning.factory import KernelProvisionerFactory

    mkm = serverapp.kernel_manager
    km = mkm.kernel_manager_factory(
        connection_file=f"{mkm.connection_dir}/kernel-{kernel_id}.json",
        parent=mkm,
        log=mkm.log,
        kernel_name="slurmlab-gpu",
    )
    km.kernel_id = kernel_id
    km.provisioner = KernelProvisionerFactory.instance(parent=mkm).create_provisioner_instance(
        kernel_id, KernelSpec(**spec), parent=km
    )
    return km


async def _kernels(jp_fetch: Any) -> Any:
    return json.loads((await jp_fetch("slurmlab", "api", "kernels")).body.decode())


async def test_the_kernels_route_shows_a_pending_kernel_s_job_and_why_it_waits(
    jp_fetch: Any, jp_serverapp: Any, gpu_spec: dict[str, Any]
) -> None:
    km = _kernel(jp_serverapp, gpu_spec, "k-pending")
    provisioner = km.provisioner
    assert type(provisioner).__name__ == "SlurmProvisioner"
    # as pre_launch reads it from JPY_SESSION_NAME: jupyter_server 2 names the notebook by its absolute path
    provisioner.session_name = f"{jp_serverapp.root_dir}/work/train.ipynb"
    provisioner._set_status(
        phase="pending",
        job_id="41",
        reason="Resources",
        why=WHY,
        expected_start=EXPECTED,
        message=f"job 41 is pending: {WHY}",
        request="1 GPU, 10 min",
    )
    answer = await _kernels(jp_fetch)
    [kernel] = answer["kernels"]
    assert kernel["kernel_id"] == "k-pending" and kernel["kernel_name"] == "slurmlab-gpu"
    assert kernel["notebook"] == "work/train.ipynb"
    assert (kernel["phase"], kernel["job_id"], kernel["reason"], kernel["why"]) == (
        "pending",
        "41",
        "Resources",
        WHY,
    )
    assert kernel["expected_start"] == EXPECTED.isoformat() and kernel["ends_at"] is None
    assert answer["specs"] == [{"name": "slurmlab-gpu", "display_name": "Python 3 (slurmlab: 1 GPU)"}]
    assert "shutting the kernel down" in answer["words"] and "releases it" in answer["words"]

    # the kernel owns its job: the sidebar's cancel route refuses it before asking Slurm anything
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("slurmlab", "api", "jobs", "41", "cancel", method="POST", body="{}")
    assert refused.value.code == 409
    body = json.loads(refused.value.response.body.decode())  # type: ignore[union-attr]
    assert "runs a kernel of this server" in body["message"]

    # released by a shutdown and gone from the kernel manager: no longer listed
    provisioner._set_status(phase="released", message="job 41 released: the kernel was shut down")
    assert (await _kernels(jp_fetch))["kernels"] == []
    del km


async def test_only_slurmlab_kernels_and_specs_are_listed(jp_fetch: Any, jp_serverapp: Any) -> None:
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.provisioning.factory import KernelProvisionerFactory

    mkm = jp_serverapp.kernel_manager
    local = mkm.kernel_manager_factory(
        connection_file=f"{mkm.connection_dir}/kernel-local.json",
        parent=mkm,
        log=mkm.log,
        kernel_name="python3",
    )
    local.kernel_id = "local"  # a kernel of jupyter_client's own provisioner (no Slurm status)
    local.provisioner = KernelProvisionerFactory.instance(parent=mkm).create_provisioner_instance(
        "local",
        KernelSpec(argv=["python", "-m", "ipykernel_launcher"], display_name="Python 3"),
        parent=local,
    )
    assert type(local.provisioner).__name__ == "LocalProvisioner"
    answer = await _kernels(jp_fetch)
    assert answer["kernels"] == [] and answer["specs"] == []
    del local


def test_the_watch_gives_the_kernel_manager_its_factory_back() -> None:
    from jupyter_client.multikernelmanager import MultiKernelManager

    from slurmlab.server.kernels import KernelWatch

    mkm = MultiKernelManager()
    own = mkm.kernel_manager_factory
    watch = KernelWatch(mkm)
    assert mkm.kernel_manager_factory != own
    km = mkm.kernel_manager_factory(connection_file="kernel-x.json", parent=mkm, log=mkm.log)
    assert watch.kernels() == []  # made, never started: no provisioner yet
    del km
    watch.stop()
    assert mkm.kernel_manager_factory == own
