"""Slurm hostlist grammar: examples from real output plus property tests."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmlab.core.slurm.hostlist import compress, expand
from slurmlab.errors import ParseError


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("node1", ["node1"]),
        ("node[1-2]", ["node1", "node2"]),
        (
            "node[1-3,7],gpu-a[01-04]",
            ["node1", "node2", "node3", "node7", "gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"],
        ),
        ("node[09-11]", ["node09", "node10", "node11"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("a,b[1],c", ["a", "b1", "c"]),
        ("(null)", []),
        ("", []),
        ("N/A", []),
    ],
)
def test_expand_examples(expr: str, names: list[str]) -> None:
    assert expand(expr) == names


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        (["node1", "node2", "node3", "node7"], "node[1-3,7]"),
        (["gpu-a01", "gpu-a02", "gpu-a03"], "gpu-a[01-03]"),
        (["node9", "node10"], "node[9-10]"),
        (["node1"], "node1"),
        (["login", "node1", "node2"], "login,node[1-2]"),
        ([], ""),
    ],
)
def test_compress_examples(names: list[str], expr: str) -> None:
    assert compress(names) == expr


@pytest.mark.parametrize(
    "bad", ["node[1-", "node]1[", "node[a-b]", "node[3-1]", "node[[1]]", "node[1-2],,x", "no de1"]
)
def test_malformed_hostlist_raises_parse_error_quoting_it(bad: str) -> None:
    with pytest.raises(ParseError) as info:
        expand(bad)
    assert "hostlist" in str(info.value)


def test_compress_refuses_unrepresentable_names() -> None:
    with pytest.raises(ParseError):
        compress(["node[1]"])


_prefix = st.text(alphabet="abcxyz-_.", min_size=0, max_size=4).filter(lambda s: not s[-1:].isdigit())
_name = st.one_of(
    st.builds(
        lambda p, n, w, s: f"{p}{str(n).zfill(w)}{s}",
        _prefix,
        st.integers(0, 130),
        st.integers(1, 4),
        st.sampled_from(["", "-ib", "x"]),
    ),
    st.text(alphabet="abcdef-", min_size=1, max_size=5),
)


@settings(max_examples=500)
@given(st.lists(_name, max_size=25))
def test_expand_of_compress_is_identity(names: list[str]) -> None:
    assert expand(compress(names)) == names


@settings(max_examples=500)
@given(st.lists(st.integers(0, 200), min_size=1, max_size=30, unique=True).map(sorted), st.integers(1, 4))
def test_sorted_runs_compress_to_one_bracket(numbers: list[int], width: int) -> None:
    names = [f"gpu{str(n).zfill(width)}" for n in numbers]
    expr = compress(names)
    assert expand(expr) == names
    assert expr.count("gpu") == 1 or len(names) == 1


@st.composite
def _canonical_expr(draw: st.DrawFn) -> str:
    """A hostlist as Slurm writes it: ascending, non-touching ranges; distinct prefixes per item."""
    prefixes = draw(
        st.lists(st.sampled_from(["node", "gpu-a", "r1n", "x"]), min_size=1, max_size=4, unique=True)
    )
    items = []
    for prefix in prefixes:
        width = draw(st.integers(1, 3))
        runs: list[tuple[int, int]] = []
        for start in sorted(draw(st.lists(st.integers(0, 300), min_size=1, max_size=5, unique=True))):
            if runs and start <= runs[-1][1] + 1:
                continue
            runs.append((start, start + draw(st.integers(0, 3))))
        text = ",".join(
            str(a).zfill(width) if a == b else f"{str(a).zfill(width)}-{str(b).zfill(width)}" for a, b in runs
        )
        single = len(runs) == 1 and runs[0][0] == runs[0][1]
        items.append(f"{prefix}{text}" if single else f"{prefix}[{text}]")
    return ",".join(items)


@settings(max_examples=500)
@given(_canonical_expr())
def test_compress_of_expand_gives_back_canonical_text(expr: str) -> None:
    assert compress(expand(expr)) == expr
