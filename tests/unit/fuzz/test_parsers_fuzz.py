"""Every parser meets corrupted real output and only ParseError comes out, in bounded memory.

The inputs are seeded corruptions (tests/unit/fuzz/fuzz_corrupt.py) of every real output the
project holds: the shared Slurm 22.05/24.11 and nvidia-smi captures, tests/golden and
tests/data. A failure lists each escaping exception once per parser and site, with a
reproducing input. The whole tier is a few thousand inputs and runs in well under a minute.
"""

from __future__ import annotations

import json
import traceback
import tracemalloc
import warnings
from collections.abc import Callable, Iterable
from datetime import timezone
from pathlib import Path
from typing import Any

import pytest
from fuzz_corrupt import mutate_text, variants
from profiles import profile, sample, scaled
from shared_paths import REPO, list_shared

from slurmlab.core.gpu import smi as sp
from slurmlab.core.gpu.devices import parse_cpu_list
from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.topology import Topology
from slurmlab.core.slurm import parse_json as pj
from slurmlab.core.slurm import parse_text as pt
from slurmlab.core.slurm.detect import detect_and_parse
from slurmlab.core.slurm.gres import parse_gres, parse_index_list
from slurmlab.core.slurm.hostlist import compress, count, expand
from slurmlab.core.slurm.models import ExitStatus, Tres, parse_mem_mb
from slurmlab.core.slurm.squeue_brief import parse_squeue_brief
from slurmlab.core.slurm.timefmt import from_epoch, parse_duration, parse_timestamp
from slurmlab.errors import ParseError, RequestError

SEED = 20261130
UTC = timezone.utc
BRIEF = (
    "2|2|2|N/A|RUNNING|None|2026-11-29T15:04:03|2026-11-29T16:04:03|1:00:00|58:10|1:50|2|node[1-2]|gpu|root|gres:gpu:h100:1\n"
    "10_[2-5%3]|10|10|2-5%3|PENDING|Resources|N/A|N/A|1:00:00|1:00:00|0:00|1||gpu|root|N/A\n"
    "10_1|15|10|1|RUNNING|None|2026-11-29T15:05:31|2026-11-29T16:05:31|1:00:00|59:34|0:26|1|node2|gpu|root|N/A\n"
)


def _json_parsers(text: str) -> None:
    doc = pj.load_json(text)
    if not isinstance(doc, dict):
        return
    pj.json_meta(doc)
    for parse in (pj.parse_jobs_json, pj.parse_nodes_json, pj.parse_partitions_json, pj.parse_steps_json):
        problems: list[ParseError] = []
        try:
            parse(doc, problems=problems)
        except ParseError:
            pass


def _text_parsers(text: str) -> None:
    for parse in (pt.parse_scontrol_jobs, pt.parse_scontrol_steps):
        try:
            parse(text, tz=UTC, problems=[])
        except ParseError:
            pass
    for parse2 in (pt.parse_scontrol_nodes, pt.parse_scontrol_partitions):
        try:
            parse2(text, problems=[])
        except ParseError:
            pass
    for parse3 in (pt.parse_version, pt.parse_sinfo_node_states):
        try:
            parse3(text)
        except ParseError:
            pass
    try:
        parse_squeue_brief(text, tz=UTC, problems=[])
    except ParseError:
        pass


SMI_PARSERS: tuple[Callable[[str], Any], ...] = (
    sp.parse_topo_matrix,
    sp.parse_topo_cpu,
    sp.parse_topo_p2p,
    sp.parse_nvlink_status,
    sp.parse_nvlink_capabilities,
    sp.parse_mig_lgip,
    sp.parse_mig_lgipp,
    sp.parse_mig_lgi,
    sp.parse_mig_lci,
    sp.parse_mig_cgi_log,
    sp.parse_smi_list,
    sp.parse_mig_devices,
    sp.sniff,
)


def _smi_parsers(text: str) -> None:
    for parse in SMI_PARSERS:
        try:
            parse(text)
        except ParseError:
            pass


def _profile_loaders(text: str) -> None:
    try:
        data = pj.load_json(text)
    except ParseError:
        return
    if not isinstance(data, dict):
        return
    for load in (Topology.from_profile, MigLayout.from_profile):
        try:
            load(data)
        except (ParseError, RequestError):  # RequestError: a profile with no MIG instances
            pass


def _detect(text: str) -> None:
    try:
        detect_and_parse(text, tz=UTC).to_dict()
    except ParseError:
        pass


def _slurm_files() -> list[Path]:
    """The project's own recordings of every Slurm version, plus the shared real-cluster captures when present."""
    own = sorted(
        p for p in (REPO / "tests" / "data" / "slurm").rglob("*") if p.is_file() and p.name != "commands.txt"
    )
    shared: list[Path] = (
        list_shared("slurm", "22.05") + list_shared("slurm", "24.11") + list_shared("slurm", "24.11", "dp")
    )
    return own + shared


def _repo_files() -> list[Path]:
    return sorted(
        p for folder in ("golden", "data") for p in (REPO / "tests" / folder).rglob("*") if p.is_file()
    )


