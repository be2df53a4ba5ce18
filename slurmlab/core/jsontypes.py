"""The shapes of JSON, for the types of what slurmlab decodes and what its models give back.

``JSONValue`` is what ``json.dumps`` can write and ``json.loads`` gives: the honest type of a
model's ``to_dict()``. Decoded input from Slurm is read as ``object`` and narrowed with
``isinstance``, since nothing proves its shape until a parser has looked at it.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONObject", "JSONScalar", "JSONValue"]

JSONScalar: TypeAlias = "str | int | float | bool | None"
JSONValue: TypeAlias = "JSONScalar | list[JSONValue] | dict[str, JSONValue]"
JSONObject: TypeAlias = "dict[str, JSONValue]"
