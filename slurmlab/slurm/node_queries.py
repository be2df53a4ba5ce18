"""What the cluster is made of: nodes (with their GRES in use), node states, partitions, and the inventory
a request is validated against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
from slurmlab.core.slurm.models import Node, Partition
from slurmlab.core.slurm.parse_json import JSONRecord, parse_nodes_json, parse_partitions_json
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_nodes,
    parse_scontrol_partitions,
    parse_sinfo_node_states,
)
from slurmlab.errors import ParseError, SlurmError
from slurmlab.slurm.controller import SCONTROL_JSON_SINCE, aslurm_version, slurm_version
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.query import Listing, Query, arun_query, read_json, run_query
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = [
    "alist_nodes",
    "build_inventory",
    "default_partition",
    "inventory",
    "list_nodes",
    "list_partitions",
    "node_states",
    "node_states_of",
    "show_node",
]

R = TypeVar("R")


class _FromJson(Protocol[R]):
    def __call__(self, doc: JSONRecord, *, problems: list[ParseError] | None = None) -> list[R]: ...


class _FromText(Protocol[R]):
    def __call__(self, text: str, *, problems: list[ParseError] | None = None) -> list[R]: ...


def _scontrol_listing(
    version: tuple[int, ...],
    what: str,
    text_flags: tuple[str, ...],
    from_json: _FromJson[R],
    from_text: _FromText[R],
) -> Query[Listing[R]]:
    """``scontrol show <what>``, as JSON where the version has it, read into a Listing either way."""
    json_form = version >= SCONTROL_JSON_SINCE

    def parse(result: RunResult) -> Listing[R]:
        problems: list[ParseError] = []
        if json_form:
            found = from_json(read_json(result), problems=problems)
        else:
            found = from_text(result.stdout, problems=problems)
        return Listing(found, problems)

    argv = ("scontrol", "--json", "show", what) if json_form else ("scontrol", "show", what, *text_flags)
    return Query(argv, parse)


def _nodes_query(version: tuple[int, ...]) -> Query[Listing[Node]]:
    return _scontrol_listing(version, "node", ("-d",), parse_nodes_json, parse_scontrol_nodes)


def _partitions_query(version: tuple[int, ...]) -> Query[Listing[Partition]]:
    return _scontrol_listing(version, "partition", (), parse_partitions_json, parse_scontrol_partitions)


def list_nodes(runner: Runner | None = None) -> Listing[Node]:
    """Every node with configured and used GRES (GPU indices in use, shards per GPU)."""
    runner = runner or get_runner()
    return run_query(_nodes_query(slurm_version(runner)), runner)


def show_node(name: str, runner: Runner | None = None) -> Node | None:
    """One node, with its GRES in use (``gpu:h100:3(IDX:0,2-3)``); None when Slurm has no node of that name."""
    runner = runner or get_runner()
    query = _nodes_query(slurm_version(runner))
    argv = [*query.argv, name]
    result = runner.run(argv, check=False)
    # "Node nodeX not found" comes on stdout with exit 1 (text), or among the JSON document's errors
    if not result.ok:
        if "not found" in (result.stdout + result.stderr).lower():
            return None
        raise classify_failure(argv, result.returncode, result.stderr or result.stdout)
    try:
        nodes = query.parse(result)
    except SlurmError as exc:
        if "not found" in str(exc).lower():
            return None
        raise
    return next((n for n in nodes if n.name == name), None)


async def alist_nodes(runner: Runner | None = None) -> Listing[Node]:
    runner = runner or get_runner()
    return await arun_query(_nodes_query(await aslurm_version(runner)), runner)


def _node_states_query(nodes: Sequence[str] = ()) -> Query[dict[str, str]]:
    only = ("-n", ",".join(nodes)) if nodes else ()
    return Query(("sinfo", "-h", "-N", *only, "-o", "%N|%T"), lambda r: parse_sinfo_node_states(r.stdout))


def node_states(runner: Runner | None = None) -> dict[str, str]:
    """node -> state (``idle``, ``mixed``, ``down*`` ...): the cheapest look at the nodes."""
    return run_query(_node_states_query(), runner)


def node_states_of(nodes: Sequence[str], runner: Runner | None = None) -> dict[str, str]:
    """:func:`node_states` of some nodes only (the poller's look at its running jobs' nodes)."""
    if not nodes:
        return {}
    return run_query(_node_states_query(nodes), runner)


def list_partitions(runner: Runner | None = None) -> Listing[Partition]:
    runner = runner or get_runner()
    return run_query(_partitions_query(slurm_version(runner)), runner)


def _parse_sinfo_default(result: RunResult) -> str | None:
    for line in result.stdout.split():
        if line.endswith("*") and len(line) > 1:
            return line[:-1]
    return None


_DEFAULT_PARTITION: Query[str | None] = Query(("sinfo", "-h", "-o", "%P"), _parse_sinfo_default)


def default_partition(runner: Runner | None = None) -> str | None:
    """The default partition as ``sinfo`` marks it (``gpu*``); None when none is marked.

    ``scontrol --json show partition`` of 24.11+ (data_parser v0.0.42+) carries no flags, so a
    default read from JSON is unknown rather than absent; sinfo says it on every version."""
    return run_query(_DEFAULT_PARTITION, runner)


def build_inventory(nodes: Sequence[Node], partitions: Sequence[Partition]) -> ClusterInventory:
    """Pure: a ClusterInventory from parsed nodes and partitions."""
    inv_nodes = []
    for n in nodes:
        shards = sum(g.count or 0 for g in n.gres if g.name == "shard")
        mps = sum(g.count or 0 for g in n.gres if g.name == "mps")
        other: dict[str, int] = {}
        for g in n.gres:
            if g.name not in ("gpu", "shard", "mps"):
                other[g.name] = other.get(g.name, 0) + (g.count if g.count is not None else 1)
        inv_nodes.append(
            NodeInventory(
                n.name,
                cpus=n.cpus or 0,
                memory_mb=n.real_memory_mb or 0,
                sockets=n.sockets or 1,
                gpus=n.gpu_types(),
                shards=shards,
                mps=mps,
                features=n.features,
                gres=other,
            )
        )
    known = {n.name for n in nodes}
    parts = {p.name: [m for m in p.nodes if m in known] for p in partitions}
    default = next((p.name for p in partitions if p.default), None)
    max_time = {p.name: p.max_time for p in partitions if p.max_time is not None}
    return ClusterInventory.build(nodes=inv_nodes, partitions=parts, default=default, max_time=max_time)


def inventory(runner: Runner | None = None) -> ClusterInventory:
    """What the cluster offers, per partition, for validating a request before it is submitted."""
    runner = runner or get_runner()
    partitions = list_partitions(runner)
    if not any(p.default for p in partitions) and any(p.default is None for p in partitions):
        name = default_partition(runner)
        partitions = Listing([replace(p, default=p.name == name) for p in partitions], partitions.problems)
    return build_inventory(list_nodes(runner), partitions)
