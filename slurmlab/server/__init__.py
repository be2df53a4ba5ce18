"""slurmlab's Jupyter Server extension: REST routes under ``<base_url>/slurmlab/api/`` fed by one
server-side poller of Slurm. Enabled by ``jupyter-config/jupyter_server_config.d/slurmlab.json``.

Importing this package stays light; jupyter_server and tornado load when the server loads it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["_jupyter_server_extension_points", "_load_jupyter_server_extension"]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "slurmlab.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from slurmlab.server.extension import load

    load(serverapp)


def _unload_jupyter_server_extension(serverapp: Any) -> None:
    from slurmlab.server.extension import unload

    unload(serverapp)
