"""The clusters the server can show: its own Slurm and this user's running sandboxes, found by the files a
sandbox writes (the server may not import the sandbox room), held here to the sandbox's own code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_files import make_sandbox

from slurmlab.sandbox import folder as sandbox_folder
from slurmlab.sandbox import state_file
from slurmlab.server import clusters
from slurmlab.server.clusters import (
    OWN,
    ClusterDirectory,
    UnknownClusterError,
    cluster_name,
    find_clusters,
    label_of,
    running_sandboxes,
)


def test_the_default_place_is_the_sandboxs_own(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert clusters.sandbox_base() == sandbox_folder.base_directory() == base
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert clusters.sandbox_base() == sandbox_folder.base_directory()
    assert clusters.STATE_FILE == state_file.STATE_FILE


def test_cluster_name_and_label() -> None:
    assert cluster_name("# ClusterName=commented\nclustername = alpha # its name\n") == "alpha"
    assert cluster_name("SlurmctldHost=x\n") is None
    assert label_of("sandbox", "h200-mig") == "sandbox h200-mig"
    assert label_of(None, "h200-mig") == "sandbox h200-mig"
    assert label_of("alpha", None) == "alpha"
    assert label_of(None, None) == "this server's Slurm"


def test_running_sandboxes_are_found_and_stopped_ones_are_not(base: Path, slurmctld: int) -> None:
    conf = make_sandbox(base, "h200-mig", slurmctld)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    make_sandbox(base, "seed", int(dead.stdout))  # its slurmctld is gone: a stopped sandbox
    (base / "junk").mkdir()
    (base / "junk" / "state.json").write_text("{not json")
    assert running_sandboxes() == [("h200-mig", "h200-mig", str(conf))]
    # another program that got the pid since is not the sandbox's slurmctld
    make_sandbox(base, "dgx-h100", os.getpid())
    assert [f for f, _, _ in running_sandboxes()] == ["h200-mig"]


def test_a_sandbox_appears_and_goes_at_the_next_look(base: Path, slurmctld: int) -> None:
    directory = ClusterDirectory(lambda: None, ttl=0)
    assert [c["id"] for c in directory.clusters()] == [OWN]
    make_sandbox(base, "h200-mig", slurmctld, cluster="labcluster")
    views = directory.clusters()
    assert [c["id"] for c in views] == [OWN, "sandbox-h200-mig"]
    sandbox = views[1]
    assert (sandbox["name"], sandbox["sandbox"], sandbox["own"]) == ("labcluster", "h200-mig", False)
    assert sandbox["label"] == "labcluster · sandbox h200-mig"
    assert directory.find("sandbox-h200-mig") == sandbox
    (base / "h200-mig" / "state.json").unlink()  # `slurmlab sandbox down` removes it
    assert [c["id"] for c in directory.clusters()] == [OWN]


def test_the_servers_own_sandbox_is_listed_once_under_its_id(base: Path, slurmctld: int) -> None:
    own_conf = make_sandbox(base, "seed", slurmctld)
    make_sandbox(base, "h200-mig", slurmctld)
    views = find_clusters(str(own_conf))
    assert [(c["id"], c["own"], c["sandbox"]) for c in views] == [
        ("sandbox-seed", True, "seed"),
        ("sandbox-h200-mig", False, "h200-mig"),
    ]
    directory = ClusterDirectory(lambda: str(own_conf), ttl=0)
    # "default" (and no cluster at all) always names the server's own
    assert directory.find(OWN)["id"] == directory.find(None)["id"] == "sandbox-seed"


def test_an_own_sandbox_elsewhere_is_named_by_its_state_file(tmp_path: Path, base: Path) -> None:
    conf = make_sandbox(tmp_path / "elsewhere", "dgx-h100", 1)
    (own,) = find_clusters(str(conf))
    assert (own["id"], own["sandbox"], own["label"], own["conf"]) == (
        OWN,
        "dgx-h100",
        "sandbox dgx-h100",
        str(conf),
    )


def test_an_unknown_cluster_is_refused_naming_the_known_ones(base: Path, slurmctld: int) -> None:
    make_sandbox(base, "h200-mig", slurmctld)
    directory = ClusterDirectory(lambda: None, ttl=0)
    with pytest.raises(UnknownClusterError) as info:
        directory.find("sandbox-dgx-h100")
    message = str(info.value)
    assert "unknown cluster 'sandbox-dgx-h100'" in message
    assert "default (" in message and "sandbox-h200-mig (sandbox h200-mig)" in message
    assert "%slurm sandbox up" in message


def test_a_sandbox_started_beside_the_servers_own_is_found(
    tmp_path: Path, base: Path, slurmctld: int
) -> None:
    # the server runs on a sandbox outside the default place (a test session's); `%slurm sandbox up h200-mig`
    # in a notebook puts the second one beside it, and the sidebar must list it
    family = tmp_path / "session"
    own_conf = make_sandbox(family, "dgx-h100", slurmctld)
    beside = make_sandbox(family, "h200-mig", slurmctld)
    make_sandbox(base, "h200-mig", slurmctld)  # one of the same name in the default place keeps its own id
    views = find_clusters(str(own_conf))
    assert [(c["id"], c["own"], c["conf"]) for c in views] == [
        ("sandbox-dgx-h100", True, str(own_conf)),
        ("sandbox-h200-mig", False, str(base / "h200-mig" / "slurm.conf")),
        ("sandbox-h200-mig-2", False, str(beside)),
    ]
    # the picker tells the two h200-mig apart by their folders; a label of its own stays as it was
    assert [c["label"] for c in views] == [
        "sandbox dgx-h100",
        f"sandbox h200-mig in {base / 'h200-mig'}",
        f"sandbox h200-mig in {family / 'h200-mig'}",
    ]
    # a sandbox of the server's own profile: the own one keeps its label, the other names its folder
    twin = make_sandbox(family, "dgx-h100", slurmctld, folder_name="dgx-h100-2n")
    labels = {c["conf"]: c["label"] for c in find_clusters(str(own_conf))}
    assert labels[str(own_conf)] == "sandbox dgx-h100"
    assert labels[str(twin)] == f"sandbox dgx-h100 in {twin.parent}"
    # a folder that is not a sandbox's is not a family: nothing beside a plain slurm.conf is searched
    plain = tmp_path / "etc" / "slurm.conf"
    plain.parent.mkdir()
    plain.write_text("ClusterName=plain\n")
    make_sandbox(tmp_path, "other", slurmctld)
    assert [c["id"] for c in find_clusters(str(plain))] == [OWN, "sandbox-h200-mig"]
