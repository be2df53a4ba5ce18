"""What the old line caps stood for, measured where it lives (issue 26, point 1).

A function is too big when it branches too much or holds too many statements: Ruff's C901 (complexity 10),
PLR0912 (12 branches) and PLR0915 (50 statements), run by ``make lint``. The functions over those limits when the
rules came in are excepted file by file in pyproject.toml's ``[tool.ruff.lint.per-file-ignores]``; that list only
shrinks. A module is too big when it holds more than one thing: a generous ceiling catches a module that keeps
growing, and one that must stay large is named below with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import slurmlab

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(slurmlab.__file__).resolve().parent
SHAPE_RULES = ("C901", "PLR0912", "PLR0915")
MODULE_CEILING = 800
# module (relative to the package) -> why it may pass the ceiling ("one class: the allocation's lifecycle")
LARGE_MODULES: dict[str, str] = {}
# how many files may be excepted from the shape rules at most: the count when the rules came in was 27 files
# with an offence; lower this number whenever an entry goes
MOST_EXCEPTED_FILES = 25


def _excepted() -> dict[str, list[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    table: dict[str, list[str]] = config["tool"]["ruff"]["lint"].get("per-file-ignores", {})
    return {path: [code for code in codes if code in SHAPE_RULES] for path, codes in table.items()}


def _offences(paths: list[str]) -> set[tuple[str, str]]:
    """(file, rule) for every shape rule each file breaks, the exceptions not applied."""
    answer = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--select",
            ",".join(SHAPE_RULES),
            "--output-format",
            "json",
            "--exit-zero",
            *paths,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return {
        (Path(d["filename"]).resolve().relative_to(REPO).as_posix(), d["code"])
        for d in json.loads(answer.stdout)
    }


def test_every_shape_exception_is_still_needed() -> None:
    excepted = {(path, code) for path, codes in _excepted().items() for code in codes}
    assert excepted, "pyproject.toml's per-file-ignores lost its shape exceptions: did the table move?"
    missing = sorted(path for path, _ in excepted if not (REPO / path).is_file())
    assert not missing, f"excepted files that do not exist: {missing}; take them out of pyproject.toml"
    stale = sorted(excepted - _offences(sorted({path for path, _ in excepted})))
    assert not stale, (
        f"these functions are within the limits now: take (file, rule) {stale} out of "
        "pyproject.toml's [tool.ruff.lint.per-file-ignores] and lower MOST_EXCEPTED_FILES"
    )


def test_the_exception_list_only_shrinks() -> None:
    files = [path for path, codes in _excepted().items() if codes]
    assert len(files) <= MOST_EXCEPTED_FILES, (
        f"{len(files)} files are excepted from the shape rules, at most {MOST_EXCEPTED_FILES} may be: cut the new "
        "function into parts that each do one thing instead of excepting its file"
    )


def test_the_shape_rules_see_a_branchy_function() -> None:
    body = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(14))
    planted = REPO / "build" / "shape_probe.py"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(f"def f(x):\n{body}\n    return -1\n")
    try:
        found = {code for _, code in _offences([str(planted)])}
    finally:
        planted.unlink()
    assert {"C901", "PLR0912"} <= found


def _lines() -> dict[str, int]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith("labextension/"):  # the built front end, not Python of ours
            out[rel] = len(path.read_text().splitlines())
    return out


def test_no_module_passes_the_ceiling_unless_named_with_its_reason() -> None:
    lines = _lines()
    large = {rel: n for rel, n in lines.items() if n > MODULE_CEILING and rel not in LARGE_MODULES}
    assert not large, (
        f"modules over {MODULE_CEILING} lines: {large}; a module that large holds more than one "
        "thing: give each its own module, or name it in LARGE_MODULES with the reason it is one"
    )
    stale = sorted(rel for rel in LARGE_MODULES if lines.get(rel, 0) <= MODULE_CEILING)
    assert not stale, f"no longer over the ceiling, take them out of LARGE_MODULES: {stale}"


@pytest.mark.parametrize("rule", SHAPE_RULES)
def test_lint_runs_the_shape_rules(rule: str) -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert rule in config["tool"]["ruff"]["lint"]["select"]
