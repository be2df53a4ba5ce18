"""pytest plugin of slurmlab (registered through the ``pytest11`` entry point).

Fixtures:

- ``sandbox_factory`` (session): ``sandbox_factory(profile, nodes=None)`` starts one real local Slurm sandbox per
  profile (cached; each in its own folder with its own ports) and stops them all at the end of the session.
- ``slurm_sandbox`` (session): the sandbox of ``--sandbox-profile`` (default ``dgx-h100``); while it lives the
  process-wide runner (``slurmlab.slurm.runner.get_runner()``) points at it.

Both skip the test, with the apt-get line as the reason, when Slurm or munge is not installed.
Mark tests that use them ``@pytest.mark.sandbox``.

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
    old = set_runner(sandbox.runner())
    try:
        yield sandbox
    finally:
        set_runner(old)
