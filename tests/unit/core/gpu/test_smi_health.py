"""Readers of the doctor's GPU probe: nvidia-smi's documented CSV (``--format=csv,noheader,nounits``), its header,
the probe's sections; rows that do not parse are reported, hostile input raises ParseError only."""

from __future__ import annotations

import random

import pytest

from slurmlab.core.gpu.smi import (
    MARK,
    parse_compute_apps,
    parse_query_gpu,
    parse_version,
    read_probe,
    split_sections,
)
from slurmlab.errors import ParseError

H100 = "{i}, GPU-{i:08x}-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, 550.54.15, {gen}, 5, {w}, 16, 4, 81559, {u}, Enabled"


def test_query_gpu_rows_with_unavailable_values() -> None:
    text = "\n".join(
        [
            H100.format(i=0, gen=5, w=16, u=0),
            "1, GPU-b, NVIDIA A100-PCIE-40GB, 535.104.05, [N/A], [N/A], [Not Supported], 16, 0, 40960, 0, "
            "Disabled",
        ]
    )
    rows, problems = parse_query_gpu(text)
    assert problems == ()
    assert [r.index for r in rows] == [0, 1] and rows[0].gen == 5 and rows[0].persistence is True
    assert (
        rows[1].gen is None
        and rows[1].width is None
        and rows[1].width_max == 16
        and rows[1].persistence is False
    )
    assert rows[1].driver == "535.104.05" and rows[1].label == "GPU1"


def test_a_row_that_does_not_parse_is_reported_not_dropped() -> None:
    good = H100.format(i=0, gen=5, w=16, u=0)
    text = "\n".join([good, "1, GPU-x, NVIDIA H100, 550.54.15, five, 5, 16, 16, 0, 1, 0, Enabled", "garbage"])
    rows, problems = parse_query_gpu(text)
    assert [r.index for r in rows] == [0]
    assert len(problems) == 2 and "'five'" in problems[0] and "row 3 'garbage'" in problems[1]


def test_compute_apps_keep_commas_in_process_names() -> None:
    apps, problems = parse_compute_apps(
        "GPU-a, 4242, 1024, python -c a,b\nGPU-a, 17, [N/A], /usr/bin/stuck\nGPU-a, x, 1, y"
    )
    assert [(a.pid, a.used_mib, a.process) for a in apps] == [
        (4242, 1024, "python -c a,b"),
        (17, None, "/usr/bin/stuck"),
    ]
    assert len(problems) == 1 and "pid 'x'" in problems[0]


def test_versions() -> None:
    assert parse_version("12.4") == (12, 4) and parse_version("550.54.15") == (550, 54, 15)
    assert parse_version("N/A") is None and parse_version(None) is None and parse_version("1.2.3.4.5") is None


def test_sections_closed_open_and_nested() -> None:
    text = "\n".join(
        [
            "noise before",
            f"{MARK} begin a",
            "x",
            f"{MARK} end a 0",
            f"{MARK} begin b",
            "y",
            f"{MARK} begin c",
            "z",
        ]
    )
    s = split_sections(text)
    assert s["a"].rc == 0 and s["a"].lines == ("x",) and not s["a"].timed_out
    assert s["b"].rc is None and s["b"].timed_out  # cut short by the next section: never closed
    assert s["c"].lines == ("z",) and s["c"].timed_out


def test_read_probe_env_devices_pids_and_runtime() -> None:
    text = "\n".join(
        [
            f"{MARK} begin env",
            "CUDA_VISIBLE_DEVICES=0,1",
            "SLURM_JOB_GPUS=4,5",
            "not a pair",
            f"{MARK} end env 0",
            f"{MARK} begin devices",
            "/dev/nvidia0 open",
            "/dev/nvidia1 denied",
            "/etc/passwd open",
            f"{MARK} end devices 0",
            f"{MARK} begin pids",
            "PID      JOBID    STEPID   LOCALID GLOBALID",
            "30081    1        0        0       0",
            "30262    1        0        -       -",
            f"{MARK} end pids 0",
            f"{MARK} begin cudart",
            "cudart 12.4 cupy 13.3.0",
            f"{MARK} end cudart 0",
        ]
    )
    p = read_probe(text)
    assert p.env == {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_GPUS": "4,5"}
    assert p.devices == {"/dev/nvidia0": True, "/dev/nvidia1": False}
    assert p.step_pids == frozenset({30081, 30262})
    assert (p.runtime, p.runtime_source) == ("12.4", "cupy 13.3.0") and not p.standin


def test_hostile_input_raises_parse_error_only() -> None:
    rng = random.Random(16)
    alphabet = [
        ",",
        " ",
        "\n",
        "[N/A]",
        "GPU-",
        "9" * 30,
        "\x00",
        "é",
        MARK,
        f"{MARK} end",
        " begin ",
        "-1",
        "\r",
    ]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        for reader in (parse_query_gpu, parse_compute_apps, read_probe):
            try:
                reader(text)
            except ParseError:
                pass
    with pytest.raises(ParseError):
        parse_query_gpu("x\n" * 600_000)
    with pytest.raises(ParseError):
        parse_compute_apps("GPU-a, 1, 1, p\n" * 2000)  # more processes than a node lists
