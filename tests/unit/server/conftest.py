"""pytest-jupyter's server fixtures (jp_fetch, jp_serverapp, ...) for this folder only (see
tests/integration/server/conftest.py for why they are not registered globally)."""

from pytest_jupyter.jupyter_server import *  # noqa: F403
