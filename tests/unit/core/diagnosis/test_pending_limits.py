"""Which QOS/association limit holds a pending job: the lookup read from Slurm's reason, sacctmgr rows (hostile
ones too), the usage of the jobs that count, and the finding with usage and cap — or the names alone."""

from __future__ import annotations

import pytest

from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.core.diagnosis.limit_rules import QOS_LIMIT_FIELDS
from slurmlab.core.diagnosis.pending_limits import (
    RunningUse,
    judge_limit,
    limit_ask,
    parse_rows,
    usage_of,
)
from slurmlab.core.slurm.tres import Tres
from slurmlab.errors import ParseError
from slurmlab.testing import recorded

# every QOS of a 22.05 sandbox with accounting (scripts/record_limits.py): normal caps each user at 4 GPUs
QOS_ROWS = recorded("22.05/limits/q08_sacctmgr_nP_show.txt").stdout


@pytest.mark.parametrize(
    ("reason", "table", "field", "key", "scope"),
    [
        ("QOSMaxGRESPerUser", "qos", "MaxTRESPU", "gres/gpu", "user"),
        ("(QOSMaxGRESPerUser)", "qos", "MaxTRESPU", "gres/gpu", "user"),
        ("MaxGRESPerAccount", "qos", "MaxTRESPA", "gres/gpu", "account"),
        ("QOSGrpCpuLimit", "qos", "GrpTRES", "cpu", "qos"),
        ("AssocGrpGRES", "assoc", "GrpTRES", "gres/gpu", "account"),
        ("AssocMaxCpuPerJobLimit", "assoc", "MaxTRES", "cpu", "job"),
        ("QOSMaxMemoryPerNode", "qos", "MaxTRESPerNode", "mem", "job"),
        ("QOSMaxJobsPerUserLimit", "qos", "MaxJobsPU", None, "user"),
        ("QOSMaxSubmitJobPerUserLimit", "qos", "MaxSubmitPU", None, "user"),
        # an association's MaxJobs counts the user's running jobs in that account, not the whole account's
        ("AssocMaxJobsLimit", "assoc", "MaxJobs", None, "user"),
    ],
)
def test_the_lookup_comes_from_slurms_reason(
    reason: str, table: str, field: str, key: str | None, scope: str
) -> None:
    ask = limit_ask(reason)
    assert ask is not None and (ask.table, ask.field, ask.key, ask.scope) == (table, field, key, scope)


@pytest.mark.parametrize(
    "reason",
    [
        None,
        "",
        "Resources",
        "Priority",
        "JobHeldUser",
        "QOSGrpCPUMinutesLimit",
        "QOSMinGRES",
        "QOSMaxGRESPerUser; DROP TABLE",
        "X" * 500,
    ],
)
def test_reasons_that_are_no_cap_to_read(reason: str | None) -> None:
    assert limit_ask(reason) is None


def test_sacctmgr_rows_and_hostile_ones() -> None:
    rows = parse_rows(QOS_ROWS + "\n", QOS_LIMIT_FIELDS)
    assert [r["Name"] for r in rows] == ["normal", "debug"] and rows[0]["MaxTRESPU"] == "gres/gpu=4"
    assert rows[1]["MaxWall"] == "00:30:00"
    for bad in ("normal|gres/gpu=4\n", "|".join("x" * 16) + "\n", "<html>502 Bad Gateway</html>"):
        with pytest.raises(ParseError, match="sacctmgr"):
            parse_rows(bad, QOS_LIMIT_FIELDS)


RUNNING = [
    RunningUse("1", "alice", "research", "normal", Tres.parse("cpu=2,mem=1G,node=1,gres/gpu=3")),
    RunningUse("2", "alice", "teaching", "debug", Tres.parse("cpu=1,gres/gpu=1")),
    RunningUse("3", "bob", "research", "normal", Tres.parse("cpu=4,gres/gpu:h100=2,gres/gpu=2")),
    RunningUse("4", "alice", "research", "normal", None),  # a record that could not be read counts nothing
]


