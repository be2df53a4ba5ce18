"""Which GPUs of a node are taken (recorded `scontrol show node -d` / `--json` of 22.05, 24.11, 26.05), and the
salloc line that comes closest to a chosen set."""

from __future__ import annotations

import json
import re

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_path

import slurmlab
from slurmlab.core.gpu.placement import INDICES_NOTE, best_gpus, salloc_advice, taken_on_node
from slurmlab.core.slurm.models import Node
from slurmlab.core.slurm.parse_json import parse_nodes_json
from slurmlab.core.slurm.parse_text import parse_scontrol_nodes
from slurmlab.core.slurm.ranges import parse_index_list


def _gres_used_text(version: str) -> dict[str, str]:
    """node -> its GresUsed= as printed: the truth the parsed records are checked against."""
    text = golden_path(version, "s08_scontrol_show_node_d.txt").read_text()
    return dict(re.findall(r"NodeName=(\S+).*?GresUsed=(\S+)", text, flags=re.S))


def _expected_taken(gres_used: str) -> set[int]:
    """Whole GPUs from gpu:…(IDX:…), plus GPUs whose shards are in use (22.05 IDX:, 24.11+ used/total)."""
    taken: set[int] = set()
    gpu = re.search(r"gpu:[^,(]*\(IDX:([^)]*)\)", gres_used)
    if gpu and gpu.group(1) != "N/A":
        taken |= set(parse_index_list(gpu.group(1)))
    shard = re.search(r"shard:[^(]*\(([^)]*)\)", gres_used)
    if shard:
        body = shard.group(1)
        if body.startswith("IDX:"):
            if body != "IDX:N/A" and not re.search(r"shard:[^:]*:0\(", gres_used):
                taken |= set(parse_index_list(body[4:]))
        else:
            taken |= {i for i, slot in enumerate(body.split(",")) if not slot.startswith("0/")}
    return taken


def _nodes(version: str, form: str) -> list[Node]:
    if form == "text":
        return parse_scontrol_nodes(golden_path(version, "s08_scontrol_show_node_d.txt").read_text())
    return parse_nodes_json(json.loads(golden_path(version, "s07_scontrol_json_show_node.json").read_text()))


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
@pytest.mark.parametrize("form", ["text", "json"])
def test_taken_gpus_match_gres_used_of_every_version(version: str, form: str) -> None:
    if form == "json" and version == "22.05":
        pytest.skip("22.05 has no scontrol --json")
    truth = _gres_used_text(version)
    nodes = _nodes(version, form)
    assert {n.name for n in nodes} == set(truth)
    for node in nodes:
        held = taken_on_node(node)
        assert set(held.gpus) == _expected_taken(truth[node.name]), (node.name, truth[node.name])
        assert held.total == 8 and held.line().startswith(f"{node.name}: GPUs ")
        shared_only = _expected_taken(truth[node.name]) - set(node.gpu_used_indices().get("h100", ()))
        assert bool(shared_only) == any("shared out" in note for note in held.notes)


def test_an_index_map_turns_slurm_idx_into_topology_indices() -> None:
    (node,) = [n for n in _nodes("22.05", "text") if n.name == "node2"]  # GresUsed=gpu:h100:2(IDX:0,4)
    assert taken_on_node(node).gpus == (0, 4)
    assert taken_on_node(node, {0: 5, 4: 1}).gpus == (1, 5)


def test_salloc_advice_for_one_socket_of_an_nvswitch_box() -> None:
    topo = slurmlab.topology(profile="dgx-h100").topology
    choice = best_gpus(topo, 4, taken=[0, 2, 3])
    advice = salloc_advice(topo, choice, node="node1", gpu_type="h100", free=5)
    assert advice.options == ("-w", "node1", "-N", "1", "--gpus", "h100:4", "--gres-flags=enforce-binding")
    assert advice.notes[0] == INDICES_NOTE and "cannot be asked for GPU indices" in INDICES_NOTE
    assert any("one socket, as 4-7 do (NUMA 1)" in note for note in advice.notes)
    assert not any("Links=" in note for note in advice.notes)  # on a switch every set is linked alike
    assert any("--gpu-bind=closest" in note for note in advice.notes)


def test_salloc_advice_when_the_set_spans_sockets_or_is_all_that_is_free() -> None:
    topo = slurmlab.topology(profile="dgx-h100").topology
    spread = best_gpus(topo, 4, taken=[0, 4])  # 3 free per socket: no socket holds 4
    assert len(spread.numa_groups) == 2
    advice = salloc_advice(topo, spread, gpu_type="h100", free=6)
    assert "--gres-flags=enforce-binding" not in advice.options  # it would make the job wait for ever
    last = best_gpus(topo, 2, taken=[0, 1, 2, 3, 4, 5])
    notes = salloc_advice(topo, last, node="node1", free=2).notes
    assert any(note.startswith("Only 2 GPUs are free on node1 now (6-7)") for note in notes)
    assert salloc_advice(topo, best_gpus(topo, 1), free=8).options == ("-N", "1", "--gpus", "1")
