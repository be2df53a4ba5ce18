"""Profiles: the shipped data files load, match the real captures they cite, and bad data is refused clearly."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest

from slurmlab.errors import SandboxError
from slurmlab.sandbox.profile import expand_ranges, format_ranges, list_profiles, load_profile, parse_profile


def raw(name: str) -> dict:
    return json.loads((resources.files("slurmlab.sandbox") / "profiles" / f"{name}.json").read_text())


def test_the_three_required_profiles_ship() -> None:
    assert {"seed", "dgx-h100", "h200-mig"} <= set(list_profiles())
    for name in list_profiles():
        p = load_profile(name)
        assert p.name == name and p.sources and p.partitions


def _topo_rows(text: str) -> dict[int, tuple[list[str], str]]:
    """GPU rows of `nvidia-smi topo -m`: index -> (link cells to GPU0..7, NUMA affinity)."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0].startswith("GPU") and cells[0][3:].isdigit():
            rows[int(cells[0][3:])] = (cells[1:9], cells[-2])
    return rows


def test_dgx_h100_matches_the_real_8x_h100_capture() -> None:
    from shared_paths import require_shared

    rows = _topo_rows(require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt").read_text())
    p = load_profile("dgx-h100")
    assert len(rows) == len(p.gpus) == 8
    for i, (links, numa) in rows.items():
        gpu = p.gpu(i)
        assert gpu.numa == int(numa), f"GPU{i}"
        for j, cell in enumerate(links):
            assert p.nvlink[i][j] == (0 if cell == "X" else int(cell.removeprefix("NV"))), (i, j)
        # GPU/NUMA affinity = the socket its cores sit on
        assert {c // p.cpu.cores_per_socket for c in gpu.cores} == {gpu.numa}


def test_h200_mig_layout_is_valid_and_in_its_own_partition() -> None:
    p = load_profile("h200-mig")
    assert [part.name for part in p.partitions] == ["mig"]
    assert p.mig_gpus == frozenset({0, 1, 2, 3})
    assert {m.profile for m in p.mig} >= {"1g.18gb", "3g.71gb"}
    for g in p.mig_gpus:
        used = sorted(s for m in p.mig if m.gpu == g for s in range(m.start, m.start + m.size))
        assert used == sorted(set(used)) and max(used) <= 7


def test_ranges_round_trip() -> None:
    assert expand_ranges("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert format_ranges([11, 10, 8, 3, 2, 1, 0]) == "0-3,8,10-11"
    for bad in ("", "3-1", "a", "1,,2"):
        with pytest.raises(ValueError):
            expand_ranges(bad)


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(SandboxError) as info:
        load_profile("dgx-b300")
    assert "dgx-b300" in str(info.value) and "dgx-h100" in str(info.value) and "seed" in str(info.value)


@pytest.mark.parametrize("nodes", [0, -1, 65, "2"])
def test_bad_node_count(nodes) -> None:
    with pytest.raises(SandboxError, match="--nodes"):
        load_profile("seed").scaled(nodes)


def _broken(name: str, change) -> dict:
    data = copy.deepcopy(raw(name))
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["mig"].append({"gpu": 0, "profile": "3g.71gb", "start": 2, "size": 4}),
            "cannot be placed at 2:4",
        ),
        (lambda d: d["mig"].append({"gpu": 9, "profile": "1g.18gb", "start": 0, "size": 1}), "GPU 9"),
        (lambda d: d["mig"].append({"gpu": 0, "profile": "5g.90gb", "start": 0, "size": 4}), "not one of"),
        (lambda d: d["mig"][0].update(start=1), "overlap"),
        (lambda d: d["gpus"][0].update(cores="0-999"), "exceed"),
        (lambda d: d["gpus"][0].update(cores="x"), "'cores'"),
        (lambda d: d["nvlink"][0].__setitem__(1, 4), "symmetric"),
        (lambda d: d["nvlink"].pop(), "matrix"),
        (lambda d: d.pop("partitions"), "'partitions'"),
        (lambda d: d["gpus"].reverse(), "in order"),
    ],
)
def test_bad_profile_data_is_refused_with_the_field(change, message: str) -> None:
    with pytest.raises(SandboxError, match=message) as info:
        parse_profile(_broken("h200-mig", change), source="h200-mig.json")
    assert "h200-mig.json" in str(info.value)
