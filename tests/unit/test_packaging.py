"""Packaging contracts: environment.yml agrees with pyproject, import slurmlab is light, the wheel carries the
workshop notebooks, ``py.typed``, the license and the one version."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]


def _norm(req: str) -> str:
    name = re.split(r"[<>=!~;\[ ]", req.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-")


def _pyproject_requirements() -> dict[str, str]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    reqs: dict[str, str] = {}
    for r in data["project"]["dependencies"]:
        reqs[_norm(r)] = r
    for extra, items in data["project"]["optional-dependencies"].items():
        if extra in ("gpu", "pyslurm"):
            continue  # site-specific builds (CUDA, the site's Slurm): documented in environment.yml
        for r in items:
            if _norm(r) != "slurmlab":
                reqs[_norm(r)] = r
    return reqs


def _env_yml_requirements() -> dict[str, str]:
    text = (REPO / "environment.yml").read_text()
    reqs: dict[str, str] = {}
    in_deps = False
    for line in text.splitlines():
        if not line.startswith(" ") and line.strip():
            in_deps = line.startswith("dependencies:")
            continue
        m = re.match(r"^\s*-\s+(\S.*?)\s*(#.*)?$", line)
        if not in_deps or not m:
            continue
        item = m.group(1)
        if item.endswith(":") or item.startswith("-e ") or _norm(item) in {"python", "pip"}:
            continue
        reqs[_norm(item)] = item
    return reqs


def test_environment_yml_lists_the_same_dependencies_as_pyproject() -> None:
    py = _pyproject_requirements()
    env = _env_yml_requirements()
    env.pop("python", None)
    env.pop("pip", None)
    assert set(py) == set(env), (
        f"only in pyproject: {set(py) - set(env)}; only in environment.yml: {set(env) - set(py)}"
    )


def test_import_slurmlab_loads_no_heavy_package() -> None:
    code = (
        "import sys, slurmlab, slurmlab.cli;"
        "heavy={'bokeh','ipywidgets','cupy','IPython','jupyter_server','numpy','pynvml','tornado'};"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_all_is_curated_and_importable() -> None:
    import slurmlab

    for name in slurmlab.__all__:
        assert hasattr(slurmlab, name), name
    public = {n for n in dir(slurmlab) if not n.startswith("_")}
    # every public exception of the tree is exported
    from slurmlab import errors

    assert set(errors.__all__) <= set(slurmlab.__all__)
    assert "errors" in public


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from this checkout (once for the module's tests)."""
    folder = tmp_path_factory.mktemp("wheel")
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(REPO), "-w", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if res.returncode != 0 and (
        "No matching distribution" in res.stderr or "Could not find a version" in res.stderr
    ):
        pytest.skip(f"pip could not fetch the build requirements (offline?): {res.stderr.strip()[-300:]}")
    assert res.returncode == 0, res.stderr
    (built,) = folder.glob("slurmlab-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_py_typed_the_license_and_the_one_version(wheel: Path) -> None:
    """Type checkers read slurmlab's annotations (PEP 561), the license travels with the code, and the wheel's
    version is slurmlab.__version__ (hatch reads it from slurmlab/__init__.py)."""
    import slurmlab

    assert wheel.name.startswith(f"slurmlab-{slurmlab.__version__}-"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "slurmlab/py.typed" in names
        dist_info = f"slurmlab-{slurmlab.__version__}.dist-info"
        assert zf.read(f"{dist_info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        metadata = zf.read(f"{dist_info}/METADATA").decode()
    assert f"\nVersion: {slurmlab.__version__}\n" in metadata
    assert "\nLicense-Expression: BSD-3-Clause\n" in metadata
    assert "\nLicense-File: LICENSE\n" in metadata


@pytest.mark.slow
def test_the_wheel_carries_the_notebooks_and_slurmlab_notebooks_copies_them_from_it(
    wheel: Path, tmp_path: Path
) -> None:
    """A `pip install` user has no repository: the workshop notebooks must come from the wheel itself."""
    source = {p.name: p.read_bytes() for p in (REPO / "notebooks").glob("*.ipynb")}
    assert source
    with zipfile.ZipFile(wheel) as zf:
        packed = {
            n.rsplit("/", 1)[1]: zf.read(n)
            for n in zf.namelist()
            if n.startswith("slurmlab/notebooks/") and n.endswith(".ipynb")
        }
        assert packed == source, "pyproject.toml must force-include notebooks/ as slurmlab/notebooks"
        zf.extractall(tmp_path / "site")
    # the unpacked wheel stands in for site-packages: no checkout beside it to fall back on
    target = tmp_path / "mine"
    code = (
        "import sys, slurmlab; from slurmlab.cli import main;"
        f"assert slurmlab.__file__.startswith({str(tmp_path / 'site')!r}), slurmlab.__file__;"
        f"sys.exit(main(['notebooks', {str(target)!r}]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert out.returncode == 0, out.stderr
    assert {p.name: p.read_bytes() for p in target.glob("*.ipynb")} == source
    assert f"copied {len(source)} of {len(source)} workshop notebooks" in out.stdout
