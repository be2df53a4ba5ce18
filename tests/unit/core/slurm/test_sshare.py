"""sshare (fair-share) parsing on real recordings of 22.05, 24.11 and 26.05, and on hostile or broken output."""

from __future__ import annotations

import math
import random

import pytest

from slurmlab.core.slurm.sshare import SSHARE_FIELDS, parse_sshare
from slurmlab.errors import ParseError
from slurmlab.testing import recorded

VERSIONS = ("22.05", "24.11", "26.05")


def _text(version: str, name: str) -> str:
    return recorded(f"{version}/sshare/{name}").stdout


@pytest.mark.parametrize("version", VERSIONS)
def test_the_recorded_tree_parses_line_for_line(version: str) -> None:
    text = _text(version, "a01_sshare_mine.txt")
    records = parse_sshare(text)
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(records) == len(lines)
    for record, line in zip(records, lines, strict=True):
        cells = line.split("|")
        assert record.account == cells[0].strip() and record.depth == len(cells[0]) - len(cells[0].lstrip())
        assert record.user == (cells[1] or None)
        assert record.raw_usage == int(cells[4])
    root = records[0]
    assert (root.account, root.user, root.depth, root.raw_shares, root.fair_share) == (
        "root",
        None,
        0,
        None,
        None,
    )
    users = [r for r in records if r.is_user]
    assert users and all(r.fair_share is not None and 0 <= r.fair_share <= 1 for r in users)
    accounts = [r for r in records if not r.is_user and r.depth == 1]
    assert {a.account for a in accounts} >= {"research", "teaching"}
    assert all(a.fair_share is None for a in accounts)


@pytest.mark.parametrize("version", VERSIONS)
def test_gpu_minutes_come_from_grptresraw(version: str) -> None:
    text = _text(version, "a01_sshare_mine.txt")
    for record, line in zip(parse_sshare(text), text.splitlines(), strict=True):
        raw = dict(p.split("=") for p in line.split("|")[-1].split(","))
        assert record.gpu_minutes == float(raw["gres/gpu"])
        assert dict(record.usage_tres)["mem"] == float(raw["mem"])
    # the recording ran GPU jobs in research only: its usage is charged, teaching's is not
    by_account = {r.account: r for r in parse_sshare(text) if not r.is_user}
    assert by_account["research"].raw_usage and by_account["research"].raw_usage > 0
    assert by_account["teaching"].raw_usage == 0


def test_an_unused_association_has_an_infinite_level_fs() -> None:
    records = parse_sshare(_text("22.05", "a00_sshare_zero_usage.txt"))
    assert all(math.isinf(r.level_fs) for r in records if r.depth > 0 and r.level_fs is not None)
    assert all(r.raw_usage == 0 for r in records)


def test_no_accounting_prints_nothing_and_parses_to_nothing() -> None:
    assert parse_sshare(_text("22.05", "a07_sshare_accounting_off.txt")) == []
    assert parse_sshare(_text("22.05", "a06_sshare_unknown_account.txt")) == []


def test_parent_shares_are_read_as_such() -> None:
    line = "  physics|alice|parent|0.500000|10|0.100000|0.100000|0.700000|5.000000|cpu=1,gres/gpu=2"
    (r,) = parse_sshare(line)
    assert r.parent_shares and r.raw_shares is None and r.depth == 2 and r.gpu_minutes == 2.0


def _line(**cells: str) -> str:
    base = dict(
        zip(
            SSHARE_FIELDS, " research|alice|1|0.5|10|0.1|0.2|0.6|2.5|cpu=1,gres/gpu=3".split("|"), strict=True
        )
    )
    base.update(cells)
    return "|".join(base[f] for f in SSHARE_FIELDS)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("RawUsage", "-1"),
        ("RawUsage", "1e9"),
        ("RawUsage", "٣"),
        ("NormShares", "nan"),
        ("NormShares", "inf"),
        ("FairShare", "1e999"),
        ("FairShare", "7.5"),
        ("EffectvUsage", "0x10"),
        ("LevelFS", "-inf"),
        ("GrpTRESRaw", "cpu"),
        ("GrpTRESRaw", "cpu=1,=2"),
        ("GrpTRESRaw", "cpu=NaN"),
        ("GrpTRESRaw", "x y=1"),
        ("Account", " "),
        ("Account", " re search"),
        ("User", "bob smith"),
        ("RawShares", "lots"),
    ],
)
def test_a_bad_value_is_a_parse_error_naming_the_record(field: str, value: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_sshare(_line(**{field: value}))
    assert "sshare" in str(info.value)


def test_a_line_with_too_many_or_too_few_fields_says_what_was_expected() -> None:
    for line in (_line() + "|extra", "root|||0.0|7"):
        with pytest.raises(ParseError, match="expected 10"):
            parse_sshare(line)


def test_a_bad_line_among_good_ones_is_reported_not_dropped() -> None:
    text = _text("24.11", "a01_sshare_mine.txt")
    broken = text.replace("teaching|root|1|", "teaching|root|oops|", 1)
    problems: list[ParseError] = []
    records = parse_sshare(broken, problems=problems)
    assert len(records) == len(parse_sshare(text)) - 1
    assert len(problems) == 1 and problems[0].record_id == "teaching/root"


def test_garbage_never_escapes_as_another_exception() -> None:
    rng = random.Random(17)
    good = _line()
    alphabet = "|=,.-0123456789 abcinf/\t\x00é\n"
    for _ in range(2000):
        chars = list(good)
        for _ in range(rng.randint(1, 6)):
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(alphabet))
            if chars and rng.random() < 0.5:
                del chars[rng.randrange(len(chars))]
        try:
            parse_sshare("".join(chars))
        except ParseError:
            pass


def test_not_text_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_sshare(b"root|||")  # type: ignore[arg-type]
