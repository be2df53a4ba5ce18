"""pytest plugin of slurmlab (registered through the ``pytest11`` entry point).

Fixtures:

- ``sandbox_factory`` (session): ``sandbox_factory(profile, nodes=None)`` starts one real local Slurm sandbox per
  profile (cached; each in its own folder with its own ports) and stops them all at the end of the session.
- ``slurm_sandbox`` (session): the sandbox of ``--sandbox-profile`` (default ``dgx-h100``); while it lives the
  process-wide runner (``slurmlab.slurm.runner.get_runner()``) points at it.

Both skip the test, with the apt-get line as the reason, when Slurm or munge is not installed.
Mark tests that use them ``@pytest.mark.sandbox``.

- ``--over-ssh``: ``slurm_sandbox``'s runner (the process-wide one, and the fixture's ``runner()``) drives
  the sandbox through ``Runner(ssh=...)``: a real sshd on 127.0.0.1 (``loopback_sshd``,
  :mod:`slurmlab.testing.loopback_sshd`) as a second Unix user whom the sandbox admits. The same tests then run
  over the link (needs root and openssh-server; ``make test`` reruns a subset so).

- ``fake_runner``: a :class:`slurmlab.testing.FakeRunner` (recorded Slurm output, no Slurm) that is the
  process-wide runner for one test, closed afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slurmlab.testing.sandbox_fixtures import SandboxFactory, new_base, slurm_missing_reason

DEFAULT_PROFILE = "dgx-h100"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("slurmlab")
    group.addoption(
        "--sandbox-profile",
        default=DEFAULT_PROFILE,
        help=f"hardware profile of the slurm_sandbox fixture (default {DEFAULT_PROFILE})",
    )
    group.addoption(
        "--over-ssh",
        action="store_true",
        help="slurm_sandbox's runner goes through a real sshd on 127.0.0.1 as a second user (needs root)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sandbox: runs against the real local Slurm sandbox")


@pytest.fixture
def fake_runner() -> Iterator[object]:
    from slurmlab.slurm.runner import set_runner
    from slurmlab.testing.fake_runner import FakeRunner

    fake = FakeRunner()
    old = set_runner(fake)
    try:
        yield fake
    finally:
        set_runner(old)
        fake.close()


@pytest.fixture(scope="session")
def sandbox_factory() -> Iterator[SandboxFactory]:
    factory = SandboxFactory(new_base())
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="session")
def slurm_sandbox(request: pytest.FixtureRequest, sandbox_factory: SandboxFactory) -> Iterator[object]:
    reason = slurm_missing_reason()
    if reason:
        pytest.skip(reason)
    from slurmlab.slurm.runner import set_runner

    # with accounting where it can start (the suite's sacct tests use it), unlike the factory's own sandboxes
    sandbox = sandbox_factory(request.config.getoption("--sandbox-profile"), accounting=None)
    if request.config.getoption("--over-ssh"):
        yield from _over_ssh(sandbox, request.getfixturevalue("loopback_sshd"))
        return
    old = set_runner(sandbox.runner())
    try:
        yield sandbox
    finally:
        set_runner(old)


@pytest.fixture(scope="session")
def loopback_sshd() -> Iterator[object]:
    """sshd on 127.0.0.1 for the user ``slurmlabssh<pid>`` (made for the session, removed after); skips without root
    or openssh-server."""
    import tempfile
    from pathlib import Path

    from slurmlab.testing.loopback_sshd import remove_sshd, ssh_missing_reason, start_sshd

    reason = ssh_missing_reason()
    if reason:
        pytest.skip(reason)
    server = start_sshd(Path(tempfile.mkdtemp(prefix="slurmlab-sshd-")))
    try:
        yield server
    finally:
        remove_sshd(server)


def _over_ssh(sandbox: object, server: object) -> Iterator[object]:
    """``sandbox`` with its runners going over the link to ``server`` as its user, whom it admits."""
    from slurmlab.slurm.runner import set_runner
    from slurmlab.testing.loopback_sshd import over_ssh

    with over_ssh(sandbox, server) as seen:  # type: ignore[arg-type]
        _over_ssh_runner[:] = [seen.runner()]
        old = set_runner(_over_ssh_runner[0])  # type: ignore[arg-type]
        try:
            yield seen
        finally:
            _over_ssh_runner.clear()
            set_runner(old)


# the process-wide runner of an --over-ssh session: a test that switched it (`%slurm use <local conf>`) does not
# leave the tests after it on this machine's runner
_over_ssh_runner: list[object] = []


@pytest.fixture(autouse=True)
def _over_ssh_runner_kept() -> Iterator[None]:
    yield
    if _over_ssh_runner:
        from slurmlab.slurm.runner import get_runner, set_runner

        if get_runner() is not _over_ssh_runner[0]:
            set_runner(_over_ssh_runner[0])  # type: ignore[arg-type]
