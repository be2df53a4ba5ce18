"""The server's node tracker on recorded Slurm 22.05 output: one brief ``sinfo -N`` per poll, a node's detail
asked again only when its line changed (or all of them on a slow cadence), and the same views as listing every
node at every poll."""

from __future__ import annotations

from pathlib import Path

from fake_slurm import cluster

from slurmlab.core.slurm.models import Job, Node
from slurmlab.server.nodetracker import FULL_EVERY_S, NODE_BRIEF_ARGV, NodeTracker, NodeViews, brief_lines
from slurmlab.server.views import nodes_view
from slurmlab.slurm import queries
from slurmlab.testing import FakeRunner
from slurmlab.testing.fake_runner import golden_dir

LISTING = ["scontrol", "show", "node", "-d"]
ONE = ["scontrol", "show", "node", "-d", ...]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _brief(fake: FakeRunner) -> list[str]:
    return fake.run(list(NODE_BRIEF_ARGV)).stdout.splitlines()


def _node_block(name: str) -> str:
    text = (Path(golden_dir()) / "22.05" / "s08_scontrol_show_node_d.txt").read_text()
    return next(b for b in text.split("\n\n") if b.startswith(f"NodeName={name} ")) + "\n"


def _listings(fake: FakeRunner) -> int:
    return sum(1 for argv in fake.called(ONE) if argv == LISTING)


def test_first_poll_lists_every_node_and_a_quiet_one_asks_only_the_brief(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    tracker = NodeTracker(_Clock())
    first = tracker.poll(fake_runner)
    assert [n.name for n in first] == sorted(n.name for n in queries.list_nodes(fake_runner))
    assert first == sorted(queries.list_nodes(fake_runner), key=lambda n: n.name)
    assert tracker.fetched == ["*"]
    asked = len(fake_runner.called(ONE))
    again = tracker.poll(fake_runner)
    assert again == first and tracker.fetched == []
    assert len(fake_runner.called(ONE)) == asked  # no node detail asked
    assert len(fake_runner.called(list(NODE_BRIEF_ARGV))) >= 2


def test_a_changed_line_asks_that_node_only(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    tracker = NodeTracker(_Clock())
    first = {n.name: n for n in tracker.poll(fake_runner)}
    lines = _brief(fake_runner)
    moved = [ln.replace("|mixed|", "|allocated|") if ln.startswith("node2|") else ln for ln in lines]
    assert moved != lines
    fake_runner.on(list(NODE_BRIEF_ARGV), stdout="\n".join(moved) + "\n")
    changed = _node_block("node2").replace("State=MIXED", "State=ALLOCATED", 1)
    fake_runner.on(["scontrol", "show", "node", "-d", "node2"], stdout=changed)
    listings = _listings(fake_runner)
    now = {n.name: n for n in tracker.poll(fake_runner)}
    assert tracker.fetched == ["node2"]
    assert _listings(fake_runner) == listings  # not the whole listing
    assert now["node1"] is first["node1"]  # kept as it was
    assert now["node2"].state == "ALLOCATED" and first["node2"].state == "MIXED"


def test_a_new_node_garbage_or_the_slow_cadence_lists_them_all(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    clock = _Clock()
    tracker = NodeTracker(clock)
    tracker.poll(fake_runner)
    lines = _brief(fake_runner)
    for text in (
        "\n".join([*lines, "node3|idle|0/112/0/112"]),  # a node more
        "\n".join([*lines, "garbage with spaces | and | pipes"]),  # a line of another shape
        "\0\n" + "\n".join(lines),
    ):
        fake_runner.on(list(NODE_BRIEF_ARGV), stdout=text + "\n")
        listings = _listings(fake_runner)
        tracker.poll(fake_runner)
        assert tracker.fetched == ["*"] and _listings(fake_runner) == listings + 1, text
    fake_runner.on(list(NODE_BRIEF_ARGV), stdout="\n".join(lines) + "\n")
    tracker.poll(fake_runner)
    tracker.poll(fake_runner)
    assert tracker.fetched == []
    clock.now += FULL_EVERY_S
    tracker.poll(fake_runner)
    assert tracker.fetched == ["*"]


def test_brief_lines_reads_slurms_shape_and_sets_aside_the_rest() -> None:
    lines, bad = brief_lines(
        "node1|mixed|7/105/0/112\nnode1|mixed|7/105/0/112\n\nx y|idle|0/1/0/1\nnode2|idle\n"
        "node3|down*|0/0/112/112\n|idle|0/1/0/1\n"
    )
    assert lines == {"node1": "node1|mixed|7/105/0/112", "node3": "node3|down*|0/0/112/112"}
    assert bad == ["x y|idle|0/1/0/1", "node2|idle", "|idle|0/1/0/1"]


def test_node_views_are_built_again_only_where_the_node_or_its_jobs_changed(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    nodes: list[Node] = sorted(queries.list_nodes(fake_runner), key=lambda n: n.name)
    jobs: list[Job] = list(queries.list_jobs(fake_runner, all_users=True))
    holding = {a.node for j in jobs for a in j.gpu_allocs}
    assert holding, "the recording has jobs holding GPUs"
    cache = NodeViews()
    views, bodies = cache.build(nodes, jobs)
    assert views == nodes_view(nodes, jobs)
    again, bodies2 = cache.build(nodes, jobs)
    assert all(a is b for a, b in zip(again, views, strict=True))  # nothing rebuilt
    assert bodies2 == bodies
    # the jobs on one node end: only that node's view is built again, and it now shows no job
    gone = sorted(holding)[0]
    rest = [j for j in jobs if all(a.node != gone for a in j.gpu_allocs)]
    touched = {a.node for j in jobs if j not in rest for a in j.gpu_allocs}
    third, _ = cache.build(nodes, rest)
    assert third == nodes_view(nodes, rest)
    for old, new, node in zip(views, third, nodes, strict=True):
        assert (old is new) == (node.name not in touched), node.name
    assert all(not slot["jobs"] for slot in third[[n.name for n in nodes].index(gone)]["gpus"])
