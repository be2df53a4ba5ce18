"""Checks against a ClusterInventory built like the shared fixture cluster (slurm.conf + gres.conf of 22.05),
and against the cluster the project's golden recordings show (tests/data/slurm: dgx-h100, node1-2, 112 CPUs,
8 x h100 + 32 shards each, one partition gpu), read from those recordings as slurmlab reads a cluster.

node1-2: 48 CPUs, 2 sockets, 64000 MB, 4 x h100 + 16 shards, features h100,nvlink
node3:   32 CPUs, 2 sockets, 32000 MB, 4 x 1g.18gb + 1 x 3g.71gb (MIG), features h200,mig
partitions gpu (node1-2, default), mig (node3, MaxTime 1 day), all (node1-3)
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_inventory, golden_path
from shared_paths import require_shared

from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
from slurmlab.core.request.request import GpuRequest, RequestProblems, parse_request
from slurmlab.core.request.validate import validate
from slurmlab.core.slurm.hostlist import expand
from slurmlab.errors import RequestError


def fixture_cluster() -> ClusterInventory:
    h100 = {
        "cpus": 48,
        "memory_mb": 64000,
        "sockets": 2,
        "gpus": {"h100": 4},
        "shards": 16,
        "features": ("h100", "nvlink"),
    }
    return ClusterInventory.build(
        nodes=[
            NodeInventory("node1", **h100),  # type: ignore[arg-type]
            NodeInventory("node2", **h100),  # type: ignore[arg-type]
            NodeInventory(
                "node3",
                cpus=32,
                memory_mb=32000,
                sockets=2,
                gpus={"1g.18gb": 4, "3g.71gb": 1},
                features=("h200", "mig"),
            ),
        ],
        partitions={"gpu": ["node1", "node2"], "mig": ["node3"], "all": ["node1", "node2", "node3"]},
        default="gpu",
        max_time={"mig": 86400},
        name="fx2205",
    )


CLUSTER = fixture_cluster()


def p(line: str) -> GpuRequest:
    return parse_request(shlex.split(line))


def problems_of(line: str, cluster: ClusterInventory = CLUSTER) -> list[tuple[str, str]]:
    with pytest.raises(RequestError) as info:
        validate(p(line), cluster)
    assert isinstance(info.value, RequestProblems)
    return [(pr.message, pr.hint) for pr in info.value.problems]


# --- the inventory mirrors the recorded cluster


def _conf_lines(path: Path, key: str) -> list[dict[str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith(key + "="):
            rows.append(dict(item.split("=", 1) for item in line.split()))
    return rows


SANDBOX_CONF = Path(__file__).resolve().parents[3] / "golden" / "sandbox"


def _check_against_conf(conf: Path, cluster: ClusterInventory, *, sockets: bool = True) -> None:
    for row in _conf_lines(conf, "NodeName"):
        for name in expand(row["NodeName"]):
            node = next(n for part in cluster.partitions for n in part.nodes if n.name == name)
            assert node.cpus == int(row["CPUs"])
            if sockets:
                assert node.sockets == int(row["Sockets"])
            assert node.memory_mb == int(row["RealMemory"])
            assert set(node.features) == set(row["Features"].split(","))
            gres = {}
            for item in row["Gres"].split(","):
                gname, gtype, count = item.split(":")
                gres[(gname, gtype)] = int(count)
            assert {t: c for (g, t), c in gres.items() if g == "gpu"} == dict(node.gpus)
            assert sum(c for (g, _), c in gres.items() if g == "shard") == node.shards
    parts = _conf_lines(conf, "PartitionName")
    assert [r["PartitionName"] for r in parts] == list(cluster.partition_names)
    for row in parts:
        part = cluster.partition(row["PartitionName"])
        assert part is not None and part.node_names == tuple(expand(row["Nodes"]))
        assert part.default == (row.get("Default") == "YES")
        limit = row["MaxTime"]
        assert part.max_time_s == (None if limit == "INFINITE" else 86400 * int(limit.split("-")[0]))


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_inventory_read_from_the_recordings_matches_the_sandbox_slurm_conf(version: str) -> None:
    """What slurmlab reads from the recorded cluster is what the sandbox configured (its rendered slurm.conf)."""
    _check_against_conf(
        SANDBOX_CONF / f"dgx-h100-{version}.slurm.conf", golden_inventory(version)[0], sockets=False
    )


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_sockets_read_from_the_recordings_match_the_sandbox_slurm_conf(version: str) -> None:
    _check_against_conf(SANDBOX_CONF / f"dgx-h100-{version}.slurm.conf", golden_inventory(version)[0])


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_inventory_matches_the_fixture_slurm_conf(version: str) -> None:
    """Extra: the hand-built CLUSTER mirrors the shared capture's slurm.conf."""
    _check_against_conf(require_shared("slurm", version, "slurm.conf"), CLUSTER)


