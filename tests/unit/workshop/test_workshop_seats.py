"""The seats of a workshop (issue 31 point 1): their names, the refusal of names already taken, the passwords."""

from __future__ import annotations

import pytest

from slurmlab.workshop.seats import check_prefix, seat_names, seat_secrets, taken


def test_seats_are_numbered_from_one_padded_to_the_widest_number() -> None:
    assert seat_names("student", 3) == ("student01", "student02", "student03")
    names = seat_names("student", 120)
    assert names[0] == "student001" and names[-1] == "student120" and len(set(names)) == 120
    assert seat_names("guest", 10)[-1] == "guest10"


@pytest.mark.parametrize("prefix", ["", "Student", "1st", "stu dent", "-rf", "a" * 25, "st;id", "stü"])
def test_a_prefix_that_would_not_make_user_names_is_refused_with_what_would(prefix: str) -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        check_prefix(prefix)


@pytest.mark.parametrize("count", [0, -1, 201, True, 2.0])
def test_a_seat_count_out_of_range_is_refused(count: object) -> None:
    with pytest.raises(ValueError, match="1 to 200 seats"):
        seat_names("student", count)  # type: ignore[arg-type]


def test_names_that_exist_already_are_the_ones_named() -> None:
    existing = {"student02", "root"}
    assert taken(seat_names("student", 3), existing.__contains__) == ["student02"]
    assert taken(seat_names("student", 3), lambda n: False) == []


def test_a_shared_password_is_one_for_all_and_per_seat_one_each() -> None:
    names = seat_names("student", 30)
    shared = seat_secrets(names, "shared")
    assert set(shared) == set(names) and len(set(shared.values())) == 1
    each = seat_secrets(names, "per-seat")
    assert len(set(each.values())) == 30
    # readable aloud: no look-alikes, three groups of four
    for secret in each.values():
        assert len(secret) == 14 and secret.count("-") == 2
        assert not set(secret) & set("0O1lI")
    with pytest.raises(ValueError, match="shared, per-seat"):
        seat_secrets(names, "none")
