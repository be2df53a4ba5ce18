"""A real JupyterLab for the browser tests, and Debian's chromium to look at it.

One way to start it for every browser test: a free loopback port with ``port_retries=0`` (so it
never silently moves), a known token, a fresh workspace and settings folder (no old tabs, no
"news" toast over the screenshots), the Slurm sandbox's environment.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from notebook_driver import write_notebook

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass(frozen=True)
class Lab:
    url: str  # http://127.0.0.1:PORT
    token: str
    root: Path  # the server's root_dir (notebooks go here)

    def page_url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.url}/{path}{sep}token={self.token}"

    def api(self, method: str, path: str) -> Any:
        """The server's REST answer to ``method`` on ``path`` (e.g. ``api/sessions``), read as JSON; None when
        empty (a DELETE)."""
        req = urllib.request.Request(
            f"{self.url}/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=30) as res:
            body = res.read()
        return json.loads(body) if body else None

    def end_sessions(self, notebook: str) -> int:
        """What closing ``notebook``'s kernel from the Running tab does: end its sessions (how many there were),
        checked gone."""
        ended = 0
        for session in self.api("GET", "api/sessions"):
            if session["path"].endswith(notebook):
                self.api("DELETE", f"api/sessions/{session['id']}")
                ended += 1
        assert not [s for s in self.api("GET", "api/sessions") if s["path"].endswith(notebook)]
        return ended


def require_browser() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed: apt-get install -y chromium chromium-driver")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (never `playwright install`)")


def screenshot(page: Any, name: str) -> None:
    """The whole page into build/screenshots/``name``."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def require_labextension() -> None:
    """Skip a test of slurmlab's own lab pieces where its JupyterLab extension is not built."""
    if not (REPO / "slurmlab" / "labextension" / "package.json").exists():
        pytest.skip("the JupyterLab extension is not built: run `make labextension` (needs node and npm)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_lab(
    base: Path, env: Mapping[str, str], *, ready_path: str = "api/status", timeout: float = 90
) -> Iterator[Lab]:
    """Start ``jupyter lab`` in ``base`` (root, workspaces, settings, config, log) until the block ends."""
    root = base / "root"
    for sub in ("root", "workspaces", "config", "runtime"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    settings = base / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port, token = _free_port(), secrets.token_hex(16)
    full_env = {
        **os.environ,
        **env,
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log_path = base / "lab.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                f"--LabApp.workspaces_dir={base / 'workspaces'}",
                "--ServerApp.allow_root=True",
            ],
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
            start_new_session=True,
        )
        lab = Lab(f"http://127.0.0.1:{port}", token, root)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter lab exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(f"{lab.url}/{ready_path}?token={token}", timeout=5) as res:
                        if res.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer on port {port}:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.5)
            yield lab
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def notebook_lab(base: Path, env: Mapping[str, str], notebooks: Mapping[str, list[str]]) -> Iterator[Lab]:
    """:func:`running_lab` in ``base`` with ``notebooks`` (name: cells) in its root, skipped without chromium."""
    require_browser()
    (base / "root").mkdir(parents=True, exist_ok=True)
    for name, cells in notebooks.items():
        write_notebook(base / "root" / name, cells)
    with running_lab(base, env) as lab:
        yield lab


@contextmanager
def chromium_page(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """Debian's headless chromium with one page, closed when the block ends. Playwright's sync API runs its
    own event loop: open it per test (or per module), never across pytest-jupyter's per-test loops."""
    with chromium_browser() as browser, fresh_page(browser, width, height) as page:
        yield page


@contextmanager
def chromium_browser() -> Iterator[Any]:
    """Debian's headless chromium for a module's tests, each of which opens its own page in a fresh context
    (``fresh_page``: no cookie or storage of the test before). Launching it once per module, not per test, saves
    a second or more per test; the sync API's event loop still ends with the module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def fresh_page(browser: Any, width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A page of ``browser`` (from ``chromium_browser``) in a context of its own, closed when the block ends."""
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        yield context.new_page()
    finally:
        context.close()


def open_sidebar(page: Any, lab_url: str) -> None:
    """The lab page from its default layout (``reset``: not the one the last test left) with the "Slurm GPUs"
    sidebar open."""
    page.goto(f"{lab_url}&reset")
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    tab = page.locator('.jp-SideBar [data-id="slurmlab-sidebar"]')
    tab.wait_for(timeout=30_000)
    if not page.locator("#slurmlab-sidebar").is_visible():
        tab.click()
