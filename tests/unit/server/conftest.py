"""pytest-jupyter's server fixtures (jp_fetch, jp_serverapp, ...) for this folder only (see
tests/integration/server/conftest.py for why they are not registered globally)."""

from cluster_files import base, slurmctld  # noqa: F401  (fixtures of this folder)
from pytest_jupyter.jupyter_server import *  # noqa: F403
