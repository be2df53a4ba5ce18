"""The teacher's view: a JupyterHub service at ``/services/workshop/`` of the workshop's hub, for the teacher only.

    python -m slurmlab.workshop.view --dir /srv/slurmlab-workshop --every 15    # the hub starts it

The hub starts and stops it (a managed service); JupyterHub's OAuth logs the teacher in, and anyone else who
reaches it gets 403. Whoever looks and however many tabs are open, Slurm is asked at most once every ``--every``
seconds (one ``squeue`` of the whole class, never one per student: the controller-load budget) and the hub's
REST API once with it; the page reloads itself after the same time. Nothing is asked while nobody looks. With
them, each seat's newest lesson notebook is looked at (:mod:`.notebooks`: one listing of its lessons folder, and a
read only of a notebook saved since the last look) for an error in its last cell.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from slurmlab.errors import SlurmlabError
from slurmlab.workshop.notebooks import LastCell, LastCells
from slurmlab.workshop.room import SeatView, build_room, parse_room_queue, render_room

__all__ = ["RoomCache", "main"]

SERVICE = "workshop"  # its name in the hub: the page is /services/workshop/
TEACHERS_ENV = "SLURMLAB_WORKSHOP_TEACHERS"  # comma-separated hub names allowed to see the page
_PAGE = 100  # users asked of the hub per call (JupyterHub pages its /users)


class RoomCache:
    """The room as last asked, asked again only when older than ``every`` seconds (one asker at a time).

    ``ask_queue`` prints the class's squeue (:data:`~.room.ROOM_QUEUE_ARGV`), ``ask_users`` gives the hub's
    users, ``ask_cells`` each seat's last cell (:meth:`.notebooks.LastCells.scan`); ``clock`` is
    ``time.monotonic`` but in tests."""

    def __init__(
        self,
        seats: Sequence[str],
        every: float,
        ask_queue: Callable[[], str],
        ask_users: Callable[[], list[dict[str, Any]]],
        clock: Callable[[], float] = time.monotonic,
        ask_cells: Callable[[], Mapping[str, LastCell]] | None = None,
    ) -> None:
        self.seats = tuple(seats)
        self.every = every
        self._ask_queue, self._ask_users, self._clock = ask_queue, ask_users, clock
        self._ask_cells = ask_cells or dict
        self._lock = threading.Lock()
        self._last: float | None = None
        self.room: list[SeatView] = build_room(self.seats, [], [])
        self.asked: datetime | None = None
        self.trouble = ""

    def snapshot(self) -> tuple[list[SeatView], datetime | None, str]:
        with self._lock:
            if self._last is None or self._clock() - self._last >= self.every:
                self._last = self._clock()
                self._ask()
            return self.room, self.asked, self.trouble

    def _ask(self) -> None:
        try:
            jobs = parse_room_queue(self._ask_queue())
            users = self._ask_users()
            cells = self._ask_cells()
        except (SlurmlabError, OSError, ValueError) as exc:
            self.trouble = f"the room could not be read just now ({exc}); the page shows the last answer"
            return
        self.room = build_room(self.seats, users, jobs, cells)
        self.asked = datetime.now(timezone.utc)
        self.trouble = ""


def _hub_users() -> list[dict[str, Any]]:
    """Every user of the hub (``/hub/api/users``, page by page) with this service's own token."""
    api = os.environ["JUPYTERHUB_API_URL"].rstrip("/")
    found: list[dict[str, Any]] = []
    while True:
        query = urllib.parse.urlencode({"offset": len(found), "limit": _PAGE})
        req = urllib.request.Request(f"{api}/users?{query}")
        req.add_header("Authorization", f"token {os.environ['JUPYTERHUB_API_TOKEN']}")
        with urllib.request.urlopen(req, timeout=15) as answer:  # the hub's own loopback address
            page = json.loads(answer.read().decode("utf-8", errors="replace"))
        if not isinstance(page, list):
            raise ValueError(f"the hub's /users answered {type(page).__name__}, not a list")
        found += page
        if len(page) < _PAGE:
            return found


def _application(cache: RoomCache, teachers: set[str], cap: int) -> Any:
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado.ioloop import IOLoop
    from tornado.web import Application, HTTPError, RequestHandler, authenticated

    class RoomPage(HubOAuthenticated, RequestHandler):  # type: ignore[misc]
        @authenticated
        async def get(self) -> None:
            if self.current_user.get("name") not in teachers:
                raise HTTPError(403, "the room is the teacher's view")
            room, asked, trouble = await IOLoop.current().run_in_executor(None, cache.snapshot)
            self.set_header("Cache-Control", "no-store")
            self.write(
                render_room(
                    room,
                    cap,
                    refresh=int(cache.every),
                    now=datetime.now(timezone.utc),
                    asked=asked,
                    trouble=trouble,
                )
            )

    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{SERVICE}/")
    return Application(
        [
            (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
            (prefix, RoomPage),
        ],
        cookie_secret=os.urandom(32),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurmlab.workshop.view", description=__doc__)
    parser.add_argument("--dir", required=True, help="the workshop's folder")
    parser.add_argument("--every", type=float, default=15.0, help="ask Slurm at most once per this many s")
    args = parser.parse_args(argv)
    from tornado.httpserver import HTTPServer
    from tornado.ioloop import IOLoop

    from slurmlab.workshop.control import VIEW_EVERY_MIN, Workshop

    shop = Workshop.find(args.dir)

    def ask_queue() -> str:  # the class's one squeue, as `workshop status` asks it
        return shop.queue_text()

    # the uid each seat was made with: a file in a home that is not its student's own is not read
    homes = {str(s["name"]): (shop.home(str(s["name"])), int(s["uid"])) for s in shop.state["seats"]}
    cells = LastCells(homes)
    cache = RoomCache(
        shop.seats, max(VIEW_EVERY_MIN, args.every), ask_queue, _hub_users, ask_cells=cells.scan
    )
    teachers = {t for t in os.environ.get(TEACHERS_ENV, "").split(",") if t}
    cap = int(shop.state.get("gpu_cap", 1))
    where = urllib.parse.urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    HTTPServer(_application(cache, teachers, cap)).listen(where.port or 80, where.hostname or "127.0.0.1")
    IOLoop.current().start()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
