"""The kernel spec that names slurmlab's provisioner, its installation, and the provisioner reading it."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import tomllib

from slurmlab.cli import main
from slurmlab.errors import RequestError
from slurmlab.provisioner import PROVISIONER_NAME, KernelRequest, kernel_spec

ROOT = Path(__file__).resolve().parents[3]


def test_the_entry_point_names_the_provisioner_class() -> None:
    from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase

    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    target = table["jupyter_client.kernel_provisioners"][PROVISIONER_NAME]
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, KernelProvisionerBase)
    assert cls is importlib.import_module("slurmlab.provisioner").SlurmProvisioner


def test_the_spec_names_the_provisioner_and_its_request() -> None:
    spec = kernel_spec(KernelRequest(gpus=1, time=60, partition="gpu"), python="/opt/py/bin/python")
    assert spec["argv"] == ["/opt/py/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert spec["display_name"] == "Python 3 (slurmlab: 1 GPU, 60 min, partition gpu)"
    assert spec["metadata"]["kernel_provisioner"] == {  # type: ignore[index]
        "provisioner_name": "slurmlab-provisioner",
        "config": {"gpus": 1, "time": 60, "partition": "gpu"},
    }


def _provisioner(config: dict[str, object]):  # type: ignore[no-untyped-def]
    from jupyter_client.kernelspec import KernelSpec

    from slurmlab.provisioner import SlurmProvisioner

    spec = KernelSpec(**kernel_spec(KernelRequest()))
    return SlurmProvisioner(kernel_id="k1", kernel_spec=spec, parent=None, **config)


def test_the_provisioner_reads_its_spec_config_and_a_kernels_changes() -> None:
    provisioner = _provisioner({"gpus": 2, "time": 60, "options": ["--exclusive"]})
    assert provisioner.kernel_request() == KernelRequest(gpus=2, time=60, options=("--exclusive",))
    assert provisioner.kernel_request({"gpus": 1}).tokens() == ["--gpus=1", "--time=60", "--exclusive"]
    assert provisioner.status.phase == "new" and provisioner.status.to_dict()["job_id"] is None


def test_a_wrong_spec_config_is_named_not_a_trait_error() -> None:
    provisioner = _provisioner({"gpus": "all"})
    with pytest.raises(RequestError, match="gpus must be a whole number, not 'all'"):
        provisioner.kernel_request()


def test_install_command_writes_the_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "kernel",
            "install",
            "--prefix",
            str(tmp_path),
            "--name",
            "gpu-node",
            "--gpus",
            "1",
            "--time",
            "60",
            "--partition",
            "gpu",
        ]
    )
    assert code == 0
    spec = json.loads((tmp_path / "share/jupyter/kernels/gpu-node/kernel.json").read_text())
    assert spec["metadata"]["kernel_provisioner"]["config"] == {"gpus": 1, "time": 60, "partition": "gpu"}
    assert "installed kernel spec 'gpu-node'" in capsys.readouterr().out


def test_install_refuses_a_malformed_request_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["kernel", "install", "--prefix", str(tmp_path), "--gpus", "1", "--option=--time=soon"])
    assert code == 2
    assert "slurmlab: error:" in capsys.readouterr().err
    assert not (tmp_path / "share").exists()
    code = main(["kernel", "install", "--prefix", str(tmp_path), "--name", "Bad Name", "--gpus", "1"])
    assert code == 2 and "not a kernel name: 'Bad Name'" in capsys.readouterr().err


def test_dry_run_prints_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "install", "--dry-run", "--gpus", "2", "--gpu-type", "h100"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["display_name"] == "Python 3 (slurmlab: 2 GPUs (h100))"
