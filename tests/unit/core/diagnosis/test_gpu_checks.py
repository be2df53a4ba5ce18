"""The GPU-node checks' verdicts on realistic probe outputs (nvidia-smi's documented CSV, built here): a healthy
8×H100, a foreign process, a card at x8, a hung nvidia-smi, an old driver under a CUDA 12.4 runtime."""

from __future__ import annotations

from collections.abc import Sequence

from slurmlab.core.diagnosis.findings import Finding, Verdict
from slurmlab.core.diagnosis.gpu_checks import GPU_CHECKS, judge_gpu_probe
from slurmlab.core.gpu.smi import MARK, read_probe
from slurmlab.core.gpu.standin_names import STANDIN_MARK

SUBJECT = "job 77 on gpu-a01"
STEP_PIDS = (51001, 51002, 51003, 51004, 51005, 51006, 51007, 51008)


def _uuid(i: int) -> str:
    return f"GPU-{i:08x}-5e1c-9a0f-2b7d-0c4e6f81a9b{i}"


def gpu_row(
    i: int,
    *,
    gen: str = "5",
    width: str = "16",
    util: int = 0,
    driver: str = "550.54.15",
    used: int = 70736,
    persistence: str = "Enabled",
) -> str:
    return (
        f"{i}, {_uuid(i)}, NVIDIA H100 80GB HBM3, {driver}, {gen}, 5, {width}, 16, {used}, 81559, {util}, "
        f"{persistence}"
    )


def header(driver: str, cuda: str) -> list[str]:
    return [
        "Mon Dec  1 09:12:44 2026",
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |",
        "|-----------------------------------------+------------------------+----------------------+",
    ]


def section(name: str, lines: Sequence[str], rc: int | None = 0) -> list[str]:
    return [f"{MARK} begin {name}", *lines, *([] if rc is None else [f"{MARK} end {name} {rc}"])]


def probe_text(
    *,
    rows: Sequence[str] | None = None,
    apps: Sequence[str] | None = None,
    query_rc: int | None = 0,
    driver: str = "550.54.15",
    cuda: str = "12.4",
    runtime: str = "cudart 12.4 cupy 13.3.0",
    cvd: str = "0,1,2,3,4,5,6,7",
    job_gpus: str = "0,1,2,3,4,5,6,7",
    pids: Sequence[int] = STEP_PIDS,
    devices: int = 8,
    denied_from: int = 8,
) -> str:
    rows = [gpu_row(i) for i in range(8)] if rows is None else rows
    apps = [f"{_uuid(i)}, {pid}, 70212, python" for i, pid in enumerate(pids[:8])] if apps is None else apps
    out = section("query-gpu", rows, query_rc)
    if query_rc == 0:
        out += section("compute-apps", apps) + section("header", header(driver, cuda))
    out += section("env", [f"CUDA_VISIBLE_DEVICES={cvd}", f"SLURM_JOB_GPUS={job_gpus}", "SLURM_JOB_ID=77"])
    out += section(
        "devices", [f"/dev/nvidia{i} {'open' if i < denied_from else 'denied'}" for i in range(devices)]
    )
    out += section(
        "pids",
        [
            "PID      JOBID    STEPID   LOCALID GLOBALID",
            *(f"{p}    77       0        {k}       {k}" for k, p in enumerate(pids)),
        ],
    )
    out += section("cudart", [runtime])
    return "\n".join(out)


def judge(text: str, idx: Sequence[int] = tuple(range(8))) -> dict[str, Finding]:
    found = judge_gpu_probe(read_probe(text), SUBJECT, idx)
    assert [f.check for f in found] == list(GPU_CHECKS)
    assert all(f.subject == SUBJECT for f in found)
    return {f.check: f for f in found}


