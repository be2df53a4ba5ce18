"""The hub's configuration and its form (issue 29 point 1), without JupyterHub running: what gets written into
the batch script is checked, and every listener of the hub is on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from traitlets.config import Config

from slurmlab.hub.settings import config_text, configure, parse_form

# configure() sets SLURM_CONF: each test puts back what the worker had
pytestmark = pytest.mark.usefixtures("slurm_conf_kept")


def test_the_form_gives_the_job_it_asks_for() -> None:
    asked = {"ngpus": ["2"], "runtime": ["1:30:00"], "partition": ["gpu"]}
    assert parse_form(asked, ["gpu", "debug"]) == {"ngpus": "2", "runtime": "1:30:00", "partition": "gpu"}
    # nothing chosen: no GPU, an hour, the default (first) partition
    assert parse_form({}, ["debug", "gpu"]) == {"ngpus": "0", "runtime": "1:00:00", "partition": "debug"}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("ngpus", "-1", "whole number"),
        ("ngpus", "2; rm -rf ~", "whole number"),
        ("ngpus", "999", "whole number"),
        ("runtime", "1h", "minutes or"),
        ("runtime", "10\n#SBATCH --uid=0", "minutes or"),
        ("partition", "nowhere", "no partition"),
        ("partition", "gpu --exclusive", "no partition"),
    ],
)
def test_a_value_slurm_would_not_take_is_refused_with_what_was_wrong(
    field: str, value: str, said: str
) -> None:
    form = {"ngpus": ["1"], "runtime": ["30"], "partition": ["gpu"], field: [value]}
    with pytest.raises(ValueError, match=said):
        parse_form(form, ["gpu"])


def _settings(tmp_path: Path) -> Path:
    settings = {
        "folder": str(tmp_path),
        "sandbox": str(tmp_path / "sb"),
        "slurm_conf": str(tmp_path / "sb" / "slurm.conf"),
        "port": 8123,
        "hub_port": 8124,
        "proxy_api_port": 8125,
        "users": ["alice"],
        "password": "pw",
        "service_token": "t" * 64,
        "proxy_token": "p" * 64,
        "proxy": "/x/configurable-http-proxy",
        "runuser": "/usr/sbin/runuser",
        "singleuser": "/v/bin/jupyterhub-singleuser",
        "python": "/usr/bin/python3.11",
        "pythonpath": "/v/lib/python3.11/site-packages",
        "jupyter_prefix": "/v",
        "nodes": ["node1", "node2"],
        "partitions": ["gpu"],
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return path


def test_every_listener_is_on_loopback_and_jobs_are_submitted_as_the_user(tmp_path: Path) -> None:
    c = Config()
    configure(c, str(_settings(tmp_path)))
    assert c.JupyterHub.bind_url == "http://127.0.0.1:8123"
    assert c.JupyterHub.hub_ip == "127.0.0.1"
    assert c.ConfigurableHTTPProxy.api_url == "http://127.0.0.1:8125"
    # the node names squeue reports map to the loopback address each sandbox slurmd listens on
    assert c.SandboxSlurmSpawner.daemon_resolver == {"node1": "127.0.0.1", "node2": "127.0.0.1"}
    assert c.SandboxSlurmSpawner.exec_prefix == "/usr/sbin/runuser -u {username} --"
    assert c.Authenticator.allowed_users == {"alice"}
    assert "SLURM_CONF" in c.Spawner.env_keep
    assert c.SandboxSlurmSpawner.batchspawner_singleuser_cmd == "/usr/bin/python3.11 -m slurmlab.hub.seat"
    assert c.Spawner.cmd == ["/v/bin/jupyterhub-singleuser"]
    # the environment's Jupyter (JupyterLab's and slurmlab's server extensions) for the users' Python
    assert c.Spawner.environment["JUPYTER_CONFIG_PATH"] == "/v/etc/jupyter"
    assert "--allow-root" not in c.Spawner.args  # only for a root user


def test_the_config_file_jupyterhub_runs_calls_configure_with_the_settings(tmp_path: Path) -> None:
    path = _settings(tmp_path)
    c = Config()
    namespace = {"get_config": lambda: c}
    exec(compile(config_text(path), "jupyterhub_config.py", "exec"), namespace)
    assert c.JupyterHub.hub_port == 8124


def test_hub_down_where_no_hub_runs_says_so_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.cli import main

    assert main(["hub", "down", "--dir", str(tmp_path / "none")]) == 2
    said = capsys.readouterr().err
    assert f"no hub in {tmp_path / 'none'}" in said and "slurmlab hub up" in said
    assert "Traceback" not in said


def test_the_single_user_server_culls_idle_kernels_and_then_stops_itself(tmp_path: Path) -> None:
    from jupyter_server.serverapp import ServerApp
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager

    c = Config()
    configure(c, str(_settings(tmp_path)))
    options = dict(a[2:].split("=", 1) for a in c.Spawner.args if a.startswith("--") and "=" in a)
    assert options["MappingKernelManager.cull_idle_timeout"] == "1800"
    assert options["MappingKernelManager.cull_connected"] == "True"  # an open tab does not keep it
    assert options["MappingKernelManager.cull_busy"] == "False"  # a running cell is never cut
    assert options["ServerApp.shutdown_no_activity_timeout"] == "1800"
    # each option names a real setting of the jupyter_server this environment runs (a misspelt one is only
    # warned about by traitlets, and culls nothing)
    from jupyter_lsp.manager import LanguageServerManager

    classes = {
        "MappingKernelManager": MappingKernelManager,
        "ServerApp": ServerApp,
        # the seats' own (slurmlab.hub.settings.SEAT_ARGS)
        "LanguageServerManager": LanguageServerManager,
    }
    for key in options:
        owner, trait = key.split(".")
        assert trait in classes[owner].class_traits(config=True), key

    # a workshop may change either, or turn it off
    settings = json.loads(_settings(tmp_path).read_text())
    settings.update(cull_idle_kernel_s=600, cull_idle_server_s=0)
    (tmp_path / "off.json").write_text(json.dumps(settings))
    c = Config()
    configure(c, str(tmp_path / "off.json"))
    assert "--MappingKernelManager.cull_idle_timeout=600" in c.Spawner.args
    assert not [a for a in c.Spawner.args if "shutdown_no_activity_timeout" in a]
