"""Slurm's QOS, association and partition limits as arithmetic (issue 25, point 8), on what a real Slurm 22.05
printed (``tests/data/slurm/22.05/limits``, written by ``scripts/record_limits.py``):

- scene q: the user's job 1 holds 4 GPUs in QOS normal (MaxTRESPU gres/gpu=4); job 2 asks for 2 more and waits
  (QOSMaxGRESPerUser). ``sbatch --test-only`` of a shorter time says it would start all the same (qx01): it
  applies no QOS limit. QOS debug (a cap of its own, 30 minutes at most) lifts it: taken, it ran (qt01).
- scene a: the user's association in research allows one running job (MaxJobs=1), account teaching two GPUs
  in all (GrpTRES), QOS debug sets MaxJobsPU (which overrides the association's MaxJobs), GrpTRES, per-job
  MaxTRES; job 7 waits (AssocMaxJobsLimit). QOS debug, account teaching and account root ran when taken.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slurmlab.core.diagnosis.alternatives import Variant, parse_test_only
from slurmlab.core.diagnosis.limit_changes import ask_of, lifting_variants, lifts, pinned
from slurmlab.core.diagnosis.limit_rules import (
    ASSOC_LIMIT_FIELDS,
    QOS_LIMIT_FIELDS,
    QUEUE_ARGV,
    JobUse,
    LimitTables,
    holding,
    holds,
    most_gpus,
    parse_queue,
    start_bound,
)
from slurmlab.core.diagnosis.pending_limits import parse_rows
from slurmlab.core.slurm.models import Job, Partition
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs, parse_scontrol_partitions
from slurmlab.errors import ParseError
from slurmlab.testing import recorded
from tests.unit.core.diagnosis.limit_scenes import scene_job, scene_out, scene_running

UTC = timezone.utc


class Scene:
    """One recorded scene as the limits see it: the tables, the queue with what each job holds, the job."""

    def __init__(self, prefix: str) -> None:
        show = ("sacctmgr", "-nP", "show")
        self.tables = LimitTables(
            tuple(parse_rows(scene_out(prefix, *show, "qos"), QOS_LIMIT_FIELDS)),
            tuple(
                parse_rows(scene_out(prefix, *show, "assoc", "where", "user=root"), ASSOC_LIMIT_FIELDS)
                + parse_rows(scene_out(prefix, *show, "assoc", "where", "user="), ASSOC_LIMIT_FIELDS)
            ),
        )
        self.records = parse_scontrol_jobs(scene_out(prefix, "scontrol", "show", "job", "-d", exact=True))
        self.jobs = parse_queue(scene_out(prefix, *QUEUE_ARGV), self.records)
        self.partitions = parse_scontrol_partitions(scene_out(prefix, "scontrol", "show", "partition"))
        jid = scene_job(prefix)
        self.job: Job = next(j for j in self.records if str(j.job_id) == jid)

    def held(
        self, variant: Variant | None = None, *, account: str = "research", qos: str = "normal"
    ) -> list[str]:
        ask = ask_of(self.job, variant, user="root", account=account, qos=qos)
        return [
            h.text() for h in holds(ask, self.tables, self.jobs, self.partitions, submitted=variant is None)
        ]


@pytest.fixture(scope="module")
def q() -> Scene:
    return Scene("q")


@pytest.fixture(scope="module")
def a() -> Scene:
    return Scene("a")


def test_the_recorded_queue_is_read_with_what_each_running_job_holds(q: Scene) -> None:
    assert [(j.job_id, j.state, j.user, j.account, j.qos) for j in q.jobs] == [
        ("2", "PD", "root", "research", "normal"),
        ("1", "R", "root", "research", "normal"),
    ]
    running = q.jobs[1]
    assert running.running and running.tres is not None and running.tres["gres/gpu"] == 4
    assert running.ends is not None and not q.jobs[0].running


def test_the_qos_gpu_cap_holds_the_job_and_every_change_test_only_would_start(q: Scene) -> None:
    assert q.held() == [
        "QOS normal MaxTRESPU (per user): 4 GPU(s) in use + 2 GPU(s) asked > 4 GPU(s) allowed"
    ]
    shorter = Variant("time", "-t 5", (), minutes=5)
    # what --test-only said of the shorter time: a start, as if no QOS held it ...
    said = parse_test_only(recorded("22.05/limits/qx01_test_only_ignores_the_qos_cap.txt").stderr, 0)
    assert said.starts is not None and not said.refused
    # ... while the cap holds it exactly as it holds the job: the change the old why() offered
    assert q.held(shorter) == [
        "QOS normal MaxTRESPU (per user): 4 GPU(s) in use + 2 GPU(s) asked > 4 GPU(s) allowed"
    ]
    assert q.held(Variant("gpus", "1 GPU", (), gpus=1))[0].startswith("QOS normal MaxTRESPU")
    assert q.held(Variant("account", "teaching", (), account="teaching"), account="teaching") != []  # per QOS
    assert q.held(Variant("qos", "QOS debug", (), qos="debug")) == []  # its own cap, nothing used in it yet


def test_what_lifts_the_qos_cap_is_said_and_tried(q: Scene) -> None:
    ask = ask_of(q.job, None, user="root", account="research", qos="normal")
    own = holds(ask, q.tables, q.jobs, q.partitions, submitted=True)
    tried = lifting_variants(q.job, ask, q.tables, q.jobs, q.partitions)
    assert [v.kind for v in tried] == ["qos", "account", "account"]  # no GPU count fits: 4 of 4 are in use
    debug = tried[0]
    assert debug.qos == "debug" and "--qos=debug" in debug.options and debug.minutes is None  # 10 <= 30 min
    said = lifts(
        own,
        [
            (
                v,
                [
                    h.text()
                    for h in holds(
                        ask_of(q.job, v, user="root", account="research", qos="normal"), q.tables, q.jobs
                    )
                ],
            )
            for v in tried
        ],
    )
    first = scene_running("q")
    assert said[0].startswith(f"end your job {first}, 4 GPU(s), ends ") and f"(`%scancel {first}`)" in said[0]
    assert any(s.startswith("QOS debug instead of normal (`%salloc") for s in said)
    assert not any("account teaching" in s for s in said)  # the per-user cap of the QOS holds there too
    pinned_line = pinned(tried[0], account="research", qos="normal").options
    assert pinned_line[0] == "--account=research" and pinned_line.count("--qos=debug") == 1
    assert not any(o.startswith("--qos=normal") for o in pinned_line)


def test_association_limits_the_account_tree_and_the_qos_that_overrides_them(a: Scene) -> None:
    assert a.tables.account_chain("teaching")[0]["GrpTRES"] == "gres/gpu=2"
    assert [r["Account"] for r in a.tables.account_chain("research")] == ["research", "root"]
    assert a.tables.subtree("root") == {"root", "research", "teaching"}
    assert a.tables.allowed_qos("root", "research") == ["debug", "normal"]
    assert a.held() == [
        "association research/root MaxJobs (per user): 1 job(s) in use + 1 job(s) asked > 1 job(s) allowed"
    ]
    # QOS debug sets MaxJobsPU: Slurm takes the QOS's limit first, so the association's MaxJobs=1 does not hold
    # (taken, the debug change ran: at01)
    assert a.held(Variant("qos", "debug", (), qos="debug")) == []
    assert recorded("22.05/limits/at01_taken_state.txt").stdout.startswith("RUNNING")
    teaching = a.held(Variant("account", "teaching", (), account="teaching"), account="teaching")
    assert teaching == []  # 2 GPUs of the account's 2, none used
    more = Variant("gpus", "3", (), gpus=3)
    assert a.held(more, account="teaching") == [
        "account teaching GrpTRES (whole account): 0 GPU(s) in use + 3 GPU(s) asked > 2 GPU(s) allowed"
    ]
    big = a.held(Variant("qos", "debug", (), qos="debug", gpus=5))
    assert "QOS debug MaxTRES (per job): asks 5 GPU(s), 4 GPU(s) allowed" in big
    assert "QOS debug GrpTRES (whole QOS): 0 GPU(s) in use + 5 GPU(s) asked > 6 GPU(s) allowed" not in big
    long = a.held(Variant("qos", "debug", (), qos="debug", minutes=45))
    assert long == ["QOS debug MaxWall: asks 45 min, 30 min allowed"]


def test_a_qos_change_gets_the_qos_wall_time_when_the_job_asks_more(a: Scene) -> None:
    job = replace(a.job, time_limit=3600)
    ask = ask_of(job, None, user="root", account="research", qos="normal")
    debug = next(v for v in lifting_variants(job, ask, a.tables, a.jobs, a.partitions) if v.kind == "qos")
    assert debug.minutes == 30 and debug.options[debug.options.index("-t") + 1] == "30"
    assert "with -t 30 (its MaxWall)" in debug.change
    assert holds(ask_of(job, debug, user="root", account="research", qos="normal"), a.tables, a.jobs) == []


def test_the_partitions_max_time_holds_too_unless_the_qos_overrides_it(q: Scene) -> None:
    short = [replace(q.partitions[0], max_time=5 * 60)]
    ask = ask_of(
        q.job, Variant("qos", "debug", (), qos="debug"), user="root", account="research", qos="normal"
    )
    assert [h.text() for h in holds(ask, q.tables, q.jobs, short)] == [
        "partition debug MaxTime: asks 10 min, 5 min allowed"
    ]
    flagged = LimitTables(tuple({**r, "Flags": "PartitionTimeLimit"} for r in q.tables.qos), q.tables.assocs)
    assert holds(ask, flagged, q.jobs, short) == []
    # a job queued in two partitions starts in the one it fits
    both = [*short, Partition("long", "node1", ("node1",), max_time=None)]
    assert holds(replace(ask, partitions=("debug", "long")), q.tables, q.jobs, both) == []


def test_without_accounting_only_the_partitions_limits_hold(q: Scene) -> None:
    ask = ask_of(q.job, None, user="root", account="", qos="")
    assert holds(ask, None, q.jobs, q.partitions) == []


def test_what_cannot_be_read_holds_rather_than_being_counted_as_nothing(q: Scene) -> None:
    unread = [replace(j, tres=None) if j.running else j for j in q.jobs]
    ask = ask_of(
        q.job, Variant("qos", "x", (), qos="normal", gpus=1), user="root", account="research", qos="normal"
    )
    said = [h.text() for h in holds(ask, q.tables, unread)]
    assert said == ["QOS normal MaxTRESPU (per user): usage unknown (the record of job 1 could not be read)"]
    garbage = LimitTables(tuple({**r, "MaxTRESPU": "gres/gpu=lots"} for r in q.tables.qos), q.tables.assocs)
    assert "could not be read" in holds(ask, garbage, q.jobs)[0].text()
    with pytest.raises(ParseError, match="squeue"):
        parse_queue("2|PD|root|research\n", q.records)  # a line cut short: a job left uncounted
    with pytest.raises(ParseError, match="squeue"):
        parse_queue("x UserId=root(0)|R|root|research|normal\n", q.records)
    assert holding(None) is None
    assert parse_queue("", q.records) == []


def test_a_switch_counts_against_the_submit_limits_the_job_itself_no_longer_does(q: Scene) -> None:
    capped = LimitTables(
        tuple({**r, "MaxSubmitPU": "2"} if r["Name"] == "normal" else r for r in q.tables.qos),
        q.tables.assocs,
    )
    ask = ask_of(q.job, None, user="root", account="research", qos="normal")
    assert not [h for h in holds(ask, capped, q.jobs, submitted=True) if "MaxSubmitPU" in h.limit]
    switched = holds(ask, capped, q.jobs)  # the new job is submitted before the old one is cancelled
    assert any(
        h.text() == "QOS normal MaxSubmitPU (per user, queued and running): 2 job(s) in use + 1 job(s) "
        "asked > 2 job(s) allowed"
        for h in switched
    )


def test_sooner_is_measured_against_what_is_known_of_the_jobs_own_start(q: Scene) -> None:
    now = datetime(2026, 12, 4, 17, 43, tzinfo=UTC)
    ask = ask_of(q.job, None, user="root", account="research", qos="normal")
    own = holds(ask, q.tables, q.jobs, submitted=True)
    first_end = q.jobs[1].ends
    assert first_end is not None
    bound, said = start_bound(None, own, now)
    assert bound == first_end and "limit can lift" in said  # no start before job 1 ends
    later = now + timedelta(hours=2)
    assert start_bound(later, own, now)[0] == later
    assert start_bound(later, [], now)[0] == later
    at_once, why = start_bound(None, [], now)  # nothing known: only a change that starts at once
    assert at_once == now + timedelta(seconds=60) and "at once" in why
    never = holds(
        ask_of(
            q.job,
            Variant("qos", "d", (), qos="debug", minutes=45),
            user="root",
            account="research",
            qos="normal",
        ),
        q.tables,
        q.jobs,
    )
    assert start_bound(None, never, now)[0] is None  # it never starts as it is: any start is sooner
    unknown_end = [replace(j, ends=None) for j in q.jobs]
    assert start_bound(None, holds(ask, q.tables, unknown_end, submitted=True), now)[0] == at_once
    # a job waiting for resources cannot start before the first job that holds them ends (by its time limit)
    freed, why_free = start_bound(None, [], now, free_at=later)
    assert freed == later and "first job that holds what it needs" in why_free
    assert start_bound(None, own, now, free_at=later)[0] == first_end  # a limit that holds it comes first


def test_job_uses_are_plain_data() -> None:
    j = JobUse("3", "CG", "bob", "acct", "normal", {"gres/gpu": 1.0})
    assert j.running and not JobUse("4", "PD", "bob", "acct", "normal").running


_HOSTILE = st.text(
    alphabet=st.sampled_from(list("|=,:/-.\n\r\u2028\x1c\ufffd\u00b2 0123456789gresgpucpumemUNLIMITED")),
    max_size=60,
)


@given(queue=_HOSTILE, cell=_HOSTILE, wall=_HOSTILE)
@example(queue="", cell="0\x1c", wall="")  # a separator str.strip() takes and float() refuses (CI found it)
@example(queue="", cell="\u00b2", wall="")  # a digit to isdigit() that float() refuses
def test_hostile_queue_lines_and_limit_cells_never_crash(q: Scene, queue: str, cell: str, wall: str) -> None:
    """Whatever squeue or sacctmgr print (their names and values are others' text), the queue is read or
    refused with a ParseError, and a cap that cannot be read holds rather than raising."""
    try:
        jobs = parse_queue(queue, q.records)
    except ParseError:
        jobs = q.jobs
    row = {**q.tables.qos[0], "MaxTRESPU": cell, "GrpTRES": cell, "MaxWall": wall, "MaxJobsPU": cell}
    tables = LimitTables((row,), q.tables.assocs)
    ask = ask_of(q.job, None, user="root", account="research", qos="normal")
    for h in holds(ask, tables, jobs, q.partitions):
        assert h.text()


# ---- the most GPUs one job may hold (a workshop seat's share: lessons size their requests to it) ------------------
@pytest.mark.parametrize(
    ("account", "qos", "gpus", "limits"),
    [
        # QOS normal caps each user at 4 GPUs (MaxTRESPU); research sets no GPU limit of its own
        ("research", "normal", 4, {"QOS normal MaxTRESPU"}),
        # account teaching allows 2 GPUs for all its jobs together (GrpTRES): tighter than the QOS
        ("teaching", "normal", 2, {"account teaching GrpTRES"}),
        # QOS debug: 4 per job (MaxTRES) and 4 per user (MaxTRESPU), both met by a fifth; its GrpTRES (6) not
        ("research", "debug", 4, {"QOS debug MaxTRES", "QOS debug MaxTRESPU"}),
    ],
)
def test_most_gpus_is_the_tightest_cap_and_names_it(
    a: Scene, account: str, qos: str, gpus: int, limits: set[str]
) -> None:
    most, over = most_gpus(a.tables, "root", account, qos)
    assert most == gpus
    assert {h.limit for h in over} == limits and all(h.key == "gres/gpu" for h in over)


def test_most_gpus_is_none_where_no_limit_caps_gpus(a: Scene) -> None:
    uncapped = LimitTables(
        tuple({**row, "MaxTRESPU": "", "MaxTRES": "", "GrpTRES": ""} for row in a.tables.qos),
        tuple(row for row in a.tables.assocs if row.get("Account") != "teaching"),
    )
    assert most_gpus(uncapped, "root", "research", "normal") == (None, [])
