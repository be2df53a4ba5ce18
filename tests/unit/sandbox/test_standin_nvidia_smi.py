"""The sandbox's stand-in nvidia-smi: its answers read back by slurmlab's own parsers, for the GPUs a step sees."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmlab.core.gpu import standin_names
from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE
from slurmlab.core.gpu.mig import MIG_PROFILE_TABLES, mig_slice_label
from slurmlab.core.gpu.nvlink import models as nvlink_models
from slurmlab.core.gpu.nvlink import nvlink_model_for
from slurmlab.core.gpu.smi import (
    parse_mig_devices,
    parse_mig_lgi,
    parse_mig_lgip,
    parse_smi_list,
    parse_topo_matrix,
    sniff,
)
from slurmlab.core.gpu.smi.nvlink import parse_nvlink_status
from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.sandbox.folder import write_standins
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import render_hardware_file
from slurmlab.sandbox.standin import devices as standin_devices
from slurmlab.sandbox.standin import nvidia_smi
from slurmlab.sandbox.standin.nvidia_smi import answer


def _doc(profile: str) -> dict[str, object]:
    doc: dict[str, object] = json.loads(render_hardware_file(load_profile(profile)))
    return doc


def _run(profile: str, *argv: str, **env: str) -> tuple[str, int]:
    out, err, rc = answer(
        list(argv),
        _doc(profile),
        {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "node1", **env},
        "Tue Dec  1 10:00:00 2026",
    )
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
    assert [(d.index, d.name) for d in devices] == [
        (0, "NVIDIA H100 80GB HBM3"),
        (1, "NVIDIA H100 80GB HBM3"),
    ]
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
    assert [(i.gpu, i.profile, i.start, i.size) for i in insts] == [
        (0, "1g.18gb", 0, 1),
        (1, "3g.71gb", 0, 4),
    ]
    assert [i.profile_id for i in insts] == [
        h200.profile("1g.18gb").profile_id,
        h200.profile("3g.71gb").profile_id,
    ]

    lgip, _ = _run("h200-mig", "mig", "-lgip", **env)
    rows = parse_mig_lgip(lgip)
    gpu0 = {r.name: r for r in rows if r.gpu == 0}
    assert set(gpu0) == {p.name for p in h200.profiles}
    assert all(
        gpu0[p.name].profile_id == p.profile_id and gpu0[p.name].total == p.max_instances
        for p in h200.profiles
    )
    assert gpu0["1g.18gb"].free == 0  # GPU 0 of the profile is seven 1g.18gb already
    gpu1 = {r.name: r for r in rows if r.gpu == 1}
    assert gpu1["3g.71gb"].free == 0 and gpu1["1g.18gb"].free == 0

    summary, _ = _run("h200-mig", **env)
    _marked(summary)
    section = summary[summary.rfind("\n+", 0, summary.index("| MIG devices:")) + 1 :]
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
    assert (
        rc == 0
        and "00000000:" in out
        and "Driver Version: N/A" in out
        and "No running processes found" in out
    )
    assert all(len(ln) == 89 for ln in out.splitlines() if ln.startswith(("|", "+")) and "MIG" not in ln)


def test_names_shared_with_slurmlab_are_the_same() -> None:
    for gpu, profile, start, size, gi in ((0, "3g.71gb", 4, 4, 2), (1, "1g.18gb", None, None, None)):
        assert standin_devices.mig_slice_label(gpu, profile, start, size, gi) == mig_slice_label(
            gpu, profile, start, size, gi
        )
    grid = {(r[0], r[1], r[2]): r for r in standin_devices.GRID}
    for key, size_gb in ((81559, "H100-80GB"), (143771, "H200-141GB"), (40960, "A100-40GB")):
        table = MIG_PROFILE_TABLES[size_gb]
        gpu = standin_devices.StandinGpu(0, "x", 0, "0", "0", key)
        names = standin_devices.gb_names(gpu, ())
        for p in table.profiles:
            row = grid[(p.compute_slices, p.memory_slices, p.name.endswith("+me"))]
            assert (row[3], row[4], row[5]) == (p.profile_id, p.max_instances, p.starts), p
            assert (
                names[(p.compute_slices, p.memory_slices)] + ("+me" if p.name.endswith("+me") else "")
                == p.name
            )


@pytest.mark.parametrize("module", [nvidia_smi, standin_devices, nvlink_models, standin_names])
def test_the_modules_are_stdlib_only_so_the_sandbox_can_copy_them(module: object) -> None:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    stdlib = {"__future__", "hashlib", "collections.abc", "dataclasses", "re"}
    # the ones copied in before it (sandbox/standin/scripts.py): their names are defined in the script
    assert imported - stdlib <= {
        "slurmlab.core.gpu.standin_names",
        "slurmlab.core.gpu.nvlink.models",
        "slurmlab.sandbox.standin.devices",
    }, imported


@pytest.mark.parametrize(
    "argv", [["-L"], ["topo", "-m"], ["nvlink", "-s"], ["mig", "-lgi"], ["mig", "-lgip"], []]
)
def test_every_answer_begins_and_ends_with_the_mark(argv: list[str]) -> None:
    out, _ = _run("h200-mig", *argv, CUDA_VISIBLE_DEVICES="0,13")
    _marked(out)


# ---- nvlink -s ------------------------------------------------------------------------------------------------


def test_nvlink_s_lists_each_visible_gpus_links_from_the_nvlink_table_and_parses() -> None:
    out, rc = _run("dgx-h100", "nvlink", "-s", CUDA_VISIBLE_DEVICES="0,5")
    assert rc == 0
    _marked(out)
    assert sniff(out) == "nvlink-s"
    # the real layout: the GPU line as -L prints it, then a tab, a space and one line per link
    assert "\n\t Link 0: 26.562 GB/s\n" in out
    statuses = parse_nvlink_status(out)
    listed = parse_smi_list(_run("dgx-h100", "-L", CUDA_VISIBLE_DEVICES="0,5")[0])[0]
    assert [(s.gpu, s.model, s.uuid) for s in statuses] == [(d.index, d.name, d.uuid) for d in listed]
    for s in statuses:
        row = nvlink_model_for(s.model)
        assert row is not None and row.key == "H100"
        assert s.links == tuple((k, row.reported_gbps) for k in range(row.links_per_gpu))
    assert "GPU 1 = the node's GPU 5 (Slurm IDX 5)" in out
    assert _run("dgx-h100", "nvlink", "--status", CUDA_VISIBLE_DEVICES="0,5")[0] == out


def test_nvlink_s_of_a_mig_step_shows_the_parent_gpus_links() -> None:
    out, rc = _run("h200-mig", "nvlink", "-s", CUDA_VISIBLE_DEVICES="4,13")  # slices of GPUs 0 and 1
    assert rc == 0
    row = nvlink_model_for("NVIDIA H200")
    assert row is not None
    assert [(s.gpu, s.model, len(s.links)) for s in parse_nvlink_status(out)] == [
        (0, "NVIDIA H200", row.links_per_gpu),
        (1, "NVIDIA H200", row.links_per_gpu),
    ]


def test_nvlink_s_prints_no_link_for_gpus_without_nvlink_and_says_why() -> None:
    out, rc = _run("seed", "nvlink", "-s", CUDA_VISIBLE_DEVICES="0,1")
    assert rc == 0
    _marked(out)
    lines = out.rstrip("\n").split("\n")
    assert all(ln.startswith(STANDIN_MARK) for ln in lines), out  # nvidia-smi itself prints nothing here
    assert f"{STANDIN_MARK}: GPU 1 prints no links: hardware profile seed gives it no NVLink" in lines


def test_nvlink_s_in_a_step_without_gpus_finds_none() -> None:
    out, rc = _run("dgx-h100", "nvlink", "-s")
    assert rc == 6 and "No devices were found" in out


def test_the_stand_in_topology_takes_its_own_link_state() -> None:
    """topo -m, -L and nvlink -s of one step fit together as a real node's do (same GPUs, UUIDs, link counts)."""
    env = {"CUDA_VISIBLE_DEVICES": "1,2,6"}
    topo = parse_topo_matrix(_run("dgx-h100", "topo", "-m", **env)[0])
    with_state = topo.with_nvlink_status(parse_nvlink_status(_run("dgx-h100", "nvlink", "-s", **env)[0]))
    assert [s.gpu for s in with_state.link_states] == [0, 1, 2]
    assert all(s.healthy and s.expected_gbps == s.links[0][1] for s in with_state.link_states)


def test_the_sandbox_script_answers_nvlink_s_without_slurmlab(tmp_path: Path) -> None:
    (tmp_path / HARDWARE_FILE).write_text(render_hardware_file(load_profile("dgx-h100")))
    (tmp_path / "slurm.conf").write_text("# test\n")
    write_standins(tmp_path)
    env = {
        "PATH": "/usr/bin:/bin",
        "CUDA_VISIBLE_DEVICES": "3",
        "SLURM_JOB_ID": "4",
        "SLURMD_NODENAME": "node2",
    }
    # -I: no site-packages, no PYTHONPATH: the NVLink table must be in the script itself
    res = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "bin" / "nvidia-smi"), "nvlink", "-s"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    expected, _, _ = answer(["nvlink", "-s"], _doc("dgx-h100"), env)
    assert res.stdout == expected
    assert len(parse_nvlink_status(res.stdout)[0].links) == 18
