"""The "Slurm GPUs" sidebar on a cluster over SSH, in a real JupyterLab driven in Debian's headless chromium.

The lab's settings name the loopback sshd's cluster (``c.SlurmlabServer.ssh_clusters``): the sandbox, reached
as the session's second Unix user (``slurmlabssh<pid>``) by key (:mod:`slurmlab.testing.loopback_sshd`), host key checked against
the test's own known_hosts. The lab runs as this machine's user, so a job of that user, submitted over
SSH here, is in "my jobs" only when the server takes "mine" from the login on the cluster. Then the link is cut
(the login node's sshd stopped and the server's master connection killed) and the picker says since when it
is down. Screenshots go to ``build/screenshots/``.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import chromium_page, open_sidebar, require_browser, running_lab

from slurmlab.server.remote import cluster_id
from slurmlab.slurm.ssh import SshLink, SshTarget

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
SIDEBAR_REFRESH_S = 5  # the sidebar's default refresh interval (schema/plugin.json)
# a bound that catches a hang, not a speed target: the server's first login, `id -u` over it and a sidebar round
# took more than 20 s on a loaded 2-core machine (the fresh-clone CI run's sandbox tier)
WAIT_S = SIDEBAR_REFRESH_S + 60


def _ssh_config(server: Any, path: Path) -> Path:
    """What a user's ~/.ssh/config would say for this login node: its known_hosts and key, nothing of root's."""
    path.write_text(
        "\n".join(
            [
                "Host 127.0.0.1",
                f"  UserKnownHostsFile {server.known_hosts}",
                "  GlobalKnownHostsFile /dev/null",
                "  IdentitiesOnly yes",
                "  IdentityAgent none",
                f"  IdentityFile {server.key}",
                "",
            ]
        )
    )
    return path


@pytest.fixture(scope="module")
def remote(slurm_sandbox: Any, loopback_sshd: Any) -> Iterator[Any]:
    """The sandbox seen as the ssh user over its own link (to submit that user's jobs)."""
    from slurmlab.testing.loopback_sshd import over_ssh

    with over_ssh(slurm_sandbox, loopback_sshd) as seen:
        yield seen


@pytest.fixture(scope="module")
def lab(
    slurm_sandbox: Any, remote: Any, loopback_sshd: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, Path]]:
    """A JupyterLab whose settings name the loopback sshd's cluster; yields its lab URL, its
    XDG_RUNTIME_DIR (where its master connection's socket is) and the ssh_config it reads."""
    if not (REPO / "slurmlab" / "labextension" / "package.json").exists():
        pytest.skip("the JupyterLab extension is not built: run `make labextension` (needs node and npm)")
    require_browser()
    base = tmp_path_factory.mktemp("lab-remote")
    runtime = tmp_path_factory.mktemp("xdg-remote")
    runtime.chmod(0o700)
    config = _ssh_config(loopback_sshd, base / "ssh_config")
    (base / "config").mkdir()
    url = SshTarget("127.0.0.1", loopback_sshd.user, loopback_sshd.port).url()
    entry = {"url": url, "slurm_conf": str(slurm_sandbox.conf_path)}
    (base / "config" / "jupyter_server_config.json").write_text(
        json.dumps({"SlurmlabServer": {"ssh_clusters": [entry], "ssh_config": str(config)}})
    )
    env = {
        **slurm_sandbox.env(),
        "SLURMLAB_POLL_INTERVAL": "1",
        "SLURMLAB_CLUSTER_POLL_INTERVAL": "1",
        "XDG_RUNTIME_DIR": str(runtime),
    }
    with running_lab(base, env, ready_path="slurmlab/api/status") as server:
        yield server.page_url("lab"), runtime, config


def _servers_master(url: str, runtime: Path, config: Path) -> int | None:
    """The local pid of the lab's master connection (its socket is named after the address, in the lab's
    private folder: slurmlab.slurm.ssh.link)."""
    old = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        return SshLink(SshTarget.parse(url), config=str(config)).master_pid()
    finally:
        if old is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = old


def test_the_sidebar_shows_a_remote_users_job_and_says_when_the_link_is_down(
    lab: tuple[str, Path, Path], remote: Any, loopback_sshd: Any
) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from slurmlab.testing.loopback_sshd import resume_sshd, stop_sshd

    lab_url, runtime, config = lab
    url = remote.link.target.url()
    cid = cluster_id(remote.link.target)
    submitted = remote.runner().run(
        ["sbatch", "--parsable", "-J", "remote-browser", "-t", "10", "-o", "/dev/null", "--wrap", "sleep 300"]
    )
    job = submitted.stdout.strip().split(";")[0]
    assert job.isdigit(), submitted.stdout + submitted.stderr
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium_page() as page:
        open_sidebar(page, lab_url)
        picker = page.locator("#slurmlab-sidebar select.slurmlab-ClusterPicker")
        option = picker.locator(f'option[value="{cid}"]')
        option.wait_for(state="attached", timeout=30_000)
        # keys only, no prompt: the server's own login comes up by itself
        try:
            page.wait_for_function(
                "id => document.querySelector(`#slurmlab-sidebar option[value='${id}']`)?.dataset.link === 'up'",
                arg=cid,
                timeout=WAIT_S * 1000,
            )
        except PlaywrightTimeout:
            page.screenshot(path=str(SHOTS / "sidebar-remote-never-up.png"))
            raise AssertionError(
                f"the link never came up in {WAIT_S} s: the picker says {option.text_content()!r} "
                f"({option.get_attribute('title')!r})"
            ) from None
        assert "(link up)" in (option.text_content() or "")
        picker.select_option(cid)
        name = page.locator("#slurmlab-sidebar .slurmlab-ClusterName")
        page.wait_for_function(
            "id => document.querySelector('#slurmlab-sidebar .slurmlab-ClusterName')?.dataset.cluster === id",
            arg=cid,
            timeout=10_000,
        )
        assert name.inner_text() == url.removeprefix("ssh://")
        # "my jobs" (the default scope) of a lab running as another user: "mine" is the login's on the cluster
        row = page.locator(f'#slurmlab-sidebar tr.slurmlab-Job[data-job-id="{job}"]')
        try:
            row.wait_for(timeout=WAIT_S * 1000)
        except Exception:
            page.screenshot(path=str(SHOTS / "sidebar-remote-no-job.png"))
            raise
        assert "remote-browser" in row.inner_text()
        page.screenshot(path=str(SHOTS / "sidebar-remote-cluster.png"))

        master = _servers_master(url, runtime, config)
        assert master is not None, "the lab's master connection to the cluster was not found"
        stop_sshd(loopback_sshd)  # the login node goes away: reconnecting cannot succeed meanwhile
        try:
            os.kill(master, signal.SIGKILL)  # and the connection with it, without a goodbye
            page.wait_for_function(
                "id => document.querySelector(`#slurmlab-sidebar option[value='${id}']`)?.dataset.link === 'down'",
                arg=cid,
                timeout=WAIT_S * 1000,
            )
            assert "link down since" in (option.text_content() or "") and "reconnecting" in (
                option.text_content() or ""
            )
            error = page.locator("#slurmlab-sidebar .slurmlab-Error")
            error.wait_for(timeout=WAIT_S * 1000)
            assert f"the link to {url} is down since" in error.inner_text()
            page.screenshot(path=str(SHOTS / "sidebar-remote-link-down.png"))
        finally:
            resume_sshd(loopback_sshd)  # the session's sshd, as the other tests expect it
