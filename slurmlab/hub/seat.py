"""What each user's Slurm job runs first: ``python -m slurmlab.hub.seat jupyterhub-singleuser ARGS…``.

It does what batchspawner's own wrapper (``batchspawner.singleuser``) does -- takes a free port on the node,
tells the hub (``POST /hub/api/batchspawner {"port": N}``), then runs the single-user server's script in this
same process -- at less CPU per server, which is what a class of thirty on one machine runs short of:

- batchspawner's wrapper is a module of the ``batchspawner`` package, whose ``__init__`` imports the hub's own
  API handlers, database models, alembic and SQLAlchemy (0.43 CPU-s per server, for a server that needs none
  of them). This module needs only the standard library: the hub's address and the server's token are in the
  job's environment (``JUPYTERHUB_API_URL``, ``JUPYTERHUB_API_TOKEN``), as batchspawner's HubAuth reads them.
- jsonschema (which jupyter_server's event logger imports) loads ``rfc3987_syntax`` where it is installed,
  and that module builds 39 Earley parsers of RFC 3987 at import: 0.86 CPU-s per server, measured, the largest
  single cost of a server's start. jsonschema uses it only to check the ``iri`` and ``iri-reference`` formats,
  which no schema of the server's packages uses (tests/unit/hub/test_hub_seat.py checks the installed ones), and
  checks nothing in their place where the module is missing (its import is optional there). The server is
  started with the module marked missing (:data:`SKIPPED_MODULES`); kernels and terminals are other processes,
  untouched.

A hub with internal SSL (certificates in the environment) is left to batchspawner's own wrapper, which knows
them; slurmlab's hubs never set it.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

__all__ = ["SKIPPED_MODULES", "free_port", "main", "register_port", "skip_unused_modules"]

# optional imports of the server's dependencies that cost a server's start much and serve it nothing: see above
SKIPPED_MODULES = ("rfc3987_syntax",)
# the environment that says the hub talks TLS to its servers (JupyterHub's internal_ssl): batchspawner's case
_INTERNAL_SSL = ("JUPYTERHUB_SSL_KEYFILE", "JUPYTERHUB_SSL_CERTFILE", "JUPYTERHUB_SSL_CLIENT_CA")
REGISTER_TIMEOUT_S = 30.0


def skip_unused_modules() -> None:
    """Mark :data:`SKIPPED_MODULES` missing in this process (an import of one raises ImportError), unless
    something imported one already."""
    for name in SKIPPED_MODULES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None in sys.modules: "not importable"


def free_port() -> int:
    """A port free on every address of this node now, as batchspawner's wrapper picks one."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        port: int = sock.getsockname()[1]
        return port


def register_port(port: int, environ: Mapping[str, str] = os.environ) -> None:
    """Tell the hub which port this server will listen on (batchspawner's ``/batchspawner`` API: the hub then
    knows where to find it). Raises SystemExit saying what was wrong, which lands in the job's log."""
    api_url = environ.get("JUPYTERHUB_API_URL", "")
    token = environ.get("JUPYTERHUB_API_TOKEN", "")
    if not api_url or not token:
        raise SystemExit(
            "slurmlab.hub.seat: JUPYTERHUB_API_URL or JUPYTERHUB_API_TOKEN is not set: this command is run by "
            "the hub's Slurm job (batchspawner), not by hand"
        )
    request = urllib.request.Request(
        api_url.rstrip("/") + "/batchspawner",
        data=json.dumps({"port": port}).encode(),
        method="POST",
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=REGISTER_TIMEOUT_S) as answer:  # the hub's own address
            answer.read()
    except (urllib.error.URLError, OSError) as exc:
        raise SystemExit(
            f"slurmlab.hub.seat: the hub at {api_url} did not take this server's port {port} ({exc}); "
            "the hub will give up on this server: check that the hub runs and that this node reaches its "
            "address (hub.log in the hub's folder says more)"
        ) from None


def _with_port(service_url: str, port: int) -> str:
    parts = urllib.parse.urlparse(service_url)
    return urllib.parse.urlunparse(parts._replace(netloc=f"{parts.hostname}:{port}"))


def main(argv: list[str] | None = None) -> None:
    """``main(["jupyterhub-singleuser", ARGS…])``: register a free port with the hub, then run that script here."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: python -m slurmlab.hub.seat jupyterhub-singleuser [ARGS…]")
    if any(os.environ.get(name) for name in _INTERNAL_SSL):
        from batchspawner.singleuser import main as batchspawner_main  # it passes the certificates on

        sys.argv = [sys.argv[0], *args]
        batchspawner_main()
        return
    script = shutil.which(args[0])
    if script is None:
        raise SystemExit(
            f"slurmlab.hub.seat: {args[0]!r} is not found on this job's PATH; the hub names it by its full "
            "path (settings.json's 'singleuser'): is the Python environment reachable from the node?"
        )
    port = free_port()
    register_port(port)
    service_url = os.environ.get("JUPYTERHUB_SERVICE_URL", "")
    if service_url:
        os.environ["JUPYTERHUB_SERVICE_URL"] = _with_port(service_url, port)
    else:  # a hub before JupyterHub 2 names the port on the command line, as batchspawner's wrapper does
        args.append(f"--port={port}")
    skip_unused_modules()
    sys.argv = args
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
