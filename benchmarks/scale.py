"""Slurm's own output at a real cluster's size: 1,000 nodes x 8 GPUs and 1k-10k jobs, for the benchmarks.

Usage (from the repository root; ``python benchmarks/x.py`` works too, the path is set up below)::

    from benchmarks.scale import scale_inputs

    inputs = scale_inputs(nodes=1000, jobs=10000, version="24.11")    # 22.05, 24.11 or 26.05
    inputs.text("squeue_json")           # what `squeue --json` prints; inputs.texts lists every key:
    #   sinfo_version, squeue_brief (squeue -h -t all -o BRIEF_FORMAT), squeue_owners (-o %A|%U),
    #   squeue_json, sinfo_json, scontrol_job_text (show job -d), scontrol_node_text (show node -d),
    #   scontrol_partition_text, sinfo_partitions (-h -o %P), scontrol_ping; from 23.02 also
    #   scontrol_job_json, scontrol_node_json, scontrol_partition_json (scontrol --json show ...)
    runner = inputs.runner()             # a slurmlab Runner (a FakeRunner) answering those commands
    queries.slurm_version(runner)        # ... so the server, poller and magics run at scale, no Slurm needed

``runner()`` answers each argv slurmlab sends for these listings (``squeue --json``, ``scontrol show job -d``,
``squeue -h -t all -o BRIEF_FORMAT`` ...), and filters where Slurm filters: ``squeue ... -j 1001,1002``
(brief/owner lines of those jobs), ``scontrol [--json] show job -d ID``, ``scontrol show node [-d] NAME``,
``sinfo -h -N [-n NAMES] -o %N|%T[|%C]``. Anything else raises UnscriptedCommand, as FakeRunner does; add answers
with ``runner.on([...], stdout=...)``.

Every record is one a real Slurm printed (tests/data/slurm/<version>, recorded from the sandbox by
scripts/record-golden.py) with only its varying fields replaced: node names ``node[0001-1000]`` (8 H100s,
32 shards, 112 CPUs each), 12 users, about 60 % of jobs asked to run (as many as fit do, first fit: the GPU
indices in each job's ``gres_detail`` agree with its nodes' ``gres_used``), the rest pending with real
reasons; 1-8 GPUs per job, shard jobs, multi-node jobs. Same arguments give the same text (seeded).
Texts are cached under build/bench-inputs/ (delete it to rebuild; the cache key carries a generator version).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import scale_json, scale_text
from benchmarks.scale_plan import Plan, plan
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT
from slurmlab.slurm.runner import RunResult
from slurmlab.testing import FakeRunner, golden_dir
from slurmlab.testing.recordings import Reply

__all__ = ["VERSIONS", "ScaleInputs", "ScaleRunner", "scale_inputs"]

VERSIONS = ("22.05", "24.11", "26.05")
GENERATOR = 1  # bump when the generated text changes: the cache is keyed on it
ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "bench-inputs"
_OWNERS_FORMAT = "%A|%U"
_HEAD = "\0head"


def _recorded(version: str, name: str) -> str:
    return (golden_dir() / version / name).read_text()


def _has_scontrol_json(version: str) -> bool:
    return tuple(int(x) for x in version.split(".")) >= (23, 2)


def _render(p: Plan, version: str) -> dict[str, str]:
    old = not _has_scontrol_json(version)
    squeue = json.loads(_recorded(version, "s01_squeue.json"))
    texts = {
        "sinfo_version": _recorded(version, "00_sinfo_version.txt"),
        "scontrol_ping": _recorded(version, "s23_scontrol_ping.txt"),
        "sinfo_partitions": "gpu*\n",
        "squeue_brief": "".join(scale_text.brief_line(j, p, old) + "\n" for j in p.jobs),
        "squeue_owners": "".join(f"{j.job_id}|{j.uid}\n" for j in p.jobs),
        "squeue_json": json.dumps(scale_json.jobs_doc(p, squeue)),
        "sinfo_json": json.dumps(
            scale_json.sinfo_doc(p, json.loads(_recorded(version, "s04_sinfo_nodes.json")))
        ),
        "scontrol_job_text": scale_text.jobs_text(p, _recorded(version, "s06_scontrol_show_job_d.txt"), old),
        "scontrol_node_text": scale_text.nodes_text(
            p, _recorded(version, "s08_scontrol_show_node_d.txt"), old
        ),
        "scontrol_partition_text": scale_text.partition_text(
            p, _recorded(version, "s16_scontrol_show_partition.txt")
        ),
    }
    if not old:
        jobs = json.loads(_recorded(version, "s05_scontrol_json_show_job_d.json"))
        texts["scontrol_job_json"] = json.dumps(scale_json.jobs_doc(p, {**jobs, "jobs": squeue["jobs"]}))
        nodes = json.loads(_recorded(version, "s07_scontrol_json_show_node.json"))
        texts["scontrol_node_json"] = json.dumps(scale_json.nodes_doc(p, nodes))
        parts = json.loads(_recorded(version, "s09_scontrol_json_show_partition.json"))
        texts["scontrol_partition_json"] = json.dumps(scale_json.partitions_doc(p, parts))
    return texts


@dataclass
class ScaleInputs:
    """The texts of one scaled cluster (module docstring) and a runner that answers with them."""

    version: str
    nodes: int
    jobs: int
    texts: dict[str, str]
    path: Path | None = None
    _index: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)

    @property
    def size(self) -> str:
        return f"{self.nodes} nodes x {self.jobs} jobs"

    def text(self, key: str) -> str:
        return self.texts[key]

    def runner(self) -> ScaleRunner:
        return ScaleRunner(self)

    def index(self, key: str) -> dict[str, str]:
        """Records of one listing by job id / node name (for the filtered answers), built once."""
        if key not in self._index:
            if key in ("squeue_brief", "squeue_owners"):
                lines = self.texts[key].splitlines()
                self._index[key] = {
                    ln.split("|", 2)[1 if key == "squeue_brief" else 0]: ln + "\n" for ln in lines
                }
            elif key in ("scontrol_job_json", "scontrol_node_json"):
                doc = json.loads(self.texts[key])
                what, name = ("jobs", "job_id") if key == "scontrol_job_json" else ("nodes", "name")
                records = doc.pop(what)
                self._index[key] = {str(r[name]): json.dumps(r) for r in records}
                self._index[key][_HEAD] = json.dumps(doc)  # meta, errors ...: what a filtered answer keeps
            else:
                recs = scale_text.records(self.texts[key])
                self._index[key] = {r.split("=", 1)[1].split()[0]: r + "\n   \n" for r in recs}
        return self._index[key]


class ScaleRunner(FakeRunner):
    """A FakeRunner answering the scaled listings, filtered by job ids and node names as Slurm filters."""

    def __init__(self, inputs: ScaleInputs) -> None:
        super().__init__()
        self.inputs = inputs
        t = inputs.texts
        static = {
            ("sinfo", "--version"): "sinfo_version",
            ("scontrol", "ping"): "scontrol_ping",
            ("sinfo", "-h", "-o", "%P"): "sinfo_partitions",
            ("squeue", "--json"): "squeue_json",
            ("sinfo", "--json"): "sinfo_json",
            ("scontrol", "show", "partition"): "scontrol_partition_text",
            ("scontrol", "--json", "show", "partition"): "scontrol_partition_json",
            ("scontrol", "--json", "show", "node"): "scontrol_node_json",
            ("scontrol", "--json", "show", "job", "-d"): "scontrol_job_json",
            ("scontrol", "show", "job", "-d"): "scontrol_job_text",
            ("scontrol", "show", "node", "-d"): "scontrol_node_text",
            ("scontrol", "show", "node"): "scontrol_node_text",
            ("squeue", "-h", "-t", "all", "-o", BRIEF_FORMAT): "squeue_brief",
            ("squeue", "-h", "-t", "all", "-o", _OWNERS_FORMAT): "squeue_owners",
        }
        for argv, key in static.items():
            if key in t:
                self.on(list(argv), stdout=t[key])

    def _filtered(self, args: list[str]) -> str | None:
        """The answer of a filtered listing, or None when ``args`` is not one."""
        a = list(args)
        if a[:1] == ["squeue"] and "-u" in a and a[-2:] == ["-o", BRIEF_FORMAT]:
            # the server's own-jobs listing: the controller selects the jobs of that uid
            uid = a[a.index("-u") + 1]
            owners = self.inputs.index("squeue_owners")
            return "".join(
                line
                for jid, line in self.inputs.index("squeue_brief").items()
                if owners.get(jid, "").strip().endswith(f"|{uid}")
            )
        if a[:1] == ["squeue"] and "-j" in a and "-o" in a:
            ids = a[a.index("-j") + 1].split(",")
            fmt = a[a.index("-o") + 1]
            key = (
                "squeue_brief" if fmt == BRIEF_FORMAT else "squeue_owners" if fmt == _OWNERS_FORMAT else None
            )
            if key is None:
                return None
            index = self.inputs.index(key)
            return "".join(index[i] for i in ids if i in index)
        if a[:1] == ["sinfo"] and "-N" in a and a[-2:-1] == ["-o"] and a[-1] in ("%N|%T", "%N|%T|%C"):
            names = set(expand(a[a.index("-n") + 1])) if "-n" in a else None
            recs = self.inputs.index("scontrol_node_text")
            cpus = a[-1].endswith("%C")
            return "".join(
                f"{n}|{_state(r)}{'|' + _cpus(r) if cpus else ''}\n"
                for n, r in recs.items()
                if names is None or n in names
            )
        if a[:1] != ["scontrol"] or "show" not in a:
            return None
        rest = [x for x in a[a.index("show") + 1 :] if x != "-d"]
        json_form = "--json" in a
        if len(rest) != 2 or rest[0] not in ("job", "node"):
            return None
        key = f"scontrol_{rest[0]}_{'json' if json_form else 'text'}"
        index = self.inputs.index(key)
        wanted = expand(rest[1]) if rest[0] == "node" else rest[1].split(",")
        if not json_form:
            return "".join(index[w] for w in wanted if w in index)
        what = "jobs" if rest[0] == "job" else "nodes"
        head = index[_HEAD]
        body = ", ".join(index[w] for w in wanted if w in index)
        return f'{head[:-1]}{", " if len(head) > 2 else ""}"{what}": [{body}]}}'

    def _reply(self, args: list[str]) -> Reply:
        text = self._filtered(args)
        return super()._reply(args) if text is None else Reply(text, "", 0)

    def run_text(self, argv: Sequence[str]) -> RunResult:
        """``run`` without the error classification, for a benchmark that only wants the text."""
        return self.run(argv, check=False)


def _cpus(record: str) -> str:
    """sinfo's ``%C`` (allocated/idle/other/total CPUs) of a node record."""
    found = dict(w.split("=", 1) for w in record.split() if w.startswith(("CPUAlloc=", "CPUTot=")))
    alloc, total = int(found.get("CPUAlloc", 0)), int(found.get("CPUTot", 0))
    return f"{alloc}/{total - alloc}/0/{total}"


