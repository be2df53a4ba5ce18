"""Speed of the topology figure for 8 GPUs (issue 14's last row: target < 50 ms), beside a plain Bokeh figure.

    python benchmarks/bench_topology_figure.py [--quick]

Rows: ``topology_figure`` of the dgx-h100 profile (its task CPUs marked, as ``alloc.explain_binding()`` draws it),
and of a real ``nvidia-smi topo -m`` capture of an 8×H100 node with NICs when the shared fixtures are present
(``../shared/fixtures`` or ``SLURMLAB_SHARED_FIXTURES``). The baseline of each is a plain Bokeh figure drawing the
same items with one ordinary ``bokeh.plotting`` call per kind (the GPUs, their links, the labels, the NUMA sectors,
the CPU cells, the NICs). Medians of at least 5 runs after one warm-up. Beside the times, each row counts the Python
function calls of one build of each (``cProfile``): unlike a time, that count does not move with the machine's load.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks._bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row, median_time

GROUP = "topology figure, 8 GPUs"
TARGET_MS = 50.0
CAPTURE = "topo-8x-h100-princeton-pli-nv18-6nics-empty-cpu-affinity.txt"


def _shared_capture() -> Path | None:
    base = os.environ.get("SLURMLAB_SHARED_FIXTURES")
    folder = Path(base) if base else Path(__file__).resolve().parents[2] / "shared" / "fixtures"
    path = folder / "nvidia-smi" / CAPTURE
    return path if path.is_file() else None


def _cases() -> list[tuple[str, dict[str, Any]]]:
    from slurmlab.core.gpu.smi import parse_topo_matrix
    from slurmlab.slurm.hardware_files import topology

    profile = topology(profile="dgx-h100").topology
    cpus = sorted(profile.gpu(0).cpu_affinity or ())
    cases = [
        (
            "dgx-h100 profile",
            {
                "topo": profile,
                "highlight_gpus": [0, 1],
                "task_cpus": {"task 0": cpus[:4], "task 1": cpus[4:8]},
            },
        )
    ]
    capture = _shared_capture()
    if capture is not None:
        real = parse_topo_matrix(capture.read_text(), gpu_model="NVIDIA H100 80GB HBM3")
        cases.append((f"real capture {capture.name}", {"topo": real, "highlight_gpus": [4]}))
    return cases


def _plain(fig_items: dict[str, int]) -> object:
    """A plain Bokeh figure with the same items, one ``bokeh.plotting`` call per kind."""
    from bokeh.plotting import figure

    fig = figure(width=820, height=700, tools="pan,wheel_zoom,reset,save")
    n = max(fig_items["gpus"], 1)
    xs = [float(i) for i in range(n)]
    fig.scatter(x=xs, y=xs, size=40)
    fig.multi_line(xs=[[0.0, x] for x in range(fig_items["links"])], ys=[[0.0, 1.0]] * fig_items["links"])
    fig.text(x=xs, y=xs, text=[f"GPU{i}" for i in range(n)])
    if fig_items["groups"]:
        fig.annular_wedge(
            x=0,
            y=0,
            inner_radius=0.5,
            outer_radius=1.2,
            start_angle=list(range(fig_items["groups"])),
            end_angle=[a + 0.5 for a in range(fig_items["groups"])],
        )
    if fig_items["cpus"]:
        cells = [float(c) for c in range(fig_items["cpus"])]
        fig.rect(x=cells, y=[0.0] * len(cells), width=1.0, height=0.3)
    if fig_items["nics"]:
        fig.scatter(x=list(range(fig_items["nics"])), y=[2.0] * fig_items["nics"], marker="square")
    return fig


def _items(args: dict[str, Any]) -> dict[str, int]:
    topo = args["topo"]
    fabric = topo.fabric()
    groups = topo.numa_groups()
    cpus = set().union(*(g.cpu_affinity or () for g in topo.gpus))
    links = len(fabric.nvlink_gpus()) if fabric.switched else len(topo.nvlink_edges())
    return {
        "gpus": len(topo.gpus),
        "links": links,
        "groups": len(groups),
        "cpus": len(cpus),
        "nics": len(topo.nics),
    }


def _calls(build: Callable[[], object]) -> int:
    """Python function calls of one ``build()`` (after a warm-up): the same on a busy machine as on a quiet one."""
    import cProfile
    import io
    import pstats

    build()
    profile = cProfile.Profile()
    profile.enable()
    build()
    profile.disable()
    return int(pstats.Stats(profile, stream=io.StringIO()).total_calls)


def measure(quick: bool = False) -> list[Row]:
    from slurmlab.viz.topology_view import topology_figure

    repeat = 5 if quick else 15
    rows = []
    for name, args in _cases():
        value = median_time(lambda a=args: topology_figure(**a), repeat=repeat, warmup=2) * 1000
        items = _items(args)
        base = median_time(lambda i=items: _plain(i), repeat=repeat, warmup=2) * 1000
        calls = _calls(lambda a=args: topology_figure(**a))
        base_calls = _calls(lambda i=items: _plain(i))
        rows.append(
            Row(
                GROUP,
                f"topology_figure, {name}",
                round(value, 2),
                "ms",
                TARGET_MS,
                round(base, 2),
                "plain Bokeh figure, same items",
                size=f"{items['gpus']} GPUs",
                note=f"{value / base:.2f}x the plain figure; function calls {calls / 1000:.1f}k vs "
                f"{base_calls / 1000:.1f}k ({calls / base_calls:.2f}x)",
            )
        )
    return rows


def main() -> int:
    rows = measure(quick="--quick" in sys.argv[1:])
    for r in rows:
        verdict = "ok" if r.ok else "MISSED"
        print(
            f"{r.name}: {r.value:.1f} {r.unit} (target < {r.target:g}) | {r.baseline_name}: {r.baseline:.1f} "
            f"{r.unit} | {r.note} | {verdict}"
        )
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