# --- the recorded workloads (w01-w05) were accepted by Slurm: they pass here too


@pytest.mark.parametrize(
    "line",
    [
        "-J gpus2 -t 60 --gpus=2",
        "-J gpn2 -t 60 -N 2 --ntasks-per-node=2 --gpus-per-node=h100:1 --gpu-bind=closest "
        "--gres-flags=enforce-binding",
        "-J shard4 -t 60 --gres=shard:4",
        "-J migjob -t 60 -p mig --gres=gpu:1g.18gb:2",
        "-J mig3g -t 60 -p mig --gpus=3g.71gb:1 --cpus-per-gpu=4 --mem-per-gpu=8G",
        "-J bigwait -t 60 -N 2 --gpus-per-node=4",
        "-n 1 --gpus-per-task=1",
        "-p gpu,mig --gres=gpu:1g.18gb:1",
        "-p all -N 3 --gpus-per-node=1",
        "-p gpu -w node[1-2] -x node2 -C 'h100&nvlink' --mem=64000 -c 24 --ntasks-per-node=2",
        "--mem=0 --exclusive -t INFINITE",
    ],
)
def test_accepted_requests_pass(line: str) -> None:
    assert validate(p(line), CLUSTER) == p(line)


# --- the recorded rejections (e03-e10): each caught before submission, naming the value and the fix


@pytest.mark.parametrize(
    ("fixture", "line", "message", "hint"),
    [
        (
            "e03_salloc_bad_gres_type",
            "-t 5 --gres=gpu:nonexistent:1",
            "--gres=gpu:nonexistent:1: partition 'gpu' has no nonexistent GPUs",
            "use a GPU type of partition 'gpu': h100 (no partition has nonexistent; the cluster's GPU types are "
            "1g.18gb, 3g.71gb, h100)",
        ),
        (
            "e04_salloc_gpus99",
            "-t 5 --gpus=99",
            "--gpus=99: partition 'gpu' has only 8 GPUs in total",
            "ask for at most 8, or use a partition with more GPUs",
        ),
        (
            "e05_salloc_bad_partition",
            "-t 5 -p nosuchpart --gpus=1",
            "--partition=nosuchpart: the cluster has no partition 'nosuchpart'",
            "use one of: gpu, mig, all",
        ),
        (
            "e07_salloc_gpus_per_node_too_many",
            "-t 5 --gpus-per-node=8",
            "--gpus-per-node=8: no node of partition 'gpu' has 8 GPUs (the most is 4, on node1, node2)",
            "ask for at most 4 per node and more nodes (--nodes) if you need more",
        ),
        (
            "e08_salloc_bad_gres_name",
            "-t 5 --gres=fpga:1",
            "--gres=fpga:1: partition 'gpu' offers no 'fpga' GRES",
            "this cluster offers the GRES: gpu, shard",
        ),
        (
            "e09_sbatch_bad_gpus_type",
            "-t 5 --gpus=a100:1",
            "--gpus=a100:1: partition 'gpu' has no a100 GPUs",
            "use a GPU type of partition 'gpu': h100 (no partition has a100; the cluster's GPU types are 1g.18gb, "
            "3g.71gb, h100)",
        ),
        (
            "e10_salloc_mig_wrong_partition",
            "-t 5 -p gpu --gres=gpu:1g.18gb:1",
            "--gres=gpu:1g.18gb:1: partition 'gpu' has no 1g.18gb GPUs",
            "1g.18gb GPUs are in partition mig or all: add -p mig; or use a GPU type of partition 'gpu': h100",
        ),
    ],
)
def test_recorded_rejections_are_caught(fixture: str, line: str, message: str, hint: str) -> None:
    assert problems_of(line) == [(message, hint)]


