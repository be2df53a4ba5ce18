"""The sidebar's JSON contract, written once in slurmlab/server/contract.py, held to the TypeScript
interfaces of extensions/slurmlab-lab/src/api.ts field by field, both ways, and to what the server
really sends (no Slurm needed)."""

from __future__ import annotations

import asyncio
import re
import types
import typing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, NotRequired, Union, get_args, get_origin

import pytest

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.models import GresAlloc, Job, Node
from slurmlab.errors import ParseError
from slurmlab.server import contract
from slurmlab.server.cache import ResponseCache
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.views import job_view, nodes_view, problem_view
from slurmlab.server.worker import PollOutcome, encode_answers

API_TS = Path(__file__).resolve().parents[3] / "extensions" / "slurmlab-lab" / "src" / "api.ts"

_INTERFACE = re.compile(r"export interface (\w+)(?:\s+extends\s+([\w\s,]+?))?\s*\{(.*?)\n\}", re.DOTALL)
_FIELD = re.compile(r"^\s*(\w+)(\?)?:\s*(.+?);\s*$")


def _ts_type(text: str) -> frozenset[str]:
    return frozenset(part.strip().replace('"', "'") for part in text.split("|"))


def parse_ts(source: str) -> dict[str, dict[str, tuple[bool, frozenset[str]]]]:
    """interface -> field -> (optional, the union's members), with the fields of what it extends."""
    own: dict[str, dict[str, tuple[bool, frozenset[str]]]] = {}
    parents: dict[str, list[str]] = {}
    for m in _INTERFACE.finditer(source):
        body = re.sub(r"/\*.*?\*/", "", m.group(3), flags=re.DOTALL)
        fields = {}
        for line in body.splitlines():
            if not line.strip() or line.strip().startswith("//"):
                continue
            f = _FIELD.match(line)
            assert f is not None, f"interface {m.group(1)}: cannot read the line {line!r}"
            fields[f.group(1)] = (f.group(2) == "?", _ts_type(f.group(3)))
        own[m.group(1)] = fields
        parents[m.group(1)] = [p.strip() for p in (m.group(2) or "").split(",") if p.strip()]

    def resolved(name: str) -> dict[str, tuple[bool, frozenset[str]]]:
        out: dict[str, tuple[bool, frozenset[str]]] = {}
        for parent in parents[name]:
            out.update(resolved(parent))
        out.update(own[name])
        return out

    return {name: resolved(name) for name in own}


_TS_NAME = {cls: name for name, cls in contract.TS_INTERFACES.items()}


