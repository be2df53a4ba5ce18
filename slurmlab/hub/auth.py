"""The hub's authenticator for a workshop: each seat logs in with its own password (or the class's shared one),
checked against salted hashes in a 0600 file of the workshop's folder (:mod:`.passwords`).

Imported only by JupyterHub (the hub's configuration names it by its dotted path), never by slurmlab itself.
The file is read at each login, so ``slurmlab workshop down`` removing it closes every login at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jupyterhub.auth import Authenticator
from traitlets import Unicode

from slurmlab.hub.passwords import verify_secret

__all__ = ["SeatAuthenticator"]


class SeatAuthenticator(Authenticator):  # type: ignore[misc]
    """Log a seat in when its password matches the hash recorded for it; nobody else."""

    hashes_file = Unicode(help="JSON {user: hash line} written by the workshop (mode 0600)").tag(config=True)

    async def authenticate(self, handler: Any, data: dict[str, str]) -> str | None:
        name = str(data.get("username") or "").strip()
        password = str(data.get("password") or "")
        try:
            hashes = json.loads(Path(self.hashes_file).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.log.warning("the seats' password file %s is unreadable: nobody may log in", self.hashes_file)
            return None
        line = hashes.get(name) if isinstance(hashes, dict) else None
        if not isinstance(line, str) or not password or not verify_secret(password, line):
            return None
        return name
