"""The nodes of a cluster, kept up to date from one cheap listing per poll (issue 14: "nodes incrementally").

Listing every node's detail at each poll (``scontrol show node -d`` or its JSON: 1,000 records) and rebuilding
every node's view cost more than the rest of a quiet poll. Instead each poll asks for one short line per node
(``sinfo -h -N -o '%N|%T|%C'``: name, state, CPUs allocated/idle/other/total) and:

* a node whose line reads as it did when its detail was fetched keeps that detail: a job that starts or ends
  on a node changes its allocated CPUs (every job holds at least one), a drain or a failure its state;
* only the nodes whose line changed have their detail asked again: one by one when a few did, one listing
  when many did;
* the whole listing is asked again when the set of nodes changed, when a record could not be read, and at
  least every :data:`FULL_EVERY_S` seconds (what the brief line cannot show: a changed reason or feature).

:class:`NodeViews` keeps each node's view (and its JSON) while neither the node's detail nor the jobs on it
changed, so that a quiet poll builds no view at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slurmlab.core.slurm.models import Job, Node
from slurmlab.errors import ParseError
from slurmlab.server.cache import ResponseCache
from slurmlab.server.contract import NodeView
from slurmlab.server.views import jobs_by_node, node_view
from slurmlab.slurm import queries
from slurmlab.slurm.node_queries import show_node
from slurmlab.slurm.query import Listing, Query, run_query

__all__ = ["DETAIL_ONE_BY_ONE", "FULL_EVERY_S", "NODE_BRIEF_ARGV", "NodeTracker", "NodeViews"]

# Up to this many changed nodes are asked one by one (`scontrol show node -d NAME`); more in one listing.
DETAIL_ONE_BY_ONE = 8
# Five minutes (issue 27): the whole-cluster poll itself comes once a minute, and a detail listing at every one
# of them would double its cost to the controller for what changes seldom (a reason, a feature).
FULL_EVERY_S = 300.0
NODE_BRIEF_ARGV: tuple[str, ...] = ("sinfo", "-h", "-N", "-o", "%N|%T|%C")
_BRIEF_NODES: Query[str] = Query(NODE_BRIEF_ARGV, lambda r: r.stdout)


def brief_lines(text: str) -> tuple[dict[str, str], list[str]]:
    """node -> its brief line (a node in several partitions is listed once per partition, alike), and the lines
    that do not have the brief's shape (``NAME|STATE|A/I/O/T``)."""
    lines: dict[str, str] = {}
    bad: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        name, sep, rest = line.partition("|")
        if not sep or not name or " " in name or rest.count("|") != 1:
            bad.append(line)
            continue
        lines[name] = line
    return lines, bad


class NodeTracker:
    """One cluster's nodes across polls (kept where the polls run: the worker process)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._nodes: dict[str, Node] = {}
        self._brief: dict[str, str] = {}  # node -> its brief line when its detail was fetched
        self._names: frozenset[str] = frozenset()  # the nodes the brief listed at the last whole listing
        self._problems: list[ParseError] = []
        self._full_at: float | None = None
        self.fetched: list[str] = []  # the nodes whose detail the last poll asked for ("*": all of them)

    def poll(self, runner: Any) -> Listing[Node]:
        """Every node (sorted by name) with its detail, and the records that could not be read."""
        brief, bad = brief_lines(run_query(_BRIEF_NODES, runner))
        changed = [name for name, line in brief.items() if self._brief.get(name) != line]
        due = self._full_at is None or self._clock() - self._full_at >= FULL_EVERY_S
        if (
            due
            or bad
            or self._problems
            or frozenset(brief) != self._names
            or len(changed) > DETAIL_ONE_BY_ONE
        ):
            self._whole(runner, brief)
        elif changed:
            self._some(runner, brief, changed)
        else:
            self.fetched = []
        return Listing([self._nodes[n] for n in sorted(self._nodes)], self._problems)

    def _whole(self, runner: Any, brief: dict[str, str]) -> None:
        listing = queries.list_nodes(runner)
        self._nodes = {n.name: n for n in listing}
        self._problems = list(getattr(listing, "problems", ()))
        self._brief, self._names, self._full_at = dict(brief), frozenset(brief), self._clock()
        self.fetched = ["*"]

    def _some(self, runner: Any, brief: dict[str, str], changed: list[str]) -> None:
        for name in changed:
            node = show_node(name, runner)
            if node is None:  # gone between the two calls: the next poll lists them all
                self._full_at = None
                continue
            self._nodes[name] = node
            self._brief[name] = brief[name]
        self.fetched = changed


@dataclass
class _Built:
    node: Node
    jobs: tuple[Job, ...]
    view: NodeView
    body: bytes


class NodeViews:
    """Each node's view and its JSON, built again only when its detail or the jobs holding GPUs on it changed
    (the same objects: the trackers keep a node's or a job's model while it reads the same)."""

    def __init__(self) -> None:
        self._built: dict[str, _Built] = {}

    def build(self, nodes: Sequence[Node], jobs: Sequence[Job]) -> tuple[list[NodeView], list[bytes]]:
        """The views of ``nodes`` in the order given (``views.nodes_view`` sorts them by name) and their JSON."""
        index = jobs_by_node(jobs)
        built: dict[str, _Built] = {}
        for node in nodes:
            on = tuple(index.get(node.name, ()))
            old = self._built.get(node.name)
            if old is None or old.node is not node or not _same(old.jobs, on):
                view = node_view(node, on)
                old = _Built(node, on, view, ResponseCache.encode(view))
            built[node.name] = old
        self._built = built
        ordered = [built[n.name] for n in nodes]
        return [b.view for b in ordered], [b.body for b in ordered]


def _same(a: tuple[Job, ...], b: tuple[Job, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
