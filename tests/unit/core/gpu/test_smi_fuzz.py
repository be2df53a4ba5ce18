"""Mangled nvidia-smi captures (lines dropped, tokens replaced, text cut) either parse or raise ParseError."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_paths import list_shared

from slurmlab.core.gpu import smi as sp
from slurmlab.errors import ParseError

PARSERS: dict[str, Callable[[str], Any]] = {
    "topo": sp.parse_topo_matrix,
    "topo-c": sp.parse_topo_cpu,
    "topo-p2p": sp.parse_topo_p2p,
    "nvlink-s": sp.parse_nvlink_status,
    "nvlink-c": sp.parse_nvlink_capabilities,
    "lgip": sp.parse_mig_lgip,
    "lgipp": sp.parse_mig_lgipp,
    "lgi": sp.parse_mig_lgi,
    "lci": sp.parse_mig_lci,
    "cgi": sp.parse_mig_cgi_log,
    "list": sp.parse_smi_list,
    "mig-devices": sp.parse_mig_devices,
}

CAPTURES: list[tuple[str, str]] = []
for _p in list_shared("nvidia-smi", pattern="*.txt"):
    _text = _p.read_text()
    try:
        _kind = sp.sniff(_text)
    except ParseError:
        continue
    CAPTURES.append((_kind, _text))


def test_every_capture_is_recognised() -> None:
    names = [p.name for p in list_shared("nvidia-smi", pattern="*.txt")]
    if not names:
        pytest.skip("shared nvidia-smi fixtures not found (see tests/shared_paths.py)")
    assert len(CAPTURES) == len(names)


# tokens that real captures use, plus some that they never do
TOKENS = st.sampled_from(
    [
        "X",
        "NV1",
        "NV18",
        "NV0",
        "SOC",
        "PIX",
        "NODE",
        "SYS",
        "N/A",
        "",
        "0-47",
        "5-3",
        "0,,1",
        "GPU0",
        "GPU99",
        "NIC3",
        "mlx5_0",
        "|",
        "MIG",
        "1g.10gb",
        "9g.1gb",
        "7/3",
        "4:4",
        "9:9",
        "{0,2}:2",
        "Link",
        "GB/s",
        "(UUID:",
        "\t",
        "-",
        "12345678901234567890",
    ]
)
ALPHABET = "GPUNVXSYCIOD0123456789-,:/. \t|+=_{}()gbmlxe"


@st.composite
def mangled(draw: st.DrawFn) -> tuple[str, str]:
    kind, text = draw(st.sampled_from(CAPTURES))
    lines = text.split("\n")
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["drop", "dup", "token", "chars", "cut", "swap"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "token":
            words = lines[i].split(" ")
            k = draw(st.integers(0, max(len(words) - 1, 0)))
            words[k] = draw(st.one_of(TOKENS, st.text(ALPHABET, max_size=8)))
            lines[i] = " ".join(words)
        elif op == "chars":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(st.text(ALPHABET, min_size=1, max_size=6)) + lines[i][pos:]
        elif op == "cut":
            joined = "\n".join(lines)
            lines = joined[: draw(st.integers(0, len(joined)))].split("\n")
    return kind, "\n".join(lines)


@pytest.mark.skipif(not CAPTURES, reason="shared nvidia-smi fixtures not found (see tests/shared_paths.py)")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_mangled_captures_parse_or_raise_parse_error(case: tuple[str, str]) -> None:
    kind, text = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SmiParseWarning)
        for parser in (PARSERS[kind], sp.sniff):
            try:
                parser(text)
            except ParseError as exc:
                assert str(exc).startswith("cannot parse")


@pytest.mark.skipif(not CAPTURES, reason="shared nvidia-smi fixtures not found (see tests/shared_paths.py)")
@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), st.text(max_size=300))
def test_arbitrary_text_never_crashes_a_parser(kind: str, text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SmiParseWarning)
        try:
            PARSERS[kind](text)
        except ParseError:
            pass
