"""Nodes from ``scontrol --json show node`` (``nodes[]``) and ``sinfo --json`` (22.05 ``nodes[]``, newer
``sinfo[]`` with one entry per node x partition, merged here into one Node per name with its partitions)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.json_fields import (
    JSONRecord,
    as_object,
    each_record,
    excerpt,
    number,
    record_list,
    state_and_flags,
    text_list,
    text_or_none,
)
from slurmlab.core.slurm.models import Node
from slurmlab.errors import ParseError

__all__ = ["parse_nodes_json"]


def _node(n: JSONRecord) -> Node:
    name = text_or_none(n.get("name"))
    if name is None:
        raise ParseError("node", excerpt(n), hint="the node has no name")
    state, flags = state_and_flags(n.get("state"), f"state of node {name}")
    extra_flags = tuple(f.upper() for f in text_list(n.get("state_flags")))
    return Node(
        name=name,
        state=state,
        state_flags=flags + extra_flags,
        partitions=text_list(n.get("partitions")),
        cpus=number(n.get("cpus")),
        alloc_cpus=number(n.get("alloc_cpus")),
        real_memory_mb=number(n.get("real_memory")),
        alloc_memory_mb=number(n.get("alloc_memory")),
        features=text_list(n.get("features")),
        gres=parse_gres(text_or_none(n.get("gres"))),
        gres_used=parse_gres(text_or_none(n.get("gres_used"))),
        reason=text_or_none(n.get("reason")),
        sockets=number(n.get("sockets"), "sockets"),
        cores_per_socket=number(n.get("cores"), "cores"),
        threads_per_core=number(n.get("threads"), "threads"),
    )


def _sinfo_nodes(entries: Iterable[JSONRecord]) -> list[Node]:
    merged: dict[str, Node] = {}
    for e in entries:
        nodes_obj = e.get("nodes") or {}
        names = nodes_obj.get("nodes") if isinstance(nodes_obj, dict) else None
        if not isinstance(names, list) or not names:
            raise ParseError("sinfo entry", excerpt(e), hint="the entry names no nodes")
        state, flags = state_and_flags(
            as_object(e.get("node"), "sinfo node").get("state"), "sinfo node state"
        )
        gres_obj = as_object(e.get("gres"), "sinfo gres")
        cpus_obj = as_object(e.get("cpus"), "sinfo cpus")
        mem_obj = as_object(e.get("memory"), "sinfo memory")
        part = text_or_none(as_object(e.get("partition"), "sinfo partition").get("name"), "partition name")
        reason_obj = e.get("reason")
        reason = (
            text_or_none(reason_obj.get("description"))
            if isinstance(reason_obj, dict)
            else text_or_none(reason_obj)
        )
        single = len(names) == 1
        features = text_list(as_object(e.get("features"), "sinfo features").get("total"))
        for raw_name in names:
            name = text_or_none(raw_name, "sinfo node name")
            if name is None:
                raise ParseError("sinfo entry", excerpt(e), hint="a node without a name")
            prev = merged.get(name)
            parts = (prev.partitions if prev else ()) + (
                (part,) if part and (not prev or part not in prev.partitions) else ()
            )
            merged[name] = Node(
                name=name,
                state=state,
                state_flags=flags,
                partitions=parts,
                cpus=number(cpus_obj.get("maximum")),
                alloc_cpus=number(cpus_obj.get("allocated")) if single else None,
                real_memory_mb=number(mem_obj.get("maximum")),
                alloc_memory_mb=number(mem_obj.get("allocated")) if single else None,
                features=features,
                gres=parse_gres(text_or_none(gres_obj.get("total"))),
                gres_used=parse_gres(text_or_none(gres_obj.get("used"))),
                reason=reason,
            )
    return list(merged.values())


def _sinfo_nodes_merge(nodes: list[Node]) -> list[Node]:
    """One Node per name from sinfo's node x partition entries: the last entry's values, every partition."""
    merged: dict[str, Node] = {}
    for node in nodes:
        prev = merged.get(node.name)
        if prev is not None:
            extra = tuple(p for p in node.partitions if p not in prev.partitions)
            node = replace(node, partitions=prev.partitions + extra)
        merged[node.name] = node
    return list(merged.values())


def parse_nodes_json(doc: JSONRecord, *, problems: list[ParseError] | None = None) -> list[Node]:
    """``scontrol --json show node`` and ``sinfo --json`` (22.05 ``nodes[]`` or newer ``sinfo[]``).
    ``problems``: as for jobs (a bad sinfo entry is left out, the others still merge)."""
    if "sinfo" in doc:
        entries = each_record(record_list(doc, "sinfo", "sinfo JSON"), lambda e: _sinfo_nodes([e]), problems)
        return _sinfo_nodes_merge([n for nodes in entries for n in nodes])
    return each_record(record_list(doc, "nodes", "nodes JSON"), _node, problems, "name")