def _as_ts(tp: Any) -> frozenset[str]:
    """A Python annotation written as the TypeScript union it means."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return frozenset().union(*(_as_ts(a) for a in get_args(tp)))
    if origin is Literal:
        return frozenset(f"'{a}'" for a in get_args(tp))
    if origin is list:
        (inner,) = get_args(tp)
        (one,) = _as_ts(inner)
        return frozenset({f"{one}[]"})
    if origin is dict:
        return frozenset({"Record<string, unknown>"})
    simple = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
    if tp in simple:
        return frozenset({simple[tp]})
    if tp in _TS_NAME:
        return frozenset({_TS_NAME[tp]})
    raise AssertionError(f"no TypeScript spelling for {tp!r}: extend _as_ts")


def python_fields(cls: type) -> dict[str, tuple[bool, frozenset[str]]]:
    out = {}
    for name, tp in typing.get_type_hints(cls, include_extras=True).items():
        optional = get_origin(tp) is NotRequired
        out[name] = (optional, _as_ts(get_args(tp)[0] if optional else tp))
    return out


def test_every_interface_has_its_typed_dict_and_back() -> None:
    ts = parse_ts(API_TS.read_text())
    assert set(ts) == set(contract.TS_INTERFACES), (
        f"only in api.ts: {sorted(set(ts) - set(contract.TS_INTERFACES))}; "
        f"only in contract.py: {sorted(set(contract.TS_INTERFACES) - set(ts))}"
    )
    typed_dicts = {getattr(contract, n) for n in contract.__all__ if n != "TS_INTERFACES"}
    assert typed_dicts == set(contract.TS_INTERFACES.values())


@pytest.mark.parametrize("interface", sorted(contract.TS_INTERFACES))
def test_fields_match_both_ways(interface: str) -> None:
    ts = parse_ts(API_TS.read_text())[interface]
    py = python_fields(contract.TS_INTERFACES[interface])
    assert sorted(ts) == sorted(py), (
        f"{interface}: only in api.ts {sorted(set(ts) - set(py))}, only in contract.py {sorted(set(py) - set(ts))}"
    )
    for field, (optional, members) in py.items():
        assert ts[field] == (optional, members), (
            f"{interface}.{field}: api.ts says {ts[field]}, Python {py[field]}"
        )


def test_the_parser_sees_a_difference(tmp_path: Path) -> None:
    # the comparison is real: a field dropped from the TS, or made nullable, shows
    source = API_TS.read_text()
    node = parse_ts(source)["INode"]
    assert node["cpus"] == (False, frozenset({"number", "null"}))
    dropped = parse_ts(source.replace("  alloc_cpus: number | null;\n", "", 1))["INode"]
    assert "alloc_cpus" not in dropped
    assert (
        parse_ts(source.replace("  shards_used: number;", "  shards_used: number | null;", 1))["IGpuSlot"][
            "shards_used"
        ]
        != python_fields(contract.GpuSlot)["shards_used"]
    )


# ---- what the server sends has exactly the contract's keys -------------------------------------------
T0 = datetime(2026, 11, 29, 15, 0, tzinfo=timezone.utc)


def _keys(cls: type) -> tuple[set[str], set[str]]:
    fields = python_fields(cls)
    return {k for k, (opt, _) in fields.items() if not opt}, set(fields)


def _conforms(payload: Any, cls: type) -> None:
    required, every = _keys(cls)
    assert required <= set(payload) <= every, (cls.__name__, sorted(set(payload) ^ required))
    hints = typing.get_type_hints(cls)
    for key in payload:  # nested answers conform too
        inner = hints[key]
        args = [a for a in get_args(inner) if a in _TS_NAME] or ([inner] if inner in _TS_NAME else [])
        if get_origin(inner) is list and get_args(inner)[0] in _TS_NAME:
            for item in payload[key]:
                _conforms(item, get_args(inner)[0])
        elif args and payload[key] is not None:
            _conforms(payload[key], args[0])


def _cluster() -> tuple[list[Node], list[Job]]:
    node = Node(
        name="node1",
        state="MIXED",
        partitions=("gpu",),
        cpus=48,
        alloc_cpus=8,
        gres=parse_gres("gpu:h100:2(S:0-1),gpu:1g.18gb:2,shard:h100:8"),
        gres_used=parse_gres("gpu:h100:1(IDX:0),shard:h100:4(0/4,4/4)"),
    )
    job = Job(
        job_id=7,
        name="j7",
        state="RUNNING",
        user="alice",
        nodelist="node1",
        nodes=("node1",),
        start_time=T0,
        time_limit=3600,
        gpu_allocs=(GresAlloc(node="node1", items=parse_gres("gpu:h100:1(IDX:0),shard:h100:4(0/4,4/4)")),),
    )
    return [node], [job]


def test_views_conform() -> None:
    nodes, jobs = _cluster()
    for view in nodes_view(nodes, jobs):
        _conforms(view, contract.NodeView)
    _conforms(job_view(jobs[0], {7: 0}, 0), contract.JobView)
    _conforms(problem_view(ParseError("job record", "x"), "job"), contract.ProblemView)


class _Source:
    user = "alice"

    async def poll(self, version: str | None = None, whole: bool = True) -> PollOutcome:
        nodes, jobs = _cluster()
        answers = encode_answers(
            nodes_view(nodes, jobs),
            [job_view(j, {7: 0}, 0) for j in jobs],
            [problem_view(ParseError("job record", "x"), "job")],
            self.user,
        )
        return PollOutcome("24.11.5", answers, ("x",))


def test_the_cached_answers_conform() -> None:
    poller = ClusterPoller(_Source(), ResponseCache())  # type: ignore[arg-type]
    asyncio.run(poller.refresh())
    answers = {
        "status": contract.StatusAnswer,
        "nodes": contract.NodesAnswer,
        "queue:all": contract.QueueAnswer,
        "queue:mine": contract.QueueAnswer,
    }
    assert sorted(poller.cache.keys()) == sorted(answers)
    for key, cls in answers.items():
        entry = poller.cache.get(key)
        assert entry is not None
        _conforms(entry.payload, cls)
