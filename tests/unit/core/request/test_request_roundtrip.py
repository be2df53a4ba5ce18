"""Property: rendering a request and reading it back gives the same request."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmlab.core.request.explain import explain
from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
from slurmlab.core.request.request import (
    GRES_FLAGS,
    GpuBind,
    GpuCount,
    GpuRequest,
    GresSpec,
    Memory,
    NodeCount,
    RequestProblems,
    TimeLimit,
    parse_request,
)
from slurmlab.core.request.validate import validate

CLUSTER = ClusterInventory.build(
    nodes=[
        NodeInventory("node1", cpus=48, memory_mb=64000, sockets=2, gpus={"h100": 4}, shards=16),
        NodeInventory("node3", cpus=32, memory_mb=32000, sockets=2, gpus={"1g.18gb": 4, "3g.71gb": 1}),
    ],
    partitions={"gpu": ["node1"], "mig": ["node3"]},
    default="gpu",
)

# type names Slurm accepts and cannot mistake for a count (all digits would read as a count)
gpu_types = st.from_regex(r"\A[a-z][a-z0-9_.\-]{0,9}\Z")
counts = st.integers(min_value=0, max_value=4096)
positive = st.integers(min_value=1, max_value=4096)
words = st.from_regex(r"\A[A-Za-z0-9_./@=+\-][A-Za-z0-9_./@=+ \-]{0,15}\Z")

gpu_counts = st.builds(GpuCount, counts, st.none() | gpu_types)
gres_specs = st.builds(
    GresSpec,
    st.sampled_from(["gpu", "shard", "mps", "fpga", "nic"]),
    st.none() | gpu_types,
    st.none() | counts,
)
gpu_binds = st.one_of(
    st.builds(GpuBind, st.sampled_from(["closest", "none"]), st.none(), st.booleans()),
    st.builds(GpuBind, st.sampled_from(["single", "per_task"]), positive.map(str), st.booleans()),
    st.builds(
        GpuBind,
        st.just("map_gpu"),
        st.lists(st.integers(0, 15), min_size=1, max_size=4).map(lambda xs: ",".join(map(str, xs))),
        st.booleans(),
    ),
    st.builds(
        GpuBind,
        st.just("mask_gpu"),
        st.lists(st.integers(1, 255), min_size=1, max_size=4).map(lambda xs: ",".join(hex(x) for x in xs)),
        st.booleans(),
    ),
)
node_counts = st.one_of(
    st.builds(NodeCount, positive),
    st.tuples(positive, positive).map(lambda t: NodeCount(min(t), max(t))),
)
times = st.builds(TimeLimit, st.none() | st.integers(min_value=0, max_value=400 * 86400))
memories = st.builds(Memory, st.integers(min_value=0, max_value=2**40))
extras = st.lists(
    st.one_of(
        st.just(("--no-shell",)),
        st.just(("--overlap",)),
        st.builds(lambda v: (f"--frob={v}",), st.from_regex(r"\A[a-z0-9]{1,6}\Z")),
        st.builds(lambda v: ("-o", v), st.from_regex(r"\A[a-z][a-z0-9.%]{0,8}\Z")),
    ),
    max_size=3,
).map(tuple)
commands = st.lists(words, max_size=3).map(tuple)

requests = st.builds(
    GpuRequest,
    partition=st.none() | st.from_regex(r"\A[a-z][a-z0-9,]{0,8}\Z"),
    account=st.none() | words,
    qos=st.none() | words,
    reservation=st.none() | words,
    job_name=st.none() | words,
    time=st.none() | times,
    nodes=st.none() | node_counts,
    ntasks=st.none() | positive,
    ntasks_per_node=st.none() | positive,
    cpus_per_task=st.none() | positive,
    gpus=st.none() | gpu_counts,
    gpus_per_node=st.none() | gpu_counts,
    gpus_per_task=st.none() | gpu_counts,
    gpus_per_socket=st.none() | gpu_counts,
    gres=st.lists(gres_specs, max_size=3).map(tuple),
    gres_flags=st.lists(st.sampled_from(GRES_FLAGS), max_size=2).map(tuple),
    gpu_bind=st.none() | gpu_binds,
    cpu_bind=st.none() | st.sampled_from(["cores", "sockets", "verbose,rank", "map_cpu:0,1", "none"]),
    cpus_per_gpu=st.none() | positive,
    mem=st.none() | memories,
    mem_per_gpu=st.none() | memories,
    mem_per_cpu=st.none() | memories,
    gpu_freq=st.none() | words,
    mpi=st.none() | st.sampled_from(["pmi2", "pmix", "none"]),
    exclusive=st.none() | st.sampled_from(["", "user", "mcs", "topo"]),
    nodelist=st.none() | st.from_regex(r"\Anode\[1-[2-9]\](,gpu0[1-9])?\Z"),
    exclude=st.none() | st.from_regex(r"\Anode[0-9]{1,2}\Z"),
    constraint=st.none() | st.from_regex(r"\A[a-z0-9]{1,5}([&|][a-z0-9]{1,5})?\Z"),
    comment=st.none() | words,
    extra=extras,
    command=commands,
)


@settings(max_examples=300, deadline=None)
@given(requests)
def test_parse_of_to_argv_is_identity(request: GpuRequest) -> None:
    argv = request.to_argv()
    assert all(isinstance(tok, str) for tok in argv)
    assert parse_request(argv) == request


@settings(max_examples=100, deadline=None)
@given(requests)
def test_rendering_is_stable(request: GpuRequest) -> None:
    once = request.to_argv()
    assert parse_request(once).to_argv() == once


@settings(max_examples=200, deadline=None)
@given(requests)
def test_explain_and_validate_never_fail_from_deep_inside(request: GpuRequest) -> None:
    text = explain(request)
    assert text and "None" not in text
    # the phrase itself, not a GPU type that happens to be called "no" ("0 no GPUs per socket")
    assert (re.search(r"(?:^|, )no GPUs\b", text) is not None) == (
        not request.gpu_options and not any(s.name != "none" for s in request.gres)
    )
    try:
        validate(request, CLUSTER)
    except RequestProblems as err:
        assert err.problems and all(pr.message and pr.hint for pr in err.problems)