@pytest.mark.parametrize(
    "fixture",
    [
        "e03_salloc_bad_gres_type",
        "e04_salloc_gpus99",
        "e05_salloc_bad_partition",
        "e07_salloc_gpus_per_node_too_many",
        "e08_salloc_bad_gres_name",
        "e09_sbatch_bad_gpus_type",
        "e10_salloc_mig_wrong_partition",
    ],
)
def test_the_shared_capture_shows_slurm_refused_them(fixture: str) -> None:
    """Extra: the real Slurm of the shared capture refused each request of the test above."""
    for version in ("22.05", "24.11"):
        stderr = require_shared("slurm", version, fixture + ".stderr").read_text()
        assert "error" in stderr  # Slurm really refused this request


# the refusals recorded in the golden files: (file, versions that refused, the request, slurmlab's problem)
GOLDEN_REFUSALS = [
    (
        "e12_sbatch_more_gpus_than_partition",
        GOLDEN_VERSIONS,
        "-t 5 --gpus=17",
        "--gpus=17: partition 'gpu' has only 16 GPUs in total",
    ),
    (
        "e11_sbatch_more_nodes_than_partition",
        ("24.11",),
        "-t 5 -N 3",
        "--nodes=3: partition 'gpu' has only 2 node(s)",
    ),
]


@pytest.mark.parametrize(
    ("fixture", "versions", "line", "message"), GOLDEN_REFUSALS, ids=[r[0] for r in GOLDEN_REFUSALS]
)
def test_recorded_refusals_are_caught_before_submission(
    fixture: str, versions: tuple[str, ...], line: str, message: str
) -> None:
    for version in versions:
        stderr = golden_path(version, fixture + ".stderr").read_text()
        assert "error" in stderr  # Slurm really refused this request
        found = problems_of(line, golden_inventory(version)[0])
        assert [m for m, _ in found] == [message], (version, found)
        assert all(h for _, h in found)


def test_gpu_bind_bogus_is_caught_at_parse_like_slurm_e06() -> None:
    with pytest.raises(RequestError, match="'bogus' is not a GPU binding"):
        p("-t 5 --gpus=1 --gpu-bind=bogus")


def test_the_shared_capture_shows_slurm_refused_gpu_bind_bogus() -> None:
    """Extra: Slurm's own words for e06, in the shared capture only."""
    stderr = require_shared("slurm", "24.11", "e06_salloc_bad_gpu_bind.stderr").read_text()
    assert "Invalid --gpu-bind argument: bogus" in stderr


@pytest.mark.parametrize(
    ("line", "message", "hint"),
    [
        (
            "-p gpx --gpus=1",
            "--partition=gpx: the cluster has no partition 'gpx'",
            "did you mean 'gpu'? use one of: gpu, mig, all",
        ),
        ("-N 3", "--nodes=3: partition 'gpu' has only 2 node(s)", "ask for at most --nodes=2"),
        (
            "--gres=shard:17",
            "--gres=shard:17: no node of partition 'gpu' has 17 shards (the most is 16, on node1, node2)",
            "ask for at most 16 per node",
        ),
        (
            "-p mig --gres=shard:2",
            "--gres=shard:2: partition 'mig' offers no 'shard' GRES",
            "shard is offered in partition gpu or all: add -p gpu",
        ),
        (
            "-p mig --gres=gpu:1g.18gb:5",
            "--gres=gpu:1g.18gb:5: no node of partition 'mig' has 5 1g.18gb GPUs (the most is 4, on node3)",
            "at most 4 per node",
        ),
        (
            "-p mig --gpus=h100:1",
            "--gpus=h100:1: partition 'mig' has no h100 GPUs",
            "h100 GPUs are in partition gpu or all: add -p gpu; or use a GPU type of partition 'mig': 1g.18gb, 3g.71gb",
        ),
        (
            "-p all --gpus-per-node=6",
            "--gpus-per-node=6: no node of partition 'all' has 6 GPUs (the most is 5, on node3)",
            "at most 5 per node",
        ),
        (
            "-p all -N 3 --gpus-per-node=h100:1",
            "--gpus-per-node=h100:1 on --nodes=3: only 2 node(s) of "
            "partition 'all' have 1 h100 GPUs (node1, node2)",
            "ask for at most --nodes=2",
        ),
        (
            "-p all -N 2 --gpus-per-node=5",
            "only 1 node(s) of partition 'all' have 5 GPUs (node3)",
            "--nodes=1, or fewer GPUs per node",
        ),
        (
            "-n 9 --gpus-per-task=1",
            "--gpus-per-task=1 x --ntasks=9: partition 'gpu' has only 8 GPUs in total",
            "at most 8",
        ),
        (
            "-n 4 --ntasks-per-node=4 --gpus-per-task=2",
            "--gpus-per-task=2 x --ntasks-per-node=4: no node of partition 'gpu' has 8 GPUs",
            "at most 4 per node",
        ),
        (
            "-c 64",
            "--cpus-per-task=64 = 64 CPUs per node: no node of partition 'gpu' has more than 48",
            "at most 48 CPUs",
        ),
        (
            "--mem=100G",
            "--mem=100G: no node of partition 'gpu' has that much memory (the most is 64000 MiB)",
            "--mem=64000M",
        ),
        (
            "-p mig --gpus-per-node=1 --mem-per-gpu=40G",
            "--mem-per-gpu=40G x --gpus-per-node=1: no node of partition 'mig' has that much memory",
            "--mem=32000M",
        ),
        (
            "-p mig -t 2-0",
            "--time=2-00:00:00 is above the time limit of partition 'mig' (1-00:00:00)",
            "--time=1-00:00:00",
        ),
        (
            "-C a100",
            "--constraint=a100: no node of partition 'gpu' has the feature(s) a100",
            "use features of partition 'gpu': h100, nvlink",
        ),
        (
            "-w node[3-4]",
            "--nodelist=node[3-4]: node3, node4 not in partition 'gpu'",
            "pick nodes of partition 'gpu': node1, node2",
        ),
        ("-w node[1-", "--nodelist=node[1-: cannot parse", "node[1-3,7]"),
    ],
)
def test_inventory_problems(line: str, message: str, hint: str) -> None:
    found = problems_of(line)
    assert any(message in m and hint in h for m, h in found), found


