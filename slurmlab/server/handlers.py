"""The HTTP routes under ``<base_url>/slurmlab/api/`` (HTTP only: data come from the poller).

Every route is a jupyter_server ``APIHandler``: it requires Jupyter's authentication, and POST
requires the XSRF token unless the request carries the server token itself. Answers are JSON;
GET answers carry an ETag and become 304 on a matching If-None-Match. Errors are status codes
with ``{"message": …, "reason": …}`` (Slurm unreachable → 503 with Slurm's own message).
Every route but ``clusters`` shows the cluster its ``cluster=`` names (:mod:`slurmlab.server.hub`);
an unknown one is a 400 that lists the known ones.
What each route answers is typed once, in :mod:`slurmlab.server.contract`.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.core.slurm.states import ENDED
from slurmlab.errors import (
    ControllerDownError,
    JobNotFoundError,
    MungeError,
    NotYourJobError,
    ParseError,
    RequestError,
    SlurmError,
    SlurmlabError,
    SlurmNotFoundError,
)
from slurmlab.server.cache import CacheEntry, ResponseCache, etag_matches, etag_of
from slurmlab.server.clusters import UnknownClusterError
from slurmlab.server.contract import (
    CancelAnswer,
    ClustersAnswer,
    ErrorAnswer,
    JobActionAnswer,
    JobDetailAnswer,
    KernelsAnswer,
    SessionAnswer,
)
from slurmlab.server.hub import ClusterHub
from slurmlab.server.kernels import KERNEL_WORDS, KernelWatch
from slurmlab.server.poller import WHOLE_KEYS, ClusterPoller
from slurmlab.server.recent import recent_for
from slurmlab.server.session import SESSION_WORDS
from slurmlab.server.views import job_view

__all__ = ["API_PREFIX", "ApiError", "routes"]

API_PREFIX = "slurmlab/api"
AUTH_RESOURCE = "slurmlab"


class ApiError(web.HTTPError):
    """An HTTP error whose message goes to the client verbatim as JSON."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        # tornado %-formats log_message when it logs it: escape, and keep the raw text apart.
        super().__init__(status, message.replace("%", "%%"), reason=reason)
        self.message = message


def _http_error(status: int, message: str, reason: str | None = None) -> ApiError:
    return ApiError(status, message, reason)


def _slurm_failure(exc: SlurmlabError) -> ApiError:
    if isinstance(exc, (ControllerDownError, MungeError, SlurmNotFoundError)):
        return _http_error(503, str(exc), "Slurm unavailable")
    if isinstance(exc, JobNotFoundError) or (
        isinstance(exc, SlurmError) and "invalid job id" in (exc.stderr or str(exc)).lower()
    ):
        return _http_error(404, str(exc), "No such job")
    if isinstance(exc, ParseError):
        return _http_error(500, f"slurmlab could not read Slurm's answer: {exc}", "Parse error")
    return _http_error(502 if isinstance(exc, SlurmError) else 500, str(exc))


