"""The project's own files: one version source, the license, pre-commit running what make runs, and a
documentation site that fails its build on a reference leading nowhere."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import slurmlab

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
# hatchling's default pattern for a version in a Python file ([tool.hatch.version] path = …)
HATCH_VERSION = re.compile(r"(?i)^(__version__|VERSION) *= *([\'\"])v?(?P<version>.+?)\2", re.MULTILINE)


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _recipe(target: str) -> list[str]:
    """The command lines of a Makefile target's recipe (continuation lines joined)."""
    lines = (REPO / "Makefile").read_text().replace("\\\n", " ").splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{re.escape(target)}:", line))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().lstrip("@"))
    return recipe


def test_the_version_has_one_source_and_the_lab_extension_repeats_it() -> None:
    project = _pyproject()
    assert "version" not in project["project"], "pyproject.toml must not write the version: it is dynamic"
    assert "version" in project["project"]["dynamic"]
    source = project["tool"]["hatch"]["version"]["path"]
    assert source == "slurmlab/__init__.py"
    found = HATCH_VERSION.findall((REPO / source).read_text())
    assert len(found) == 1, f"{source} must set __version__ once, as a literal hatchling can read: {found}"
    package_json = json.loads((REPO / "extensions/slurmlab-lab/package.json").read_text())
    assert package_json["version"] == slurmlab.__version__, (
        "extensions/slurmlab-lab/package.json and slurmlab.__version__ differ: raise both together"
    )


def test_the_license_is_the_bsd_3_clause_everything_declares() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n")
    assert "the slurmlab contributors" in text
    assert "Neither the name of the copyright holder nor the names of its" in text  # clause 3
    assert _pyproject()["project"]["license"] == "BSD-3-Clause"
    assert (
        json.loads((REPO / "extensions/slurmlab-lab/package.json").read_text())["license"] == "BSD-3-Clause"
    )


def test_the_package_says_it_is_typed() -> None:
    assert (REPO / "slurmlab" / "py.typed").is_file()
    assert "Typing :: Typed" in _pyproject()["project"]["classifiers"]


def _split_command(line: str) -> tuple[list[str], set[str]]:
    """(the program and its options, the folders it is given) of a Makefile command line."""
    words = shlex.split(line.replace("$(VENV)", ".venv"))
    folders = {w for w in words if (REPO / w).is_dir() and not w.startswith(".venv")}
    return [w for w in words if w not in folders], folders


def test_pre_commit_runs_what_make_lint_and_make_typecheck_run() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] if repo["repo"] == "local" for hook in repo["hooks"]]
    commands = [
        line for target in ("lint", "typecheck") for line in _recipe(target) if line.startswith("$(VENV)/")
    ]
    assert any("ruff" in c for c in commands) and any("mypy" in c for c in commands), commands
    for line in commands:
        program, folders = _split_command(line)
        # ruff applies pyproject's excludes to the files pre-commit names one by one only with --force-exclude,
        # as it does to the folders make names: the option makes the two runs the same, not different
        matching = [
            h for h in hooks if [w for w in shlex.split(h["entry"]) if w != "--force-exclude"] == program
        ]
        assert matching, f"no pre-commit hook runs {' '.join(program)!r} (make: {line!r})"
        (hook,) = matching
        assert hook["language"] in ("system", "unsupported"), "the hooks use the project's .venv, offline"
        if folders:  # ruff: the folders make names, as the hook's file filter
            listed = set(re.fullmatch(r"\^\((.*)\)/", hook["files"]).group(1).split("|"))
            assert listed == folders, f"make checks {sorted(folders)}, the hook {sorted(listed)}"
        else:  # mypy: what pyproject's [tool.mypy] files names, the whole package, as make does
            assert hook.get("pass_filenames") is False
    if shutil.which("pre-commit", path=str(Path(sys.executable).parent)):
        res = subprocess.run(
            [
                str(Path(sys.executable).parent / "pre-commit"),
                "validate-config",
                str(REPO / ".pre-commit-config.yaml"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stdout + res.stderr


# ---- the documentation site ----------------------------------------------------------------------------------

# one reference of each kind a page can break, each leading nowhere: target -> how a Markdown page writes it
PLANTED = {
    "no-such-page.md": "[a page](no-such-page.md)",
    "no-such-label": "{ref}`no-such-label`",
    "slurmlab.no_such_function": "{py:func}`slurmlab.no_such_function`",
    "guide/no-such-guide": "{doc}`guide/no-such-guide`",
    "no-such-heading": "[a heading](guide/sandbox.md#no-such-heading)",
    "magic-no_such_magic": "{ref}`magic-no_such_magic`",
}
# and in a reStructuredText page (the reference pages are written in it)
PLANTED_RST = {
    "slurmlab.NoSuchClass": ":py:class:`slurmlab.NoSuchClass`",
    "cli-slurmlab-no-such-command": ":ref:`cli-slurmlab-no-such-command`",
}


def _build_docs(tmp_path: Path, planted: dict[str, str]) -> tuple[int, list[str]]:
    """``make docs``'s own Sphinx command on a copy of docs/ with the ``planted`` pages (name -> text) added:
    the exit code and the warning lines."""
    root = tmp_path / "repo"
    shutil.copytree(DOCS, root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("CONTRIBUTING.md", "CHANGELOG.md", "LICENSE"):  # the pages include these from the top
        shutil.copy(REPO / name, root / name)
    for name, text in planted.items():
        (root / "docs" / name).write_text(text)
    (line,) = [c for c in _recipe("docs") if "sphinx" in c]
    words = {"$(PY)": sys.executable, "docs": str(root / "docs"), "$(DOCS_OUT)": str(tmp_path / "out")}
    argv = [words.get(w, w) for w in shlex.split(line)]
    assert "-W" in argv, f"make docs must fail on warnings: {line!r}"
    res = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=root)
    output = (res.stdout + res.stderr).splitlines()
    return res.returncode, [w for w in output if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", w)]


def test_the_docs_build_fails_on_every_kind_of_broken_reference_and_only_on_them(tmp_path: Path) -> None:
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    markdown = "---\norphan: true\n---\n\n# Planted\n\n" + "\n\n".join(PLANTED.values()) + "\n"
    rst = ":orphan:\n\nPlanted\n=======\n\n" + "\n\n".join(PLANTED_RST.values()) + "\n"
    returncode, warnings = _build_docs(tmp_path, {"planted.md": markdown, "planted_rst.rst": rst})
    assert returncode != 0, "a page with broken references built without an error"
    for target in [*PLANTED, *PLANTED_RST]:
        assert any(target in w for w in warnings), (
            f"the broken reference to {target!r} passed unnoticed: {warnings}"
        )
    # everything else builds clean on this Python and these Sphinx/MyST versions (the matrix runs this on 3.13
    # and 3.14): a warning that is not the planted page's would fail make docs too
    others = [w for w in warnings if "planted" not in w]
    assert not others, "\n".join(others)


def test_the_docs_point_at_nothing_outside_the_repository() -> None:
    """Relative paths in the pages stay inside the checkout, and no design document elsewhere is cited."""
    pages = [*DOCS.rglob("*.md"), *DOCS.rglob("*.rst"), REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md"]
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\.\./[^\s)`'\"]+", text):
            # whether it exists is the build's business (a page, an include); here: it must not leave the checkout
            assert (page.parent / target).resolve().is_relative_to(REPO), (
                f"{page.relative_to(REPO)}: {target}"
            )
        assert not re.search(r"\bDESIGN\b", text), f"{page.relative_to(REPO)} cites a design document"
