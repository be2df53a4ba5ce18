"""What Slurm accounting (``sacct``) remembers of jobs: one job with its steps, or a user's recent jobs.

Both queries run through the one Runner with a timeout and return :class:`~slurmlab.core.slurm.sacct.SacctRecord`
lists. :func:`limit_tables` reads the limits (``sacctmgr``: every QOS, the user's associations and the account
rows above them) that :mod:`slurmlab.core.diagnosis.limit_rules` checks a request against. A cluster without accounting (no slurmdbd: "Slurm accounting storage is disabled") or whose slurmdbd does
not answer raises :class:`~slurmlab.errors.AccountingOffError` saying how to turn it on; a missing ``sacct``
raises SlurmNotFoundError.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from slurmlab.core.diagnosis.limit_rules import ASSOC_LIMIT_FIELDS, QOS_LIMIT_FIELDS, LimitTables
from slurmlab.core.diagnosis.pending_limits import parse_rows
from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.core.slurm.sacct import SACCT_FIELDS, SacctRecord, parse_sacct
from slurmlab.errors import AccountingOffError, RequestError, SlurmError, SlurmNotFoundError
from slurmlab.slurm.identity import current_user
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = [
    "ACCOUNTING_OFF_HINT",
    "RECENT_LIMIT",
    "SACCTMGR_TIMEOUT",
    "default_account",
    "job_records",
    "limit_tables",
    "qos_limits",
    "recent_records",
    "run_accounting",
    "sacct_argv",
]

ACCOUNTING_OFF_HINT = (
    "the sandbox keeps accounting when started with `slurmlab sandbox up --accounting` "
    "(notebook: `%slurm sandbox up --accounting`); on a cluster, ask its admins for slurmdbd"
)
RECENT_LIMIT = 200
SACCT_TIMEOUT = 30.0
_OFF = ("accounting storage is disabled",)
_DBD_DOWN = ("problem talking to the database", "persistent connection", "slurmdbd")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
# sacctmgr answers from slurmdbd, which a busy site's database can slow: bounded like every other call
SACCTMGR_TIMEOUT = 10.0
# what sacctmgr says where Slurm keeps no accounting (22.05 to 26.05): then no QOS or association limit holds
_SACCTMGR_OFF = ("not running a supported accounting_storage plugin", "accounting storage is disabled")


def sacct_argv(*selection: str) -> list[str]:
    """The argv of a sacct query in the layout :func:`~slurmlab.core.slurm.sacct.parse_sacct` reads; ``selection``
    is -j/-u/-S ..."""
    return ["sacct", "--parsable2", "--noheader", "--format=" + ",".join(SACCT_FIELDS), *selection]


def run_accounting(
    argv: list[str],
    runner: Runner | None,
    timeout: float,
    *,
    cannot: str,
    off_message: str,
    off_markers: tuple[str, ...] = _OFF,
) -> RunResult:
    """Run an accounting command (sacct, sshare) through the one Runner. A missing command, accounting that is
    off (``off_markers`` in its stderr; ``off_message`` may use ``{last}``, its last line) and a slurmdbd that
    does not answer each become an error saying what to do; ``cannot``: what cannot be read without it."""
    try:
        return (runner or get_runner()).run(argv, timeout=timeout)
    except SlurmNotFoundError as exc:
        raise SlurmNotFoundError(
            f"{argv[0]} is not installed here, so {cannot}",
            argv=argv,
            hint="it comes with the Slurm client (Debian: apt-get install slurm-client)",
        ) from exc
    except SlurmError as exc:
        low = exc.stderr.lower()
        last = exc.stderr.strip().splitlines()[-1][:200] if exc.stderr.strip() else ""
        if any(f in low for f in off_markers):
            raise AccountingOffError(
                off_message.format(last=last),
                argv=argv,
                returncode=exc.returncode,
                stderr=exc.stderr,
                hint=ACCOUNTING_OFF_HINT,
            ) from None
        if any(f in low for f in _DBD_DOWN):
            raise AccountingOffError(
                f"Slurm's accounting daemon (slurmdbd) does not answer ({last})",
                argv=argv,
                returncode=exc.returncode,
                stderr=exc.stderr,
                hint="sandbox: `slurmlab sandbox restart`; cluster: ask the admins whether slurmdbd is up",
            ) from None
        raise


def _run(runner: Runner | None, *selection: str) -> list[SacctRecord]:
    result = run_accounting(
        sacct_argv(*selection),
        runner,
        SACCT_TIMEOUT,
        cannot="Slurm accounting cannot be read",
        off_message="Slurm accounting is off on this cluster, so sacct knows no jobs",
    )
    return parse_sacct(result.stdout)


def job_records(runner: Runner | None, job_id: str | int) -> list[SacctRecord]:
    """The job's own record and its steps; [] when accounting has not (yet) heard of it."""
    jid = check_job_id(job_id)
    # sacct -j 12 also lists 12's array tasks (12_1 ...): keep exactly the job asked for
    return [r for r in _run(runner, "-j", jid) if r.job_id == jid]


