"""best_gpus among the free GPUs of a node (issue 15, bullet 5), on real `nvidia-smi topo -m` captures.

The expectations are derived from each topology (its NVLink matrix and NUMA groups), not written down per file:
a checker that scores every subset independently of the chooser says what the best must be.
"""

from __future__ import annotations

import itertools
import json
import random

import pytest
from shared_paths import list_shared, require_shared

import slurmlab
from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.placement.choice import best_gpus, link_score
from slurmlab.core.gpu.smi import parse_topo_matrix
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import RequestError


def _matrix_captures() -> list[object]:
    """Every `topo -m`/`-mp` capture, as index.json of the shared fixtures lists them (not `-c`, `-p2p`)."""
    index = list_shared("nvidia-smi", pattern="index.json")
    if not index:
        return []
    entries = json.loads(index[0].read_text())
    names = {
        e["file"] for e in entries if e["command"].startswith(("nvidia-smi topo -m", "nvidia-smi topo -mp"))
    }
    return [p for p in list_shared("nvidia-smi", pattern="topo-*.txt") if p.name in names]


CAPTURES = _matrix_captures()


def topo_of(name: str) -> Topology:
    return parse_topo_matrix(require_shared("nvidia-smi", name).read_text())


def all_nvlink(t: Topology, gpus: tuple[int, ...]) -> bool:
    return all(t.nvlinks(a, b) for a, b in itertools.combinations(gpus, 2))


def groups(t: Topology, gpus: tuple[int, ...]) -> set[str]:
    return {t.gpu(i).numa_label for i in gpus}


@pytest.mark.filterwarnings("ignore:nvidia-smi topo -m")  # the PARTIAL capture says it is incomplete
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)  # type: ignore[attr-defined]
def test_the_choice_among_free_gpus_is_never_a_taken_one_and_never_beaten(path: object) -> None:
    t = parse_topo_matrix(path.read_text())  # type: ignore[attr-defined]
    if len(t.gpus) < 3:
        pytest.skip("fewer than 3 GPUs: nothing to take and still choose among")
    every = [g.index for g in t.gpus]
    rng = random.Random(path.name)  # type: ignore[attr-defined]  # reproducible per capture
    for _ in range(6):
        taken = sorted(rng.sample(every, rng.randint(1, len(every) - 2)))
        free = [i for i in every if i not in taken]
        n = rng.randint(2, len(free))
        choice = best_gpus(t, n, taken=taken)
        assert len(choice.gpus) == n and not set(choice.gpus) & set(taken)
        assert choice.taken == tuple(taken) and choice.ideal is not None
        subsets = list(itertools.combinations(free, n))
        if len(subsets) > 5000:
            continue  # the chooser goes greedy there; the checks below want the exhaustive answer
        # no free subset beats it on the first criterion (all pairs NVLink) ...
        if any(all_nvlink(t, s) for s in subsets):
            assert choice.all_nvlink, (taken, n, choice.explain())
        # ... and among the equally linked, no free subset sits on fewer NUMA groups
        linked_alike = [s for s in subsets if link_score(t, s) == link_score(t, choice.gpus)]
        assert len(groups(t, choice.gpus)) == min(len(groups(t, s)) for s in linked_alike)
        # what was lost names the taken GPUs of the ideal set, or says nothing was lost
        hit = sorted(set(choice.ideal.gpus) & set(taken))
        if hit:
            assert f"{format_cpu_list(hit)} {'is' if len(hit) == 1 else 'are'} taken" in choice.lost
            assert f"The best {n} would be {format_cpu_list(choice.ideal.gpus)}" in choice.lost
        else:
            assert choice.gpus == choice.ideal.gpus and "nothing lost" in choice.lost