def test_usage_counts_the_jobs_the_limit_counts() -> None:
    per_user = limit_ask("QOSMaxGRESPerUser")
    assert per_user is not None
    assert usage_of(per_user, RUNNING, user="alice", account="research", qos="normal") == 3  # not debug's
    assert usage_of(per_user, RUNNING, user="bob", account="research", qos="normal") == 2  # typed not twice
    group = limit_ask("QOSGrpGRES")
    assert group is not None and usage_of(group, RUNNING, user="x", account="y", qos="normal") == 5
    jobs = limit_ask("QOSMaxJobsPerUserLimit")
    assert jobs is not None and usage_of(jobs, RUNNING, user="alice", account="", qos="normal") == 2
    assoc = limit_ask("AssocGrpCpuLimit")
    assert assoc is not None and usage_of(assoc, RUNNING, user="", account="research", qos="") == 6
    max_jobs = limit_ask("AssocMaxJobsLimit")
    assert max_jobs is not None and usage_of(max_jobs, RUNNING, user="alice", account="research", qos="") == 2
    # a job's amounts by key (what limit_rules reads from the queue) count as its TRES does
    by_key = [RunningUse("5", "alice", "research", "normal", {"gres/gpu": 2.0})]
    assert usage_of(per_user, by_key, user="alice", account="research", qos="normal") == 2


def test_the_finding_names_the_limit_with_usage_and_cap() -> None:
    ask = limit_ask("QOSMaxGRESPerUser")
    assert ask is not None
    rows = parse_rows(QOS_ROWS, QOS_LIMIT_FIELDS)[:1]
    f = judge_limit(ask, rows, 3, 2, subject="job 9", name="normal")
    assert f.check == "job.limit" and f.verdict is Verdict.WARN
    assert f.evidence == "QOS normal limit MaxTRESPU: 3 GPU(s) in use of 4 GPU(s) allowed"
    assert "this job asks for 2 GPU(s)" in f.details and "cancel one of yours" in f.fix
    never = judge_limit(ask, rows, 0, 8, subject="job 9", name="normal")
    assert "can never start" in never.fix and "8 GPU(s) > 4 GPU(s)" in never.fix


def test_without_accounting_the_limit_is_named_without_numbers() -> None:
    ask = limit_ask("QOSMaxGRESPerUser")
    assert ask is not None
    f = judge_limit(
        ask,
        None,
        None,
        None,
        subject="job 9",
        name="normal",
        why_no_numbers="accounting could not be asked: slurmdbd is down",
    )
    assert "QOSMaxGRESPerUser" in f.evidence and "MaxTRESPU" in f.evidence
    assert "usage and cap unknown (accounting could not be asked: slurmdbd is down)" in f.evidence
    assert "sacctmgr show qos" in f.fix
    # a row with no such cap (or garbage in it) is the same: nothing invented
    rows = [{"Name": "normal", "MaxTRESPU": "gres/gpu=lots"}]
    assert "usage and cap unknown" in judge_limit(ask, rows, 3, 1, subject="", name="normal").evidence


def test_the_finding_says_which_change_lifts_the_limit_and_what_else_holds() -> None:
    ask = limit_ask("QOSMaxGRESPerUser")
    assert ask is not None
    rows = parse_rows(QOS_ROWS, QOS_LIMIT_FIELDS)[:1]
    lifted = [
        "end your job 1, 4 GPU(s) (`%scancel 1`): that frees QOS normal MaxTRESPU",
        "QOS debug instead of normal",
    ]
    f = judge_limit(
        ask,
        rows,
        4,
        2,
        subject="job 2",
        name="normal",
        lifts=lifted,
        also=[
            "association research/root MaxJobs (per user): 1 job(s) in use + 1 job(s) asked > 1 job(s) allowed"
        ],
    )
    assert f.fix == "lifts it: " + "; or ".join(lifted)
    assert "also held by association research/root MaxJobs" in f.details[-1]
    never = judge_limit(ask, rows, 0, 8, subject="job 2", name="normal", lifts=["ask for 4 GPU(s) or fewer"])
    assert "can never start" in never.fix and never.fix.endswith("; lifts it: ask for 4 GPU(s) or fewer")
    unnamed = judge_limit(ask, None, None, None, subject="job 2", name="", why_no_numbers="slurmdbd is down")
    assert "QOS limit MaxTRESPU" in unnamed.evidence and "  " not in unnamed.evidence
