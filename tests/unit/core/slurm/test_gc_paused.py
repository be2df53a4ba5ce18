"""A large Slurm answer is parsed with the cyclic collector paused, and the collector always comes back as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from slurmlab.core.slurm.json_fields import LARGE_ANSWER, each_record, gc_paused
from slurmlab.core.slurm.parse_json import load_json
from slurmlab.errors import ParseError


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_large_record_list_is_read_with_the_collector_off_and_it_comes_back() -> None:
    seen: list[bool] = []
    each_record([{"n": i} for i in range(LARGE_ANSWER)], lambda r: seen.append(gc.isenabled()), None)
    assert seen and not any(seen) and gc.isenabled()
    seen.clear()
    each_record([{"n": 1}], lambda r: seen.append(gc.isenabled()), None)  # a small answer: not worth it
    assert seen == [True]


def test_a_failing_large_parse_turns_it_back_on() -> None:
    items: list[object] = [{"n": i} for i in range(LARGE_ANSWER)] + ["not a record"]
    with pytest.raises(ParseError, match="expected a JSON object"):
        each_record(items, lambda r: r, None)
    assert gc.isenabled()
    with pytest.raises(ParseError, match="invalid JSON"):
        load_json("[" + "1," * LARGE_ANSWER * 1000 + "oops]")
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_program_stays_off_and_nesting_is_safe() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()
    gc.enable()
    with gc_paused():
        with gc_paused():  # an inner parse (a JSON answer inside a record) must not turn it on early
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_jobs_parser_pauses_the_collector_only_for_a_large_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slurmlab.core.slurm import json_jobs

    seen: list[bool] = []
    monkeypatch.setattr(json_jobs, "_job", lambda item, shapes, memo: seen.append(gc.isenabled()))
    json_jobs.parse_jobs_json({"jobs": [{"job_id": 1}, {"job_id": 2}]})
    assert seen == [True, True]  # a notebook's few jobs: the program's collector is left alone
    seen.clear()
    json_jobs.parse_jobs_json({"jobs": [{"job_id": i} for i in range(LARGE_ANSWER)]})
    assert len(seen) == LARGE_ANSWER and not any(seen) and gc.isenabled()