def recent_records(
    runner: Runner | None,
    *,
    user: str | None = None,
    since_hours: float = 24,
    limit: int = RECENT_LIMIT,
    now: datetime | None = None,
) -> list[SacctRecord]:
    """The jobs of ``user`` (default: you) that ran or were submitted in the last ``since_hours``, with their
    steps, oldest first; at most ``limit`` jobs (the most recent)."""
    name = current_user() if user is None else user
    if _USER.fullmatch(name) is None:
        raise RequestError(f"{name[:40]!r} is not a user name", hint="give a login name such as `alice`")
    if not 0 < since_hours <= 24 * 366:
        raise RequestError(
            f"since_hours={since_hours!r} is out of range", hint="give 1 to 8784 hours (a year)"
        )
    if limit < 1:
        raise RequestError(f"limit={limit!r} must be at least 1")
    # an absolute time: every sacct reads it alike (cluster-local, as sacct prints its own times)
    start = ((now or datetime.now()) - timedelta(hours=since_hours)).strftime("%Y-%m-%dT%H:%M:%S")
    records = _run(runner, "-u", name, "-S", start)
    jobs = list(dict.fromkeys(r.job_id for r in records))[-limit:]
    keep = set(jobs)
    return [r for r in records if r.job_id in keep]


def _sacctmgr(runner: Runner, *query: str, fields: tuple[str, ...]) -> list[dict[str, str]] | None:
    """Rows of ``sacctmgr -nP show QUERY format=FIELDS``; None when accounting is off here."""
    argv = ["sacctmgr", "-nP", "show", *query, "format=" + ",".join(fields)]
    result = runner.run(argv, check=False, timeout=min(runner.timeout, SACCTMGR_TIMEOUT))
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip()
        if any(m in said.lower() for m in _SACCTMGR_OFF):
            return None
        last = said.splitlines()[-1][:200] if said else f"exit code {result.returncode}, no message"
        raise AccountingOffError(
            f"sacctmgr could not read the limits ({last})",
            argv=argv,
            returncode=result.returncode,
            stderr=result.stderr,
            hint="sandbox: `slurmlab sandbox restart`; cluster: ask the admins whether slurmdbd is up",
        )
    return parse_rows(result.stdout, fields)


def qos_limits(runner: Runner | None = None) -> list[dict[str, str]] | None:
    """Every QOS with its limits (one ``sacctmgr`` call to slurmdbd); None: accounting is off here, so no QOS
    or association limit holds. AccountingOffError: it is on but could not be asked; ParseError: garbage."""
    return _sacctmgr(runner or get_runner(), "qos", fields=QOS_LIMIT_FIELDS)


def limit_tables(
    runner: Runner | None, user: str, cluster: str | None = None, qos: list[dict[str, str]] | None = None
) -> LimitTables | None:
    """The limits a request of ``user`` meets: every QOS (``qos``, when already read), the user's
    associations and every account row (the tree above them): at most three ``sacctmgr`` calls to slurmdbd.
    None: accounting is off (no QOS or association limit holds). AccountingOffError: it is on but could not
    be asked; ParseError: garbage. ``cluster``: keep that cluster's associations (a database may hold
    several; asked of ``scontrol show config`` only then)."""
    runner = runner or get_runner()
    if _USER.fullmatch(user) is None:
        raise RequestError(f"{user[:40]!r} is not a user name", hint="give a login name such as `alice`")
    qos = qos if qos is not None else qos_limits(runner)
    if qos is None:
        return None
    mine = _sacctmgr(runner, "assoc", "where", f"user={user}", fields=ASSOC_LIMIT_FIELDS) or []
    accounts = _sacctmgr(runner, "assoc", "where", "user=", fields=ASSOC_LIMIT_FIELDS) or []
    if cluster is None and len({r.get("Cluster") for r in [*mine, *accounts]}) > 1:
        cluster = runner.cluster or _cluster_name(runner)
    assocs = [r for r in [*mine, *accounts] if cluster is None or r.get("Cluster") == cluster]
    return LimitTables(tuple(qos), tuple(assocs))


def default_account(runner: Runner | None, user: str) -> str | None:
    """The account ``user``'s jobs are charged to when they name none (``sacctmgr show user``: one call to
    slurmdbd); None where accounting is off or the user has no record (Slurm then refuses their jobs)."""
    if _USER.fullmatch(user) is None:
        raise RequestError(f"{user[:40]!r} is not a user name", hint="give a login name such as `alice`")
    rows = _sacctmgr(runner or get_runner(), "user", "where", f"name={user}", fields=("DefaultAccount",))
    return next((r["DefaultAccount"] for r in rows or () if r.get("DefaultAccount")), None)


_CLUSTER_NAME = re.compile(r"^ClusterName\s*=\s*(\S+)", re.MULTILINE)


def _cluster_name(runner: Runner) -> str | None:
    """This cluster's name (``scontrol show config``), asked only where the database holds several."""
    m = _CLUSTER_NAME.search(
        runner.run(["scontrol", "show", "config"], timeout=min(runner.timeout, 10.0)).stdout
    )
    return m.group(1) if m else None
