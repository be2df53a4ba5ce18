"""The sandbox's stand-in nvidia-smi: its answers read back by slurmlab's own parsers, for the GPUs a step sees."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from slurmlab.core.gpu import smi_standin, smi_standin_model
from slurmlab.core.gpu.mig_instances import mig_slice_label
from slurmlab.core.gpu.mig_tables import MIG_PROFILE_TABLES
from slurmlab.core.gpu.smi_parse import (
    parse_mig_devices,
    parse_mig_lgi,
    parse_mig_lgip,
    parse_smi_list,
    parse_topo_matrix,
    sniff,
)
from slurmlab.core.gpu.smi_standin import STANDIN_MARK, answer
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import render_hardware_file


def _doc(profile: str) -> dict[str, object]:
    doc: dict[str, object] = json.loads(render_hardware_file(load_profile(profile)))
    return doc


def _run(profile: str, *argv: str, **env: str) -> tuple[str, int]:
    out, err, rc = answer(list(argv), _doc(profile), {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "node1", **env},
                          "Tue Dec  1 10:00:00 2026")
    assert err == ""
    return out, rc


def _marked(out: str) -> None:
    lines = out.rstrip("\n").split("\n")
    assert lines[0].startswith(STANDIN_MARK) and lines[-1].startswith(STANDIN_MARK), out


def test_dash_l_lists_the_steps_gpus_numbered_from_zero_and_parses() -> None:
    out, rc = _run("dgx-h100", "-L", CUDA_VISIBLE_DEVICES="0,5")
    assert rc == 0
    _marked(out)
    devices, layout = parse_smi_list(out)
    assert [(d.index, d.name) for d in devices] == [(0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA H100 80GB HBM3")]
    assert layout is None and len({d.uuid for d in devices}) == 2
    # the last line names the node's GPUs behind the renumbered ones, and why the sandbox's variable differs
    assert "GPU 1 = the node's GPU 5 (Slurm IDX 5)" in out and "ConstrainDevices" in out
    assert sniff(out) == "list"


def test_uuids_differ_between_nodes_and_stay_the_same_on_one() -> None:
    one, _ = _run("dgx-h100", "-L", CUDA_VISIBLE_DEVICES="2")
    again, _ = _run("dgx-h100", "-L", CUDA_VISIBLE_DEVICES="2")
    other, _ = _run("dgx-h100", "-L", CUDA_VISIBLE_DEVICES="2", SLURMD_NODENAME="node2")
    assert parse_smi_list(one)[0][0].uuid == parse_smi_list(again)[0][0].uuid
    assert parse_smi_list(one)[0][0].uuid != parse_smi_list(other)[0][0].uuid


def test_the_step_gpus_are_read_when_cuda_visible_devices_is_unset() -> None:
    out, _ = _run("seed", "-L", SLURM_STEP_GPUS="1,3")
    assert [d.index for d in parse_smi_list(out)[0]] == [0, 1]
    assert "the node's GPU 3 (Slurm IDX 3)" in out and "SLURM_STEP_GPUS=1,3" in out


def test_topo_matrix_parses_with_links_cpus_and_numa_of_the_profile() -> None:
    out, rc = _run("dgx-h100", "topo", "-m", CUDA_VISIBLE_DEVICES="0,1,5")
    assert rc == 0
    _marked(out)
    topo = parse_topo_matrix(out)
    assert [g.index for g in topo.gpus] == [0, 1, 2]
    assert topo.gpu(2).cpu_affinity == frozenset(range(56, 112))
    assert topo.gpu(0).numa_affinity == frozenset({0})
    assert "NV18" in out


def test_topo_without_nvlink_says_node_or_sys_by_numa() -> None:
    out, _ = _run("seed", "topo", "-m", CUDA_VISIBLE_DEVICES="0,1,2")
    rows = {ln.split("\t")[0]: ln.split("\t")[1:4] for ln in out.splitlines() if ln.startswith("GPU")}
    assert rows["GPU0"] == [" X ", "NODE", "SYS"]
    parse_topo_matrix(out)


def test_mig_listing_lgi_lgip_and_summary_parse_for_the_visible_slices() -> None:
    h200 = MIG_PROFILE_TABLES["H200-141GB"]
    env = {"CUDA_VISIBLE_DEVICES": "4,13"}  # h200-mig: IDX 4 is a 1g.18gb of GPU 0, 13 a 3g.71gb of GPU 1
    listing, _ = _run("h200-mig", "-L", **env)
    devices, layout = parse_smi_list(listing)
    assert [(d.parent, d.name) for d in devices if d.parent is not None] == [(0, "1g.18gb"), (1, "3g.71gb")]
    assert layout is not None and all(d.uuid.startswith("MIG-") for d in devices if d.parent is not None)
    assert mig_slice_label(1, "3g.71gb", 0, 4) in listing and "MIG-<uuid>" in listing

    lgi, rc = _run("h200-mig", "mig", "-lgi", **env)
    assert rc == 0
    _marked(lgi)
    parsed = parse_mig_lgi(lgi, gpu_model="NVIDIA H200")
    insts = parsed.instances()
    assert [(i.gpu, i.profile, i.start, i.size) for i in insts] == [(0, "1g.18gb", 0, 1), (1, "3g.71gb", 0, 4)]
    assert [i.profile_id for i in insts] == [h200.profile("1g.18gb").profile_id, h200.profile("3g.71gb").profile_id]

    lgip, _ = _run("h200-mig", "mig", "-lgip", **env)
    rows = parse_mig_lgip(lgip)
    gpu0 = {r.name: r for r in rows if r.gpu == 0}
    assert set(gpu0) == {p.name for p in h200.profiles}
    assert all(gpu0[p.name].profile_id == p.profile_id and gpu0[p.name].total == p.max_instances
               for p in h200.profiles)
    assert gpu0["1g.18gb"].free == 0  # GPU 0 of the profile is seven 1g.18gb already
    gpu1 = {r.name: r for r in rows if r.gpu == 1}
    assert gpu1["3g.71gb"].free == 0 and gpu1["1g.18gb"].free == 0

    summary, _ = _run("h200-mig", **env)
    _marked(summary)
    section = summary[summary.rfind("\n+", 0, summary.index("| MIG devices:")) + 1:]
    mig = parse_mig_devices(section)
    assert [(m.gpu, m.mig_dev, m.sm) for m in mig] == [(0, 0, 16), (1, 0, 60)]


def test_whole_gpus_have_no_mig_instances() -> None:
    out, rc = _run("dgx-h100", "mig", "-lgi", CUDA_VISIBLE_DEVICES="0")
    assert rc == 6 and "No MIG-enabled devices found." in out


def test_a_step_without_gpus_sees_none() -> None:
    out, rc = _run("dgx-h100", "-L")
    assert rc == 6 and "No devices were found" in out and "no GPU in this step" in out


def test_an_unknown_option_is_refused_as_nvidia_smi_does_with_the_note() -> None:
    out, rc = _run("dgx-h100", "--query-gpu=name", CUDA_VISIBLE_DEVICES="0")
    assert rc == 2
    assert out.startswith("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
    assert f"{STANDIN_MARK}: it answers -L, topo -m" in out and "--query-gpu=name" in out


def test_the_summary_shows_each_gpu_and_no_driver() -> None:
    out, rc = _run("dgx-h100", CUDA_VISIBLE_DEVICES="3")
    assert rc == 0 and "00000000:" in out and "Driver Version: N/A" in out and "No running processes found" in out
    assert all(len(ln) == 89 for ln in out.splitlines() if ln.startswith(("|", "+")) and "MIG" not in ln)


def test_names_shared_with_slurmlab_are_the_same() -> None:
    for gpu, profile, start, size, gi in ((0, "3g.71gb", 4, 4, 2), (1, "1g.18gb", None, None, None)):
        assert smi_standin_model.mig_slice_label(gpu, profile, start, size, gi) == mig_slice_label(gpu, profile, start, size, gi)
    grid = {(r[0], r[1], r[2]): r for r in smi_standin_model.GRID}
    for key, size_gb in ((81559, "H100-80GB"), (143771, "H200-141GB"), (40960, "A100-40GB")):
        table = MIG_PROFILE_TABLES[size_gb]
        gpu = smi_standin_model.StandinGpu(0, "x", 0, "0", "0", key)
        names = smi_standin_model.gb_names(gpu, ())
        for p in table.profiles:
            row = grid[(p.compute_slices, p.memory_slices, p.name.endswith("+me"))]
            assert (row[3], row[4], row[5]) == (p.profile_id, p.max_instances, p.starts), p
            assert names[(p.compute_slices, p.memory_slices)] + ("+me" if p.name.endswith("+me") else "") == p.name


@pytest.mark.parametrize("module", [smi_standin, smi_standin_model])
def test_the_modules_are_stdlib_only_so_the_sandbox_can_copy_them(module: object) -> None:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    stdlib = {"__future__", "hashlib", "collections.abc", "dataclasses"}
    assert imported - stdlib <= {"slurmlab.core.gpu.smi_standin_model"}, imported


@pytest.mark.parametrize("argv", [["-L"], ["topo", "-m"], ["mig", "-lgi"], ["mig", "-lgip"], []])
def test_every_answer_begins_and_ends_with_the_mark(argv: list[str]) -> None:
    out, _ = _run("h200-mig", *argv, CUDA_VISIBLE_DEVICES="0,13")
    _marked(out)
