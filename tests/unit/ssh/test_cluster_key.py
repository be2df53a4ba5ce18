"""What is shared per cluster (the job poller, the inventory) is never shared between this machine's Slurm and a
cluster over SSH, nor between two SSH clusters: before, both were keyed on (SLURM_CONF, cluster name) alone, so a
kernel that had used the local Slurm and then ran `%slurm use ssh://…` (no remote slurm.conf named) kept polling and
checking requests against the local cluster through the earlier runner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmlab.slurm.inventory import cluster_inventory, forget_inventories
from slurmlab.slurm.poller import drop_poller, get_poller
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.ssh import SshLink, SshTarget


@pytest.fixture
def runners(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Runner]]:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.delenv("SLURM_CLUSTERS", raising=False)
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)

    def over(target: SshTarget, name: str) -> Runner:
        # no ssh program and no master: nothing here connects (only the keys are looked at)
        link = SshLink(target, options={"ControlPath": str(folder / name)}, ssh=str(tmp_path / "no-ssh"))
        return Runner(ssh=link)

    made = {
        "local": Runner(),
        "login": over(SshTarget("127.0.0.1", "slurmlabssh", 2222), "a"),
        "login again": over(SshTarget("127.0.0.1", "slurmlabssh", 2222), "b"),
        "other": over(SshTarget("login2.example", "alice"), "c"),
    }
    yield made
    forget_inventories()
    for runner in made.values():
        poller = drop_poller(runner)
        if poller is not None:
            poller.stop()
        if runner.ssh is not None:
            runner.ssh.disconnect()


def test_a_cluster_over_ssh_has_a_poller_of_its_own(runners: dict[str, Runner]) -> None:
    local, login, again, other = (runners[k] for k in ("local", "login", "login again", "other"))
    assert get_poller(login) is not get_poller(local)
    assert get_poller(other) is not get_poller(login)
    assert get_poller(again) is get_poller(login)  # one cluster, one poller: however many runners reach it


def test_a_cluster_over_ssh_has_an_inventory_of_its_own(runners: dict[str, Runner]) -> None:
    local, login, other = runners["local"], runners["login"], runners["other"]
    assert cluster_inventory(login) is not cluster_inventory(local)
    assert cluster_inventory(other) is not cluster_inventory(login)
    assert cluster_inventory(runners["login again"]) is cluster_inventory(login)


def test_over_ssh_this_machines_slurm_conf_is_not_part_of_the_remote_clusters_key(
    runners: dict[str, Runner], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=here\n")
    before = runners["login"].cluster_key()
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert runners["login"].cluster_key() == before == ("ssh://slurmlabssh@127.0.0.1:2222", None, None)
    assert runners["local"].cluster_key() == (None, str(conf), None)
