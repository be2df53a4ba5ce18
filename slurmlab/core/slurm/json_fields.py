"""Readers of the fields of Slurm's JSON records, whichever layout printed them (openapi v0.0.38 to data_parser
v0.0.45): numbers plain or ``{set, infinite, number}``, states a string or a list, ``exit_code`` a raw wait
status or an object. A value of the wrong shape is a ParseError naming the field, never a silent default."""

from __future__ import annotations

import contextlib
import gc
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import TypeAlias, TypeVar

from slurmlab.core.slurm.models import ExitStatus
from slurmlab.errors import ParseError

__all__ = [
    "JSONRecord",
    "as_object",
    "each_record",
    "excerpt",
    "exit_status",
    "free_text",
    "gc_paused",
    "number",
    "record_id",
    "record_list",
    "seconds_from_minutes",
    "state_and_flags",
    "text_list",
    "text_or_none",
]

# A decoded JSON object as Slurm printed it: its values are checked by the readers below, never trusted.
JSONRecord: TypeAlias = Mapping[str, object]

# Slurm's numbers are at most 64 bits; past that a value is corrupt, not a count
_NUM_LIMIT = 2**64
_NULL_TEXTS = frozenset(("", "(null)", "N/A"))
# from this many records (or bytes of JSON text) a parse runs with the cyclic collector paused
LARGE_ANSWER = 1000


@contextlib.contextmanager
def gc_paused(large: bool = True) -> Iterator[None]:
    """The cyclic garbage collector paused while a large Slurm answer is read. The parse makes tens of thousands
    of objects, none in a cycle, and every collection meanwhile walks the whole decoded document: a third of the
    parse time at 10,000 jobs. Only the call that turned it off turns it back on, so one that ends while another
    thread parses cannot leave it off, and a program that turned it off itself keeps it off."""
    was_on = large and gc.isenabled()
    if was_on:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def excerpt(obj: object) -> str:
    """The start of a value as JSON, for an error message."""
    try:
        return json.dumps(obj, default=str)[:300]
    except (ValueError, RecursionError):
        return repr(type(obj))


def as_object(value: object, what: str) -> JSONRecord:
    """A JSON object that may be absent (-> {}); anything else is a ParseError."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(what, excerpt(value), hint="expected a JSON object")
    return value


def number(value: object, what: str = "number") -> int | None:
    """A plain number or ``{set, infinite, number}``; None when unset or infinite."""
    # the two shapes Slurm prints, checked first: this runs a dozen times per job of a 10,000-job queue
    if type(value) is int:
        if -_NUM_LIMIT < value < _NUM_LIMIT:
            return value
    elif type(value) is dict:
        inner = value.get("number")
        if (
            type(inner) is int
            and -_NUM_LIMIT < inner < _NUM_LIMIT
            and value.get("set") is True
            and value.get("infinite") is False
        ):
            return inner
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and abs(value) < _NUM_LIMIT:
        return value
    if isinstance(value, float) and math.isfinite(value) and abs(value) < _NUM_LIMIT:
        return int(value)
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite") or not value.get("set", True):
            return None
        inner = value["number"]
        if isinstance(inner, (dict, list)):
            raise ParseError(
                what, excerpt(value), hint="the number of {set, infinite, number} is not a number"
            )
        return number(inner, what)
    if isinstance(value, str) and 0 < len(value) <= 20 and value.isascii() and value.isdigit():
        return int(value)
    raise ParseError(what, excerpt(value), hint="expected a number or {set, infinite, number}")


def seconds_from_minutes(value: object, what: str) -> int | None:
    """A number of minutes (Slurm's unit of time limits) in seconds; None when unset or infinite."""
    n = number(value, what)
    return None if n is None else n * 60


def state_and_flags(value: object, what: str) -> tuple[str, tuple[str, ...]]:
    """A state string, or a list whose first entry is the base state and the rest its flags."""
    if isinstance(value, str) and value:
        return value.upper(), ()
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value[0].upper(), tuple(v.upper() for v in value[1:])
    raise ParseError(what, excerpt(value), hint="expected a state string or a list of states")


def text_or_none(value: object, what: str = "text field") -> str | None:
    """A string field; None when absent or Slurm's empty (``""``, ``(null)``, ``N/A``)."""
    if type(value) is str:
        return value if value.strip() not in _NULL_TEXTS else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ParseError(what, excerpt(value), hint="expected a string")
    if not isinstance(value, str):
        number(value, what)  # a number Slurm could print, not 10**400 or NaN
        return str(value)
    return value if value.strip() not in _NULL_TEXTS else None


def free_text(value: object, what: str) -> str:
    """A free-text field kept as written (a name of "N/A" is that name)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return text_or_none(value, what) or ""


def text_list(value: object) -> tuple[str, ...]:
    """A list of strings, or one comma-separated string."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v for v in value.split(",") if v)
    if isinstance(value, list):
        return tuple(text_or_none(v, "list entry") or "" for v in value)
    raise ParseError("list", excerpt(value))


def exit_status(value: object) -> ExitStatus | None:
    """``exit_code``: a raw wait status (22.05) or ``{status, return_code, signal}``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return ExitStatus.from_wait_status(value)
    if isinstance(value, dict):
        code = number(value.get("return_code"), "exit_code.return_code") or 0
        signal_obj = value.get("signal") or {}
        sig = number(signal_obj.get("id"), "exit_code.signal.id") if isinstance(signal_obj, dict) else None
        status_list = value.get("status")
        status = (
            text_or_none(status_list[0], "exit_code.status")
            if isinstance(status_list, list) and status_list
            else None
        )
        return ExitStatus(code=code, signal=sig or 0, status=status)
    raise ParseError(
        "exit_code", excerpt(value), hint="expected a wait status or {status, return_code, signal}"
    )


def record_list(doc: JSONRecord, key: str, what: str) -> list[object]:
    """The list of records under ``key`` (``jobs``, ``nodes`` …) of a document."""
    items = doc.get(key)
    if not isinstance(items, list):
        raise ParseError(what, excerpt(doc), hint=f"the JSON has no {key!r} list")
    return items


_T = TypeVar("_T")


def record_id(item: object, *keys: str) -> str | None:
    """The id of a record for an error message (the first of ``keys`` it has as a short string or number)."""
    for key in keys:
        value = item.get(key) if isinstance(item, dict) else None
        if isinstance(value, dict):
            value = value.get("number")
        if isinstance(value, str) and 0 < len(value) <= 200:
            return value
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _NUM_LIMIT:
            return str(value)
    return None


def each_record(
    items: list[object], build: Callable[[JSONRecord], _T], problems: list[ParseError] | None, *id_keys: str
) -> list[_T]:
    """``build`` over the records; one that fails is reported in ``problems`` (when given)."""
    out: list[_T] = []
    with gc_paused(len(items) >= LARGE_ANSWER):
        for i, item in enumerate(items):
            try:
                if not isinstance(item, dict):
                    raise ParseError(f"entry {i}", excerpt(item), hint="expected a JSON object")
                out.append(build(item))
            except ParseError as exc:
                err = exc.for_record(record_id(item, *id_keys))  # only a failure needs the id
                if problems is None:
                    raise err from None
                problems.append(err)
    return out
