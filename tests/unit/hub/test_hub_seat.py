"""What each user's job runs before its server (slurmlab.hub.seat) and the server options the hub adds: the port
handshake batchspawner's hub expects, the module a server does without, the settings that reach the server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from slurmlab.hub import seat
from slurmlab.hub.settings import SEAT_ARGS, SEAT_MODULE

REPO = Path(__file__).resolve().parents[3]


class _FakeHub(BaseHTTPRequestHandler):
    """The one route of the hub's API the launcher calls; records what it got."""

    got: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.got.append({"path": self.path, "auth": self.headers["Authorization"], "body": json.loads(body)})
        self.send_response(201)
        self.end_headers()
        self.wfile.write(b'{"message": "BatchSpawner data configured"}')

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hub_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    got: list[dict[str, Any]] = []
    handler = type("Recording", (_FakeHub,), {"got": got})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hub/api", got
    finally:
        server.shutdown()
        server.server_close()


def test_each_seat_option_names_a_real_setting_of_the_installed_packages() -> None:
    # traitlets only warns about a misspelt class or setting, and the server then does what it did before
    manager = pytest.importorskip("jupyter_lsp.manager")
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager

    classes = {
        "LanguageServerManager": manager.LanguageServerManager,
        "MappingKernelManager": MappingKernelManager,
    }
    for option in SEAT_ARGS:
        owner, trait = option.removeprefix("--").split("=", 1)[0].split(".")
        assert trait in classes[owner].class_traits(config=True), option


def test_the_launcher_tells_the_hub_the_port_with_the_servers_token(
    hub_api: tuple[str, list[dict[str, Any]]],
) -> None:
    url, got = hub_api
    seat.register_port(43210, {"JUPYTERHUB_API_URL": url, "JUPYTERHUB_API_TOKEN": "tok"})
    assert got == [{"path": "/hub/api/batchspawner", "auth": "token tok", "body": {"port": 43210}}]


def test_a_hub_the_launcher_cannot_reach_is_said_with_its_address() -> None:
    port = seat.free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}/hub/api"
    with pytest.raises(SystemExit) as raised:
        seat.register_port(1234, {"JUPYTERHUB_API_URL": url, "JUPYTERHUB_API_TOKEN": "tok"})
    assert url in str(raised.value) and "port 1234" in str(raised.value)
    with pytest.raises(SystemExit, match="JUPYTERHUB_API_URL or JUPYTERHUB_API_TOKEN is not set"):
        seat.register_port(1234, {})


def _run_launcher(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", SEAT_MODULE, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_launcher_runs_the_server_script_on_the_port_it_registered(
    tmp_path: Path, hub_api: tuple[str, list[dict[str, Any]]]
) -> None:
    url, got = hub_api
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "fake-singleuser"
    # what the server would see: its arguments, its service URL, whether the skipped module can be imported
    script.write_text(
        "import json, os, sys\n"
        "try:\n    import rfc3987_syntax  # noqa: F401\n    importable = True\n"
        "except ImportError:\n    importable = False\n"
        f"open({str(tmp_path / 'seen.json')!r}, 'w').write(json.dumps({{'argv': sys.argv, "
        "'url': os.environ['JUPYTERHUB_SERVICE_URL'], 'name': __name__, 'rfc3987_syntax': importable}))\n"
    )
    script.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "JUPYTERHUB_API_URL": url,
        "JUPYTERHUB_API_TOKEN": "tok",
        "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:0/user/alice/",
    }
    res = _run_launcher(tmp_path, env, "fake-singleuser", "--ServerApp.x=1")
    assert res.returncode == 0, res.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    port = got[0]["body"]["port"]
    assert seen["url"] == f"http://127.0.0.1:{port}/user/alice/"
    assert seen["argv"] == [str(script), "--ServerApp.x=1"]
    assert seen["name"] == "__main__"
    assert seen["rfc3987_syntax"] is False


def test_a_server_script_not_on_the_path_is_said_before_the_hub_is_told(
    tmp_path: Path, hub_api: tuple[str, list[dict[str, Any]]]
) -> None:
    url, got = hub_api
    env = {
        "PATH": "/nonexistent",
        "PYTHONPATH": str(REPO),
        "JUPYTERHUB_API_URL": url,
        "JUPYTERHUB_API_TOKEN": "t",
    }
    res = _run_launcher(tmp_path, env, "no-such-singleuser")
    assert res.returncode != 0
    assert "'no-such-singleuser' is not found on this job's PATH" in res.stderr
    assert got == []


def _fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a Python of its own (what it imports is its own), with this checkout's slurmlab."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_jsonschema_loads_without_the_skipped_module_and_checks_no_iri_then() -> None:
    pytest.importorskip("jsonschema")
    code = (
        "import sys\n"
        "from slurmlab.hub.seat import skip_unused_modules\n"
        "skip_unused_modules()\n"
        "import jsonschema\n"
        "print(sys.modules.get('rfc3987_syntax') is None, 'iri' in jsonschema.draft7_format_checker.checkers)\n"
    )
    res = _fresh_python(code)
    assert res.stdout.split() == ["True", "False"]


# the packages a single-user server validates JSON for (events, settings, the hub's), and where JupyterLab's
# extensions keep their settings schemas
_SCHEMA_PACKAGES = (
    "jupyter_server",
    "jupyter_events",
    "jupyterlab_server",
    "jupyterlab",
    "jupyterhub",
    "jupyter_lsp",
)
_IRI_FORMAT = re.compile(r"""["']?format["']?\s*:\s*["']?iri(-reference)?\b""")


def test_no_schema_the_server_validates_uses_the_formats_the_skipped_module_checks() -> None:
    import importlib.util

    folders = []
    for name in _SCHEMA_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders += [Path(p) for p in spec.submodule_search_locations]
    folders.append(Path(sys.prefix) / "share" / "jupyter" / "lab")
    using = [
        str(path)
        for folder in folders
        if folder.is_dir()
        for path in folder.rglob("*")
        if path.suffix in (".json", ".yaml", ".yml")
        and path.is_file()
        and _IRI_FORMAT.search(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert folders, "no Jupyter package here to check"
    # one that does would go unchecked in a seat's server: drop rfc3987_syntax from seat.SKIPPED_MODULES then
    assert using == []


def test_the_hub_writes_slurmlabs_bytecode_the_users_cannot(tmp_path: Path) -> None:
    from slurmlab.hub.control import compile_for_users

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    sources = [package / "__init__.py", package / "sub" / "mod.py"]
    for source in sources:
        source.write_text("VALUE = 1\n")
    assert compile_for_users(package) is True
    import importlib.util

    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.is_file() and cached.stat().st_mtime >= source.stat().st_mtime
    (package / "broken.py").write_text("def (\n")
    assert compile_for_users(package) is False


def test_the_launcher_loads_none_of_the_hubs_control() -> None:
    # a job imports slurmlab.hub for the launcher: the package's Hub is loaded on first use only
    code = "import sys, slurmlab.hub.seat; print('slurmlab.hub.control' in sys.modules)"
    res = _fresh_python(code)
    assert res.stdout.strip() == "False"
    from slurmlab.hub import Hub
    from slurmlab.hub.control import Hub as ControlHub

    assert Hub is ControlHub