def test_nvswitch_box_with_one_socket_taken_moves_to_the_other_with_the_same_links() -> None:
    t = topo_of("topo-8x-h100-sxm-nv18-no-nics-spaces.txt").with_model("NVIDIA H100 80GB HBM3")
    numa0 = tuple(sorted(t.numa_groups()["NUMA 0"]))
    numa1 = tuple(sorted(t.numa_groups()["NUMA 1"]))
    assert best_gpus(t, 4).gpus == numa0  # idle: every set has the same links, one NUMA node wins
    taken = [numa0[0], numa0[2], numa0[3]]
    choice = best_gpus(t, 4, taken=taken)
    assert choice.gpus == numa1 and choice.switched and choice.numa_groups == ("NUMA 1",)
    assert choice.lost == (
        f"The best 4 would be {format_cpu_list(numa0)} (NUMA 0, NV18 each); "
        f"{format_cpu_list(taken)} are taken, so {format_cpu_list(numa1)}: same links, "
        "another NUMA node (NUMA 1 instead of NUMA 0)."
    )
    # a switched pair gets the GPU's full links (18 x 25 GB/s), not a share of a sum over pairs
    gen = t.nvlink_generation
    assert gen is not None and choice.weakest_pair_gbps == gen.bandwidth_gbps(gen.links_per_gpu)
    assert "bonded links in total" not in choice.explain() and "not added up over pairs" in choice.explain()


def test_a_taken_gpu_that_costs_nothing_is_said_to_cost_nothing() -> None:
    t = topo_of("topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    far = max(g.index for g in t.gpus)
    choice = best_gpus(t, 2, taken=[far])
    assert choice.gpus == best_gpus(t, 2).gpus
    assert choice.lost.startswith(f"GPU {far} is taken, but the best 2") and "nothing lost" in choice.lost


def test_dgx1_mesh_with_a_gpu_of_each_quad_taken_says_which_pairs_lose_nvlink() -> None:
    t = topo_of("topo-dgx1-v100-8gpu-4mlx5-tabs.txt")
    choice = best_gpus(t, 4, taken=[0, 4])
    free = [i for i in range(8) if i not in (0, 4)]
    assert not any(all_nvlink(t, s) for s in itertools.combinations(free, 4))  # the premise, from the matrix
    assert not choice.all_nvlink
    got = format_cpu_list(choice.gpus)
    assert f"No free set of 4 shares NVLink: {got} — pair" in choice.lost
    no_nv = [f"{a}-{b}" for a, b in itertools.combinations(choice.gpus, 2) if not t.nvlinks(a, b)]
    assert no_nv and all(p in choice.lost for p in no_nv)
    assert all(str(t.link(*map(int, p.split("-"))).short) in choice.lost for p in no_nv)  # type: ignore[union-attr]


def test_direct_mesh_pairs_are_stated_pairwise() -> None:
    t = topo_of("topo-dgx1-v100-8gpu-4mlx5-tabs.txt")  # NV1 and NV2 pairs, NVLink 2 at 25 GB/s per link
    choice = best_gpus(t, 4)
    assert not choice.switched and choice.weakest_pair_gbps == 25.0
    assert "25–50 GB/s per direction between pairs" in choice.explain()


@pytest.mark.parametrize(
    ("n", "taken", "said", "hint"),
    [
        (
            4,
            [0, 1, 2, 3, 4, 5],
            "cannot choose 4 GPUs: only 2 of the 8 are free (taken: 0-5; free: 6-7)",
            "ask for 2 or fewer",
        ),
        (1, list(range(8)), "only 0 of the 8 are free (taken: 0-7; none is free)", "wait for the jobs"),
        (0, [], "cannot choose 0 GPUs: ask for at least 1", "--best 2"),
        (2, [9], "taken GPU 9 is not in this topology (it has 0-7)", "topology that of the node"),
    ],
)
def test_user_mistakes_are_told_with_what_to_do(n: int, taken: list[int], said: str, hint: str) -> None:
    t = topo_of("topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    with pytest.raises(RequestError) as err:
        best_gpus(t, n, taken=taken)
    assert said in str(err.value) and hint in (err.value.hint or "")


def test_top_level_best_gpus_takes_what_slurmlab_topology_returns() -> None:
    path = require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    node = slurmlab.topology(path)
    assert slurmlab.best_gpus(node, 4, taken=[0]).gpus == best_gpus(node.topology, 4, taken=[0]).gpus
    with pytest.raises(TypeError, match="Topology or NodeTopology"):
        slurmlab.best_gpus("topo.txt", 2)
