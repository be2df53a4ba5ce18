"""The probes that run inside steps: their scripts run here with this machine's python3 (no Slurm involved), and
the nvidia-smi topology source fed real captures through scripted steps of a FakeRunner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from fake_slurm import JOB, cluster, job_in
from shared_paths import smi_capture

from slurmlab.core.gpu.binding import parse_task_reports
from slurmlab.core.gpu.nvlink import nvlink_model_for
from slurmlab.core.gpu.smi import parse_topo_matrix
from slurmlab.core.gpu.smi.nvlink import parse_nvlink_status
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.binding_probe import TASK_PROBE
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.probes import NVML_PROBE, node_topology
from slurmlab.testing import FakeRunner

PY = shutil.which("python3")
pytestmark = pytest.mark.skipif(PY is None, reason="python3 is not on PATH")


def test_task_probe_reports_env_and_real_affinity() -> None:
    env = {
        **os.environ,
        "SLURM_PROCID": "3",
        "SLURMD_NODENAME": "nodeX",
        "SLURM_STEP_GPUS": "2,5",
        "CUDA_VISIBLE_DEVICES": "5",
    }
    out = subprocess.run(
        [PY or "python3", "-c", TASK_PROBE], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    (rep,) = parse_task_reports(
        [f"3: {ln}" for ln in out.stdout.splitlines()]
    )  # as srun --label prints task 3
    assert (rep.rank, rep.node, rep.step_gpus, rep.visible) == (3, "nodeX", (2, 5), ("5",))
    assert rep.affinity == frozenset(os.sched_getaffinity(0)) and rep.host_cpus == os.cpu_count()


def test_nvml_probe_says_when_nvidia_ml_py_is_missing() -> None:
    out = subprocess.run([PY or "python3", "-c", NVML_PROBE], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("SLURMLAB_NVML ")]
    report = json.loads(line.split(" ", 1)[1])
    has_nvml = (
        subprocess.run(
            [PY or "python3", "-c", "import pynvml; pynvml.nvmlInit()"], capture_output=True
        ).returncode
        == 0
    )
    if has_nvml:  # a GPU machine: a real report
        assert report.get("gpus"), report
    else:
        assert "error" in report and "nvidia-ml-py" in report["error"]


def test_nvml_probe_is_valid_python() -> None:
    compile(NVML_PROBE, "<nvml probe>", "exec")


# ---- the nvidia-smi source: topo -m, -L and nvlink -s as scripted steps ---------------------------------------
# Real captures of one kind of node: a 4x A100-SXM4-80GB NV12 box, an HGX H100 (nvlink -s of its GPU 0), PCIe A10s.
A100_TOPO, A100_NVLINK = (
    "topo-4x-a100-sxm4-80gb-nv12-ansi-underline-header.txt",
    "nvlink-status-4x-a100-sxm4-80gb.txt",
)
H100_TOPO, H100_NVLINK = "topo-8x-h100-sxm-nv18-no-nics-spaces.txt", "nvlink-status-i0-h100-80gb-hbm3.txt"


def _gpu_lines(nvlink_text: str) -> str:
    """The ``-L`` listing of the GPUs an ``nvlink -s`` capture names (its GPU lines are -L's lines)."""
    return "\n".join(ln for ln in nvlink_text.splitlines() if ln.startswith("GPU ")) + "\n"


def _attached(
    fake: FakeRunner,
    poller: JobPoller,
    topo: str,
    listing: str | None,
    *,
    nvlink: str = "",
    nvlink_err: str = "",
    nvlink_rc: int = 0,
) -> Allocation:
    """Job 19 (node1, recorded Slurm 22.05) whose steps answer ``nvidia-smi topo -m`` / ``-L`` / ``nvlink -s``."""
    cluster(fake)
    job_in(fake, "running")
    fake.on(["srun", ..., "nvidia-smi", "topo", "-m"], stdout=topo)
    if listing is None:
        fake.on(["srun", ..., "nvidia-smi", "-L"], stderr="NVIDIA-SMI has failed", returncode=9)
    else:
        fake.on(["srun", ..., "nvidia-smi", "-L"], stdout=listing)
    fake.on(
        ["srun", ..., "nvidia-smi", "nvlink", "-s"], stdout=nvlink, stderr=nvlink_err, returncode=nvlink_rc
    )
    alloc = Allocation.attach(JOB, runner=fake, poller=poller)
    alloc.wait(timeout=5)
    return alloc


def test_the_live_probe_reads_each_links_state_with_nvlink_s(fake: FakeRunner, poller: JobPoller) -> None:
    nvlink = smi_capture(A100_NVLINK)
    alloc = _attached(fake, poller, smi_capture(A100_TOPO), _gpu_lines(nvlink), nvlink=nvlink)
    try:
        nt = node_topology(alloc, source="nvidia-smi")
    finally:
        alloc.forget()
    # one more step, on the same node as topo -m, run through the runner as an argv list
    (argv,) = fake.called(["srun", ..., "nvidia-smi", "nvlink", "-s"])
    assert argv[argv.index("-w") + 1] == "node1"
    expected = parse_nvlink_status(nvlink)
    states = nt.topology.link_states
    assert [(s.gpu, s.uuid, s.total) for s in states] == [(e.gpu, e.uuid, len(e.links)) for e in expected]
    row = nvlink_model_for(expected[0].model)
    assert row is not None and all(s.total == row.links_per_gpu and s.healthy for s in states)
    assert nt.detail == "nvidia-smi topo -m on node1; link state from nvidia-smi nvlink -s on node1"
    summary = nt.summary()
    assert "NVLink link state (nvidia-smi nvlink -s):" in summary
    assert f"GPU 0, 1, 2, 3: all {row.links_per_gpu} links active at {row.reported_gbps:g} GB/s" in summary
    assert not any("NVLink" in n for n in nt.notes), nt.notes


def test_a_down_link_on_the_node_shows_as_it_does_for_a_saved_capture(
    fake: FakeRunner, poller: JobPoller
) -> None:
    real = smi_capture(H100_NVLINK)
    # the same GPU after a bad reseat: link 7 down (nvidia-smi then prints <inactive> for it)
    degraded = "\n".join(
        ln.replace("26.562 GB/s", "<inactive>") if "Link 7:" in ln else ln for ln in real.splitlines()
    )
    assert degraded != real
    alloc = _attached(fake, poller, smi_capture(H100_TOPO), None, nvlink=degraded)
    try:
        nt = node_topology(alloc, source="nvidia-smi")
    finally:
        alloc.forget()
    state = nt.topology.link_state(0)
    assert state is not None and state.inactive == (7,) and state.active == state.total - 1
    assert "GPU0: 1 of 18 links inactive (inactive: link 7)" in nt.summary()
    # the model came from nvlink -s (the -L step failed): the links are judged against the H100's speed
    assert nt.topology.gpu(0).model == parse_nvlink_status(real)[0].model


@pytest.mark.parametrize(
    ("stdout", "stderr", "rc", "said"),
    [
        # an nvidia-smi without the nvlink subcommand answers as for any option it does not know
        (
            "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n",
            "",
            2,
            "no NVLink link state: nvidia-smi nvlink -s on node1 failed (exit 2: Invalid combination of input arguments",
        ),
        (
            "",
            "srun: error: node1: task 0: Exited with exit code 255",
            255,
            "failed (exit 255: srun: error: node1: task 0: Exited with exit code 255)",
        ),
    ],
)
def test_a_failing_nvlink_s_leaves_the_topology_without_link_state(
    fake: FakeRunner, poller: JobPoller, stdout: str, stderr: str, rc: int, said: str
) -> None:
    alloc = _attached(
        fake, poller, smi_capture(A100_TOPO), None, nvlink=stdout, nvlink_err=stderr, nvlink_rc=rc
    )
    try:
        nt = node_topology(alloc, source="nvidia-smi")
    finally:
        alloc.forget()
    assert nt.source == "nvidia-smi" and nt.topology.link_states == ()
    assert nt.topology.gpus == parse_topo_matrix(smi_capture(A100_TOPO)).gpus
    assert any(said in n for n in nt.notes), nt.notes
    assert "link state" not in nt.detail and "NVLink link state (nvidia-smi nvlink -s):" not in nt.summary()


def test_gpus_without_nvlink_print_nothing_and_the_note_says_so(fake: FakeRunner, poller: JobPoller) -> None:
    alloc = _attached(fake, poller, smi_capture("topo-4x-a10-pcie-sys-2nics.txt"), None, nvlink="")
    try:
        nt = node_topology(alloc, source="nvidia-smi")
    finally:
        alloc.forget()
    assert nt.topology.link_states == ()
    assert (
        "no NVLink link state: nvidia-smi nvlink -s on node1 printed no link (these GPUs have no NVLink)"
        in nt.notes
    )


def test_nvml_saying_every_link_is_inactive_is_a_note(fake: FakeRunner, poller: JobPoller) -> None:
    # NVML's line for a GPU with NVLink but no bridge fitted, under the GPU lines of a real capture
    text = "".join(
        f"{ln}\n\t NVML: Unable to retrieve NVLink information as all links are inActive\n"
        for ln in _gpu_lines(smi_capture("nvlink-status-2x-rtx3090-nv4.txt")).splitlines()
    )
    alloc = _attached(fake, poller, smi_capture("topo-2x-rtx3090-nvlink-bridge-nv4.txt"), None, nvlink=text)
    try:
        nt = node_topology(alloc, source="nvidia-smi")
    finally:
        alloc.forget()
    assert nt.topology.link_states == ()
    assert any(
        "says every link of a GPU is inactive (no NVLink bridge fitted, or its links are down)" in n
        for n in nt.notes
    ), nt.notes


def test_nvlink_s_of_another_node_is_not_applied_and_says_why(fake: FakeRunner, poller: JobPoller) -> None:
    # a 2x RTX 3090 answer (4 links per GPU) cannot belong to GPUs the topology shows with NV12 between them
    alloc = _attached(
        fake, poller, smi_capture(A100_TOPO), None, nvlink=smi_capture("nvlink-status-2x-rtx3090-nv4.txt")
    )
    try:
        nt = node_topology(alloc, source="nvidia-smi")
    finally:
        alloc.forget()
    assert nt.topology.link_states == ()
    (note,) = [n for n in nt.notes if "NVLink link state" in n]
    assert note.startswith("no NVLink link state: nvidia-smi nvlink -s on node1 could not be read:")
    assert "NV12" in note and "take both on the same node" in note
