"""`slurmlab parse` on corrupted files: one line on stderr naming the file, exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_corrupt import variants
from shared_paths import REPO, list_shared

from slurmlab.cli import main

SEED = 424242


def _sources() -> list[Path]:
    shared = (
        list_shared("slurm", "22.05") + list_shared("slurm", "24.11") + list_shared("slurm", "24.11", "dp")
    )
    own = sorted(p for p in (REPO / "tests" / "data").rglob("*") if p.is_file())
    return [p for p in shared + own if p.suffix not in (".stderr",)]


def _corrupted_files(tmp: Path, total: int) -> list[Path]:
    sources = _sources()
    per = max(1, total // max(len(sources), 1))
    out: list[Path] = []
    for i, src in enumerate(sources):
        text = src.read_text(encoding="utf-8", errors="replace")
        for j, variant in enumerate(variants(text, per, SEED + i)):
            path = tmp / f"{src.stem}.{j}{src.suffix}"
            path.write_bytes(variant.encode("utf-8", "surrogateescape"))
            out.append(path)
    return out


def test_corrupted_files_give_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _corrupted_files(tmp_path, 400)
    assert len(files) >= 100, "too few recordings under tests/data to corrupt"
    refused = 0
    for path in files:
        code = main(["parse", str(path)])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        if code == 0:
            assert out.lstrip().startswith("{") and not err  # still parsed: a harmless corruption
            continue
        refused += 1
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"slurmlab: error: {path}: "), err
        assert " -> " in lines[0]  # the next step
    assert refused >= len(files) // 4  # most corruptions are refused, so the checks above did run


def test_through_a_real_process(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    huge = tmp_path / "huge.json"
    huge.write_text('{"jobs": [{"job_id": ' + "9" * 5000 + "}]}")
    hostile = tmp_path / "hostile.txt"
    hostile.write_text("JobId=1 JobName=x\n   UserId=a(1)\n   UserId=root(0)\n   JobState=RUNNING\n")
    for path in (deep, huge, hostile):
        proc = subprocess.run(
            [sys.executable, "-m", "slurmlab", "parse", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") == 1 and str(path) in proc.stderr