def test_several_partitions_fit_if_one_fits_else_all_are_reported() -> None:
    assert validate(p("-p mig,gpu --gpus=h100:2"), CLUSTER).partition == "mig,gpu"
    found = problems_of("-p mig,gpu --gpus=a100:1")
    assert [m for m, _ in found] == [
        "--gpus=a100:1: partition 'mig' has no a100 GPUs",
        "--gpus=a100:1: partition 'gpu' has no a100 GPUs",
    ]


def test_static_and_inventory_problems_come_in_one_error() -> None:
    found = problems_of("-p mig --gres=shard:2 --gpu-bind=closest -t 3-0")
    assert len(found) == 3
    assert re.search("shared GRES binding", found[0][0])


def test_no_partition_and_no_known_default_checks_every_partition() -> None:
    # 24.11+ JSON carries no partition flags: an unknown default must never refuse a request
    small = NodeInventory("n1", cpus=8, memory_mb=1000, gpus={"": 2})
    big = NodeInventory("n2", cpus=8, memory_mb=1000, gpus={"h100": 4})
    cluster = ClusterInventory.build(nodes=[small, big], partitions={"p1": ["n1"], "p2": ["n2"]})
    checked = validate(p("--gpus=4"), cluster)  # only p2 can run it: Slurm will pick it
    assert any("checked against every partition (p1, p2)" in w for w in checked.warnings)
    found = problems_of("--gpus=9", cluster)
    assert [m for m, _ in found] == [
        "--gpus=9: partition 'p1' has only 2 GPUs in total",
        "--gpus=9: partition 'p2' has only 4 GPUs in total",
    ]
    assert validate(p("-p p2 --gpus=2"), cluster).partition == "p2"
    found = problems_of("-p p1 --gpus=h100:1", cluster)
    assert found[0][1].startswith("h100 GPUs are in partition p2: add -p p2")


def test_build_refuses_unknown_nodes_and_default() -> None:
    node = NodeInventory("n1", cpus=8, memory_mb=1000)
    with pytest.raises(RequestError, match="lists nodes not in the inventory: n2"):
        ClusterInventory.build(nodes=[node], partitions={"p": ["n1", "n2"]})
    with pytest.raises(RequestError, match="default partition 'q'"):
        ClusterInventory.build(nodes=[node], partitions={"p": ["n1"]}, default="q")


def test_inventory_is_read_only() -> None:
    node = CLUSTER.partitions[0].nodes[0]
    with pytest.raises(TypeError):
        node.gpus["h100"] = 9  # type: ignore[index]
    assert CLUSTER.default_partition is not None and CLUSTER.default_partition.name == "gpu"
    assert CLUSTER.gres_names == ("gpu", "shard")
    assert CLUSTER.partition("all") is not None and CLUSTER.partition("all").total("gpu") == 13  # type: ignore[union-attr]
