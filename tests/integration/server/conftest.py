"""pytest-jupyter's server fixtures (jp_fetch, jp_serverapp, ...) for this folder only.

Imported here rather than registered with ``pytest_plugins``: that would make its autouse
event-loop fixture and its async-test hooks global, and they close the event loop Playwright's
sync API keeps running in the browser tests. Fixtures and hooks defined in a conftest apply
only to the tests below it.
"""

from pytest_jupyter.jupyter_server import *  # noqa: F403
