"""The one GRES grammar: every real form, errors, and round-trip properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmlab.core.slurm.gres import GresItem, ShareSlot, parse_gres, parse_gres_item, render_gres
from slurmlab.errors import ParseError


def test_typed_gpu_with_indices() -> None:
    (g,) = parse_gres("gpu:h100:3(IDX:0-2)")
    assert (g.name, g.type, g.count, g.indices) == ("gpu", "h100", 3, (0, 1, 2))


def test_mig_type_and_sockets() -> None:
    a, b = parse_gres("gpu:1g.18gb:4(S:0),gpu:3g.71gb:1(S:1)")
    assert (a.type, a.count, a.sockets) == ("1g.18gb", 4, (0,))
    assert (b.type, b.count, b.sockets) == ("3g.71gb", 1, (1,))
    assert parse_gres_item("gpu:1g.18gb:1(IDX:4)").indices == (4,)


def test_shard_forms_of_22_05_and_24_11() -> None:
    old = parse_gres_item("shard:h100:4(IDX:3)")
    assert (old.name, old.count, old.indices, old.shares) == ("shard", 4, (3,), None)
    new = parse_gres_item("shard:h100:4(0/4,0/4,0/4,4/4)")
    assert new.shares is not None
    assert [(s.index, s.used, s.total) for s in new.shares] == [(0, 0, 4), (1, 0, 4), (2, 0, 4), (3, 4, 4)]
    whole = parse_gres_item("shard:h100:0(-/4,0/4)")
    assert whole.shares == (ShareSlot(0, None, 4), ShareSlot(1, 0, 4))
    assert parse_gres_item("shard:h100:0(IDX:N/A)").indices == ()


@pytest.mark.parametrize(
    ("text", "name", "gtype", "count", "prefix"),
    [
        ("gres/gpu:2", "gpu", None, 2, "gres/"),
        ("gres:gpu:2", "gpu", None, 2, "gres:"),
        ("gres/gpu:h100=2", "gpu", "h100", 2, "gres/"),
        ("gres/gpu=1", "gpu", None, 1, "gres/"),
        ("gres:gpu:h100:1", "gpu", "h100", 1, "gres:"),
        ("mps:0", "mps", None, 0, ""),
        ("mps:100", "mps", None, 100, ""),
        ("gpu", "gpu", None, None, ""),
        ("gpu:h100", "gpu", "h100", None, ""),
    ],
)
def test_tres_and_request_spellings(
    text: str, name: str, gtype: str | None, count: int | None, prefix: str
) -> None:
    g = parse_gres_item(text)
    assert (g.name, g.type, g.count, g.prefix) == (name, gtype, count, prefix)
    assert g.render() == text


@pytest.mark.parametrize("empty", ["(null)", "N/A", "", "  "])
def test_empty_forms(empty: str) -> None:
    assert parse_gres(empty) == ()


@pytest.mark.parametrize(
    "bad",
    ["gpu:h100:3(IDX:0-", "gpu:h100:3(IDX:x)", "gpu::2", "gpu:h100:3(1/x)", ":2", "gpu:h100:3)", "9gpu"],
)
def test_malformed_gres_raises_parse_error_quoting_it(bad: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_gres(bad)
    assert bad.strip()[:5] in str(info.value) or "GRES" in str(info.value)


def test_nothing_is_dropped_from_a_list() -> None:
    with pytest.raises(ParseError):
        parse_gres("gpu:h100:1(IDX:0),???,mps:0")


_names = st.sampled_from(["gpu", "shard", "mps", "fpga"])
_types = st.one_of(
    st.none(), st.sampled_from(["h100", "a100", "1g.18gb", "3g.71gb", "v100-sxm2", "h200_nvl"])
)
_idx = st.lists(st.integers(0, 15), min_size=0, max_size=8, unique=True).map(lambda xs: tuple(sorted(xs)))


@st.composite
def _items(draw: st.DrawFn) -> GresItem:
    name = draw(_names)
    gtype = draw(_types)
    count = draw(st.one_of(st.none(), st.integers(0, 64)))
    prefix = draw(st.sampled_from(["", "gres/", "gres:"]))
    sep = draw(st.sampled_from([":", "="])) if prefix == "gres/" and count is not None else ":"
    detail = draw(st.sampled_from(["none", "idx", "sockets", "shares"])) if count is not None else "none"
    indices = draw(_idx) if detail == "idx" else None
    sockets = draw(_idx.filter(bool)) if detail == "sockets" else None
    shares = None
    if detail == "shares":
        totals = draw(st.lists(st.integers(1, 8), min_size=1, max_size=8))
        shares = tuple(
            ShareSlot(i, draw(st.one_of(st.none(), st.integers(0, t))), t) for i, t in enumerate(totals)
        )
    return GresItem(name, gtype, count, indices, sockets, shares, prefix, sep)


@settings(max_examples=500)
@given(st.lists(_items(), min_size=1, max_size=5))
def test_parse_of_render_is_identity(items: list[GresItem]) -> None:
    text = render_gres(items)
    assert parse_gres(text) == tuple(items)
    assert render_gres(parse_gres(text)) == text


def test_untyped_gpus_in_use_on_22_05_read_as_untyped() -> None:
    # what `scontrol show node -d` prints on 22.05 for `Gres=gpu:4` nodes (the seed cluster)
    from slurmlab.core.slurm.gres import parse_gres

    idle, busy = parse_gres("gpu:(null):0(IDX:N/A),gpu:(null):2(IDX:0-1)")
    assert idle.type is None and idle.count == 0 and not idle.indices
    assert busy.type is None and busy.count == 2 and busy.indices == (0, 1)
