"""The sidebar's job colours (extensions/slurmlab-lab/src/palette.ts), run in node from the compiled
extension: no two jobs on screen alike for at least 12 jobs, whatever their ids, and a job keeps its colour."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

EXT = Path(__file__).resolve().parents[3] / "extensions" / "slurmlab-lab"
SOURCE, COMPILED = EXT / "src" / "palette.ts", EXT / "lib" / "palette.js"

SCRIPT = """
import { JobPalette, PALETTE, nodeIsDown, textOn } from './palette.mjs';
const out = {};
const colours = ids => { const p = new JobPalette(); return ids.map(id => p.colour(String(id))); };
out.size = PALETTE.length;
out.consecutive = colours(Array.from({length: 12}, (_, i) => 100 + i));
// ids that all fall on one slot of the palette
out.sameSlot = colours(Array.from({length: 12}, (_, i) => 7 + i * PALETTE.length));
out.many = colours(Array.from({length: 40}, (_, i) => 1000 + 3 * i));
out.arrays = colours(['12_1', '12_2', '13', 'abc']);
const p = new JobPalette();
const first = ['5', '6', '7'].map(id => p.colour(id));
p.colour('24');
out.stable = [first, ['5', '6', '7'].map(id => p.colour(id))];
p.keep(['6']);
out.kept = p.colour('6') === first[1];
out.freed = p.colour('43');  // slot of 5 and 24 (mod 19): free again once 5 is gone
out.first = first;
out.down = ['DOWN*', 'IDLE+DRAIN', 'MIXED', 'IDLE', 'ALLOCATED', 'DOWN+NOT_RESPONDING'].map(nodeIsDown);
out.text = [textOn('#f3c300'), textOn('#0067a5')];
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def palette(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the extension's build needs it too)")
    if not COMPILED.exists() or COMPILED.stat().st_mtime < SOURCE.stat().st_mtime:
        pytest.skip(
            "the extension is not built from the current sources: "
            "bash extensions/slurmlab-lab/build.sh .venv/bin/python"
        )
    folder = tmp_path_factory.mktemp("palette")
    shutil.copy(COMPILED, folder / "palette.mjs")
    (folder / "run.mjs").write_text(SCRIPT)
    res = subprocess.run([node, str(folder / "run.mjs")], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    result: dict[str, Any] = json.loads(res.stdout)
    return result


def test_twelve_jobs_never_share_a_colour(palette: dict[str, Any]) -> None:
    assert palette["size"] >= 12
    for case in ("consecutive", "sameSlot"):
        assert len(set(palette[case])) == 12, (case, palette[case])
    assert len(set(palette["arrays"])) == 4


def test_past_the_palette_colours_still_differ(palette: dict[str, Any]) -> None:
    assert len(set(palette["many"])) == 40


def test_a_job_keeps_its_colour(palette: dict[str, Any]) -> None:
    before, after = palette["stable"]
    assert before == after
    assert palette["kept"] is True
    assert palette["freed"] == palette["first"][0]


def test_down_nodes_and_readable_text(palette: dict[str, Any]) -> None:
    assert palette["down"] == [True, True, False, False, False, True]
    assert palette["text"] == ["#000", "#fff"]