def test_a_healthy_8x_h100_job_is_ok_everywhere() -> None:
    found = judge(probe_text())
    assert {c: f.verdict for c, f in found.items()} == dict.fromkeys(GPU_CHECKS, Verdict.OK)
    assert "8 × NVIDIA H100 80GB HBM3, driver 550.54.15" in found["gpu.smi"].evidence
    assert (
        "supports CUDA 12.4" in found["gpu.driver"].evidence
        and "runtime is CUDA 12.4" in found["gpu.driver"].evidence
    )
    assert "(8 process(es) of the job)" in found["gpu.memory"].evidence
    assert "Gen5 x16" in found["gpu.pcie"].evidence
    assert found["gpu.smi"].details == ()


def test_memory_no_listed_process_holds_and_persistence_off_are_said() -> None:
    rows = [gpu_row(i) for i in range(8)]
    rows[6] = gpu_row(6, used=70212 + 40960, persistence="Disabled")  # 40 GiB more than its process holds
    found = judge(probe_text(rows=rows))
    memory = found["gpu.memory"]
    assert memory.verdict is Verdict.WARN and "no process nvidia-smi lists" in memory.evidence
    assert len(memory.details) == 1 and memory.details[0].startswith(
        "GPU6: 111172 MiB in use, 70212 MiB of it"
    )
    smi = found["gpu.smi"]
    assert smi.verdict is Verdict.OK and "persistence mode is off on GPU6" in smi.details[0]


def test_a_foreign_process_is_named_with_its_pid_name_and_memory() -> None:
    apps = [f"{_uuid(i)}, {p}, 70212, python" for i, p in enumerate(STEP_PIDS)]
    apps.append(f"{_uuid(3)}, 98765, 30720, /home/other/venv/bin/python3 train.py")
    f = judge(probe_text(apps=apps))["gpu.memory"]
    assert f.verdict is Verdict.WARN and "30720 MiB" in f.evidence
    assert f.details == (f"pid 98765 /home/other/venv/bin/python3 train.py: 30720 MiB on GPU3 ({_uuid(3)})",)
    assert "scancel" in f.fix
    # a process on a GPU the job was not given is not the job's business
    other = probe_text(apps=[*apps[:8], f"{_uuid(3)}, 98765, 30720, x"], cvd="0,1,2", job_gpus="0,1,2")
    assert judge(other, (0, 1, 2))["gpu.memory"].verdict is Verdict.OK


def test_a_card_at_x8_warns_and_an_idle_low_generation_does_not() -> None:
    rows = [gpu_row(i) for i in range(8)]
    rows[2] = gpu_row(2, width="8")
    rows[5] = gpu_row(5, gen="1")  # idle: trained down
    f = judge(probe_text(rows=rows))["gpu.pcie"]
    assert f.verdict is Verdict.WARN and "reseat" in f.fix
    assert any("GPU2 runs Gen5 x8 of Gen5 x16" in d for d in f.details)
    assert any("GPU5 at Gen1 x16 of Gen5 x16 while idle" in d and "normal" in d for d in f.details)
    rows[2] = gpu_row(2)
    idle = judge(probe_text(rows=rows))["gpu.pcie"]
    assert idle.verdict is Verdict.OK and "normal" in idle.evidence
    rows[5] = gpu_row(5, gen="3", util=87)
    busy = judge(probe_text(rows=rows))["gpu.pcie"]
    assert (
        busy.verdict is Verdict.WARN
        and "GPU5 runs Gen3 x16 of Gen5 x16 while busy (87% utilization)" in busy.details
    )
    unknown = judge(probe_text(rows=[gpu_row(i, gen="[N/A]", width="[N/A]") for i in range(8)]))["gpu.pcie"]
    assert unknown.verdict is Verdict.SKIP


def test_a_hung_nvidia_smi_fails_with_the_persistence_fix() -> None:
    for rc in (124, None):  # timeout(1) ended it, or the whole step's timeout cut it short
        found = judge(probe_text(query_rc=rc))
        smi = found["gpu.smi"]
        assert smi.verdict is Verdict.FAIL and "did not answer within its timeout" in smi.evidence
        assert "nvidia-persistenced" in smi.fix and "nvidia-smi -pm 1" in smi.fix
        assert {f.verdict for c, f in found.items() if c != "gpu.smi"} == {Verdict.SKIP}
    broken = judge(
        probe_text(
            query_rc=9, rows=["NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."]
        )
    )["gpu.smi"]
    assert (
        broken.verdict is Verdict.FAIL
        and "couldn't communicate" in broken.evidence
        and "exit 9" in broken.evidence
    )