class _SlurmlabHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def hub(self) -> ClusterHub:
        hub: ClusterHub = self.settings["slurmlab_hub"]
        return hub

    @property
    def poller(self) -> ClusterPoller:
        """The poller of the cluster the request names (``cluster=``; none: the server's own)."""
        try:
            return self.hub.poller(self.get_query_argument("cluster", None))
        except UnknownClusterError as exc:
            raise _http_error(400, str(exc), "Unknown cluster") from exc

    @property
    def cache(self) -> ResponseCache:
        return self.poller.cache

    def set_default_headers(self) -> None:
        super().set_default_headers()
        # Let browsers keep the answer but always revalidate it (the ETag makes that cheap).
        self.set_header("Cache-Control", "private, no-cache")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(ErrorAnswer(message=exc.message, reason=exc.reason)))
            return
        super().write_error(status_code, **kwargs)

    def write_entry(self, entry: CacheEntry) -> None:
        """The entry's JSON, stamped with when Slurm last confirmed it (``as_of``, ``age_s``).

        The ETag covers the data only, so an unchanged cluster still answers 304; the 304
        carries the stamp in ``X-Slurmlab-As-Of``."""
        self.set_header("ETag", entry.etag)
        self.set_header("Content-Type", "application/json")
        as_of = (
            datetime.fromtimestamp(entry.checked_at, tz=timezone.utc).isoformat()
            if entry.checked_at
            else None
        )
        if as_of is not None:
            self.set_header("X-Slurmlab-As-Of", as_of)
        if etag_matches(self.request.headers.get("If-None-Match"), entry.etag):
            self.set_status(304)
            self.finish()
            return
        if as_of is None:
            self.finish(entry.body)
            return
        stamp = json.dumps({"as_of": as_of, "age_s": round(max(0.0, time.time() - entry.checked_at), 1)})
        body = entry.body
        self.finish(stamp.encode() if body == b"{}" else stamp[:-1].encode() + b"," + body[1:])

    def compute_etag(self) -> str | None:
        # The ETag is set from the cache; tornado must not hash the body a second time.
        return None

    async def cached(self, key: str, *, report_failure: bool = True) -> None:
        """Answer from the shared cache; a Slurm failure becomes its HTTP status unless the entry
        itself reports it (the status route says what is wrong in its body)."""
        poller = self.poller
        poller.start()
        await poller.ensure_data(whole=key in WHOLE_KEYS)
        if report_failure and poller.failure is not None:
            raise _http_error(poller.failure.status, poller.failure.message, "Slurm unavailable")
        entry = self.cache.get(key)
        if entry is None:
            raise _http_error(503, "no data from Slurm yet; retry in a moment", "Not ready")
        self.write_entry(entry)


class ClustersHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        directory = self.hub.directory
        clusters = directory.clusters()
        payload = ClustersAnswer(clusters=clusters, default=clusters[0]["id"])
        body = ResponseCache.encode(payload)
        now = time.time()
        self.write_entry(CacheEntry(body, etag_of(body), now, now))


class StatusHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.cached("status", report_failure=False)


class QueueHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        scope = self.get_query_argument("scope", "mine")
        if scope not in ("mine", "all"):
            raise _http_error(400, f"scope must be 'mine' or 'all', not {scope!r}")
        await self.cached(f"queue:{scope}")


class NodesHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.cached("nodes")


def _check_job_id(job_id: str) -> str:
    try:
        return check_job_id(job_id)
    except RequestError as exc:
        raise _http_error(400, exc.message, "Not a job id") from exc


class JobHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        _check_job_id(job_id)
        poller = self.poller
        poller.touch()
        try:
            job = await poller.source.job(job_id)
        except SlurmlabError as exc:
            raise _slurm_failure(exc) from exc
        try:
            owners = {job.job_id: await poller.source.owner(job_id)}
        except SlurmlabError:
            owners = {}  # the job ended between the two calls: nobody's, shown all the same
        # as_of/age_s are NotRequired: write_entry stamps them, mypy asks to see them in the ** item
        payload: JobDetailAnswer = {**job_view(job, owners), "detail": job.to_dict()}  # type: ignore[typeddict-item]
        # Asked for on demand, so not kept in the shared cache (that would grow with every id asked).
        body = ResponseCache.encode(payload)
        now = time.time()
        self.write_entry(CacheEntry(body, etag_of(body), now, now))


async def _check_owned(source: Any, job_id: str, verb: str) -> Any:
    """The job, once the server's Unix user is known to own it; an HTTP error otherwise.

    Slurm lets an operator (root, SlurmUser) cancel, hold or release anything: this server acts only on
    the jobs of the Unix user it runs as, whoever is logged in to Jupyter, decided by the job's uid as
    squeue prints it alone (a record's UserId= sits after a free-text name that anyone can fill in)."""
    try:
        await source.check_mine(job_id)
    except NotYourJobError as exc:
        raise _http_error(
            403,
            f"{exc.message}; this server runs as {source.user} and {verb} only that user's jobs",
            "Not your job",
        ) from exc
    except SlurmlabError as exc:
        raise _slurm_failure(exc) from exc
    try:
        job = await source.job(job_id)
    except SlurmlabError as exc:
        raise _slurm_failure(exc) from exc
    if job.state in ENDED:
        raise _http_error(409, f"job {job_id} has already ended ({job.state})", "Job ended")
    return job


class CancelHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        _check_job_id(job_id)
        poller = self.poller
        source = poller.source
        if poller is self.hub.own and (await self.hub.session.answer())["job_id"] == job_id:
            # cancelling it would end this server, and the page asking with it
            raise _http_error(
                409,
                f"job {job_id} is the job this Jupyter server runs in: {SESSION_WORDS}; "
                "stop the server from the hub's control panel to end it",
                "This session",
            )
        watch: KernelWatch | None = self.settings.get("slurmlab_kernels")
        if poller is self.hub.own and watch is not None and watch.holds(job_id):
            # the kernel owns it: cancelling it under the kernel would end the kernel without a word
            raise _http_error(
                409,
                f"job {job_id} runs a kernel of this server: {KERNEL_WORDS}",
                "A kernel's job",
            )
        await _check_owned(source, job_id, "cancels")
        try:
            await source.cancel(job_id)
        except SlurmlabError as exc:
            raise _slurm_failure(exc) from exc
        self.log.info("slurmlab: cancelled job %s of %s", job_id, source.user)
        await poller.refresh()
        self.finish(json.dumps(CancelAnswer(job_id=job_id, cancelled=True, user=source.user)))


class _HoldReleaseHandler(_SlurmlabHandler):
    """``scontrol uhold`` / ``release`` of one pending job of the server's user (the queue view's buttons)."""

    action = "hold"

    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        _check_job_id(job_id)
        poller = self.poller
        source = poller.source
        job = await _check_owned(source, job_id, "holds and releases")
        if job.state != "PENDING":
            # Slurm refuses both for a job that has started ("Job is no longer pending execution")
            raise _http_error(
                409,
                f"job {job_id} is {job.state}: only a pending job can be held or released "
                "(cancel a running one instead)",
                "Not pending",
            )
        try:
            await (source.hold(job_id) if self.action == "hold" else source.release(job_id))
        except SlurmlabError as exc:
            raise _slurm_failure(exc) from exc
        self.log.info("slurmlab: %s of job %s of %s", self.action, job_id, source.user)
        await poller.refresh()
        self.finish(
            json.dumps(JobActionAnswer(job_id=job_id, action=self.action, done=True, user=source.user))
        )


class HoldHandler(_HoldReleaseHandler):
    action = "hold"


class ReleaseHandler(_HoldReleaseHandler):
    action = "release"


class RecentHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.write_entry(await recent_for(self.poller).answer())  # my recent jobs (slurmlab.server.recent)


class SessionHandler(_SlurmlabHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        poller = self.poller
        if poller is self.hub.own:
            payload = await self.hub.session.answer()
            asked = self.hub.session.checked_at
        else:  # a sandbox picked in the sidebar is another Slurm: this server runs in no job of it
            payload = SessionAnswer(job_id=None, job=None, problem=None, words=SESSION_WORDS)
            asked = None
        body = ResponseCache.encode(payload)
        at = asked if asked is not None else time.time()
        self.write_entry(CacheEntry(body, etag_of(body), at, at))


class KernelsHandler(_SlurmlabHandler):
    """This server's kernels on GPU nodes (:mod:`slurmlab.server.kernels`): what their provisioners say, no RPC."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        watch: KernelWatch | None = self.settings.get("slurmlab_kernels")
        payload = (
            watch.answer() if watch is not None else KernelsAnswer(kernels=[], specs=[], words=KERNEL_WORDS)
        )
        body = ResponseCache.encode(payload)
        now = time.time()
        self.write_entry(CacheEntry(body, etag_of(body), now, now))


def routes(base_url: str) -> list[tuple[str, type[APIHandler]]]:
    from jupyter_server.utils import url_path_join

    def at(path: str) -> str:
        return url_path_join(base_url, API_PREFIX, path)

    return [
        (at("clusters"), ClustersHandler),
        (at("status"), StatusHandler),
        (at("queue"), QueueHandler),
        (at("nodes"), NodesHandler),
        (at("recent"), RecentHandler),
        (at("session"), SessionHandler),
        (at("kernels"), KernelsHandler),
        (at(r"jobs/([^/]+)/cancel"), CancelHandler),
        (at(r"jobs/([^/]+)/hold"), HoldHandler),
        (at(r"jobs/([^/]+)/release"), ReleaseHandler),
        (at(r"jobs/([^/]+)"), JobHandler),
    ]