def _run(
    cases: Iterable[tuple[str, str, Callable[[str], None]]], memory_every: int = 0
) -> tuple[int, list[str]]:
    """Run every (label, text, check); return how many ran and one report per escaping site."""
    seen: dict[tuple[str, str, str], str] = {}
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, text, check in cases:
            n += 1
            measure = memory_every and n % memory_every == 0
            if measure:
                tracemalloc.start()
            try:
                check(text)
            except ParseError:
                pass
            except json.JSONDecodeError:
                pass
            except Exception as exc:  # the point of this tier: nothing else may escape
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                site = (check.__name__, type(exc).__name__, f"{Path(frame.filename).name}:{frame.lineno}")
                seen.setdefault(site, f"{site}: {exc!r} from {label}: {text[:300]!r}")
            finally:
                if measure:
                    _cur, peak = tracemalloc.get_traced_memory()
                    tracemalloc.stop()
                    if peak > 64 * 1024 * 1024:
                        seen.setdefault(
                            ("memory", label, ""), f"{peak / 2**20:.0f} MiB peak on {label}: {text[:300]!r}"
                        )
    return n, sorted(seen.values())


def _cases(
    files: list[Path], per_file: int, checks: tuple[Callable[[str], None], ...]
) -> Iterable[tuple[str, str, Callable[[str], None]]]:
    for i, path in enumerate(files):
        text = path.read_text(encoding="utf-8", errors="replace")
        for j, variant in enumerate(variants(text, per_file, SEED + i)):
            for check in checks:
                yield f"{path.name}#{j}", variant, check


@pytest.mark.parametrize("suffix", [".json", "text"])
def test_corrupted_slurm_outputs_raise_only_parse_error(suffix: str) -> None:
    files = sample([p for p in _slurm_files() if (p.suffix == ".json") == (suffix == ".json")])
    assert files, "no Slurm recordings under tests/data/slurm"
    checks = (_json_parsers, _detect) if suffix == ".json" else (_text_parsers, _detect)
    n, failures = _run(_cases(files, scaled(40 if suffix == ".json" else 24), checks), memory_every=7)
    assert n >= scaled(2000) // (1 if profile() == "ci" else 2)
    assert not failures, f"{len(failures)} sites let another exception out:\n" + "\n".join(failures)


def test_corrupted_smi_captures_and_profiles_raise_only_parse_error() -> None:
    files = list_shared("nvidia-smi", pattern="*.txt")
    if not files:
        pytest.skip("shared nvidia-smi fixtures not found (see tests/shared_paths.py)")
    profiles = sorted((REPO / "slurmlab" / "sandbox" / "profiles").glob("*.json"))
    cases = [*_cases(files, scaled(12), (_smi_parsers,)), *_cases(profiles, scaled(150), (_profile_loaders,))]
    n, failures = _run(cases, memory_every=11)
    assert n >= scaled(900)
    assert not failures, f"{len(failures)} sites let another exception out:\n" + "\n".join(failures)


def test_corrupted_repo_outputs_and_brief_lines_raise_only_parse_error() -> None:
    files = _repo_files()
    assert files, "tests/golden and tests/data hold the project's own outputs"
    brief = [("brief", v, _text_parsers) for v in variants(BRIEF, scaled(300), SEED)]
    n, failures = _run([*_cases(files, scaled(25), (_text_parsers, _detect)), *brief], memory_every=5)
    assert n >= scaled(600)
    assert not failures, f"{len(failures)} sites let another exception out:\n" + "\n".join(failures)


VALUES: dict[str, tuple[list[str], Callable[[str], Any]]] = {
    "gres": (
        [
            "gpu:h100:3(IDX:0-2),shard:h100:4(0/4,0/4,0/4,4/4)",
            "gres/gpu:h100=2",
            "gpu:(null):0(IDX:N/A)",
            "gpu:h100:4(S:0-1)",
            "shard:h100:0(-/4,0/4)",
        ],
        parse_gres,
    ),
    "index": (["0-2,5", "N/A", "0,24"], parse_index_list),
    "hostlist": (
        ["node[1-3,7],gpu-a[01-04]", "r[1-2]n[1-2]", "node1", "(null)"],
        lambda t: compress(expand(t)),
    ),
    "count": (["node[1-3,7],gpu-a[01-04]", "r[1-2]n[1-2]"], count),
    "duration": (["1-02:03:04", "01:00:00", "30:00", "5", "UNLIMITED"], parse_duration),
    "timestamp": (["2026-11-29T15:04:03", "Unknown"], lambda t: parse_timestamp(t, UTC)),
    "local-timestamp": (["2026-11-29T15:04:03", "0001-01-01T00:00:00"], lambda t: parse_timestamp(t)),
    "mem": (["1000M", "62.50G", "8G", "1000"], parse_mem_mb),
    "tres": (["cpu=1,mem=1000M,node=1,billing=1,gres/gpu=2", "cpu=96,mem=125G,node=2"], Tres.parse),
    "exit": (["0:0", "3:0", "0:15"], ExitStatus.from_text),
    "cpus": (["0-47", "0,24", "0-3,8-11"], parse_cpu_list),
}


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_corrupted_values_raise_only_parse_error(kind: str) -> None:
    import random

    seeds, parse = VALUES[kind]
    rng = random.Random(SEED)

    def check(text: str) -> None:
        parse(text)

    check.__name__ = kind
    cases = [(kind, mutate_text(rng.choice(seeds), rng), check) for _ in range(400)]
    cases += [
        (kind, t, check) for t in ("9" * 5000, "²", "٣", "1e999", "nan", "\x00", "", " ", "-", "[", "]")
    ]
    n, failures = _run(cases, memory_every=3)
    assert n > 400
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("value", [10**30, -(10**30), 2**63, float("inf"), float("nan"), -1])
def test_from_epoch_refuses_what_is_no_time(value: Any) -> None:
    try:
        from_epoch(value)
    except ParseError:
        pass