def _state(record: str) -> str:
    for word in record.split():
        if word.startswith("State="):
            return word[6:].lower()
    return "unknown"


def scale_inputs(
    nodes: int = 1000, jobs: int = 10000, version: str = "24.11", *, cache: Path | None = CACHE
) -> ScaleInputs:
    """The scaled cluster's texts for this size and Slurm version, cached under ``cache`` (build/bench-inputs/;
    None: not cached)."""
    if version not in VERSIONS:
        raise ValueError(f"version {version!r}: scale inputs exist for {', '.join(VERSIONS)}")
    if nodes < 1 or jobs < 0:
        raise ValueError(f"{nodes} nodes x {jobs} jobs: give at least one node and no negative job count")
    if cache is None:
        return ScaleInputs(version, nodes, jobs, _render(plan(nodes, jobs), version))
    folder = cache / f"{version}-{nodes}n-{jobs}j-g{GENERATOR}"
    done = folder / "done"
    if done.exists():
        texts = {p.stem: p.read_text() for p in folder.glob("*.txt")}
        return ScaleInputs(version, nodes, jobs, texts, folder)
    texts = _render(plan(nodes, jobs), version)
    folder.mkdir(parents=True, exist_ok=True)
    for key, text in texts.items():
        tmp = folder / f".{key}.{os.getpid()}"
        tmp.write_text(text)
        tmp.replace(folder / f"{key}.txt")
    done.write_text("")
    return ScaleInputs(version, nodes, jobs, texts, folder)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="build (and cache) the scale inputs; print their sizes")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--version", default="24.11", choices=VERSIONS)
    ns = ap.parse_args()
    got = scale_inputs(ns.nodes, ns.jobs, ns.version)
    for k, v in sorted(got.texts.items()):
        print(f"{k:<26} {len(v) / 1e6:8.2f} MB")
    print(f"cached in {got.path}")