def test_an_old_driver_under_a_cuda_12_4_runtime_fails_and_minor_compat_warns() -> None:
    rows = [gpu_row(i, driver="470.82.01") for i in range(8)]
    old = judge(probe_text(rows=rows, driver="470.82.01", cuda="11.4"))["gpu.driver"]
    assert old.verdict is Verdict.FAIL
    assert "driver 470.82.01 supports CUDA 11.4" in old.evidence and "CUDA 12.4" in old.evidence
    assert "≥ 525.60.13" in old.evidence and "≥ 550.54.14" in old.fix and "cupy-cuda11x" in old.fix
    rows = [gpu_row(i, driver="535.104.05") for i in range(8)]
    compat = judge(probe_text(rows=rows, driver="535.104.05", cuda="12.2"))["gpu.driver"]
    assert compat.verdict is Verdict.WARN and "minor-version" in compat.evidence and "PTX" in compat.evidence
    newer = judge(probe_text(runtime="cudart 11.8 nvidia-cuda-runtime-cu11 11.8.89"))["gpu.driver"]
    assert newer.verdict is Verdict.OK
    unknown = judge(probe_text(runtime="cudart not found: no cupy for /usr/bin/python3"))["gpu.driver"]
    assert unknown.verdict is Verdict.SKIP and "no cupy" in unknown.evidence


def test_devices_seen_against_what_slurm_assigned() -> None:
    two = [gpu_row(i) for i in range(2)]
    ok = judge(probe_text(rows=two, cvd="0,1", job_gpus="4,5", devices=8, denied_from=2), (4, 5))[
        "gpu.devices"
    ]
    assert ok.verdict is Verdict.OK and "Slurm assigned GPU 4,5 (2)" in ok.evidence
    open_all = judge(probe_text(cvd="4,5", job_gpus="4,5"), (4, 5))["gpu.devices"]
    assert open_all.verdict is Verdict.WARN and "ConstrainDevices=yes" in open_all.fix
    missing = judge(probe_text(rows=two[:1], cvd="0,1", job_gpus="4,5", denied_from=1), (4, 5))["gpu.devices"]
    assert missing.verdict is Verdict.FAIL and "gres.conf" in missing.fix
    mig = judge(probe_text(rows=two[:1], cvd="MIG-0d3c4a1e-8f5b-5c2d-9e7a-1b2c3d4e5f60", job_gpus="4"), (4,))
    assert mig["gpu.devices"].verdict is Verdict.SKIP and "MIG slices" in mig["gpu.devices"].evidence


def test_the_sandbox_stand_in_skips_every_check_and_says_why() -> None:
    text = "\n".join(
        [
            *section(
                "query-gpu",
                [
                    "Invalid combination of input arguments.",
                    f"{STANDIN_MARK}: it answers -L, not '--query-gpu=index'",
                ],
                2,
            ),
            *section("env", ["SLURMLAB_SANDBOX=/tmp/sb"]),
        ]
    )
    found = judge(text)
    assert {f.verdict for f in found.values()} == {Verdict.SKIP}
    assert all("the sandbox has no GPU" in f.evidence and STANDIN_MARK in f.evidence for f in found.values())
    # a process whose name holds the stand-in's words on a real node does not make it a sandbox
    named = probe_text(
        rows=[gpu_row(0)] + [gpu_row(i, used=600) for i in range(1, 8)],
        apps=[f"{_uuid(0)}, {STEP_PIDS[0]}, 70212, python {STANDIN_MARK}"],
    )
    assert judge(named)["gpu.smi"].verdict is Verdict.OK
    assert "(1 process(es) of the job)" in judge(named)["gpu.memory"].evidence
    bare = judge("\n".join([*section("no-smi", []), *section("env", ["SLURMLAB_SANDBOX=/tmp/sb"])]))
    assert all("it has no nvidia-smi" in f.evidence for f in bare.values())
