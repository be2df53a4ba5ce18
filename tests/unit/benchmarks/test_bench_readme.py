"""scripts/bench_readme.py rewrites only the marked part of the README, from build/bench.json."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("bench_readme", REPO / "scripts" / "bench_readme.py")
assert _spec is not None and _spec.loader is not None
bench_readme = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_readme)

REPORT = {
    "generated": "2026-12-01T08:00:00+0000",
    "quick": False,
    "seconds": 321.0,
    "machine": {"cpus": 2, "python": "3.11.7"},
    "rows": [
        {
            "group": "parse squeue --json",
            "name": "24.11 layout, x json.loads",
            "value": 1.3,
            "unit": "x",
            "target": 2.0,
            "baseline": 3.1,
            "baseline_name": "json.loads (s)",
            "size": "1000 nodes x 10000 jobs",
            "ok": True,
        },
        {
            "group": "parse squeue --json",
            "name": "24.11 parse time",
            "value": 0.5,
            "unit": "s",
            "target": None,
            "baseline": None,
            "size": "1000 nodes x 1000 jobs",
            "ok": None,
        },
        {
            "group": "server",
            "name": "module failed",
            "value": None,
            "unit": "",
            "target": None,
            "baseline": None,
            "size": "",
            "ok": False,
            "error": "exit 1: boom | pipe",
        },
    ],
    "growth": [
        {
            "group": "parse squeue --json",
            "name": "24.11 parse time",
            "unit": "s",
            "exponent": 1.02,
            "ok": True,
            "points": [
                {"size": "1000 nodes x 1000 jobs", "nodes_plus_jobs": 2000, "value": 0.5, "per_1000": 0.25}
            ],
        }
    ],
    "missed": ["server: module failed"],
}


def test_only_the_marked_part_changes(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(REPORT))
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nintro\n\n## Layout\n\nrooms\n")
    assert bench_readme.main(["--bench", str(bench), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# x\n\nintro\n\n## Performance\n") and text.endswith("## Layout\n\nrooms\n")
    assert "| parse squeue --json: 24.11 layout, x json.loads | 1000 nodes x 10000 jobs | 1.3 x |" in text
    assert (
        "fitted exponent 1.02" in text
        and "boom \\| pipe" in text
        and "Missed: server: module failed." in text
    )
    assert bench_readme.main(["--bench", str(bench), "--readme", str(readme), "--check"]) == 0
    readme.write_text(text.replace("intro", "intro, edited by hand"))
    REPORT["seconds"] = 99.0
    bench.write_text(json.dumps(REPORT))
    assert bench_readme.main(["--bench", str(bench), "--readme", str(readme), "--check"]) == 1
    assert bench_readme.main(["--bench", str(bench), "--readme", str(readme)]) == 0
    again = readme.read_text()
    assert "intro, edited by hand" in again and "99 s in all" in again and again.count("## Performance") == 1


def test_no_bench_json_says_what_to_run(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert (
        bench_readme.main(["--bench", str(tmp_path / "none.json"), "--readme", str(tmp_path / "R.md")]) == 2
    )
    assert "make bench" in capsys.readouterr().err
