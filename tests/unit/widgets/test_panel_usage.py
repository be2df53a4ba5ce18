"""The panel's usage section: hidden until the allocation runs, then the sampler starts (in its thread), the
summary says what is measured, the chart appears with the first samples and grows in place; it stops with the
allocation. Uses scripted sstat output (Slurm 22.05 recordings)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from slurmlab.core.gpu.usage import UsageSample, UsageTable
from slurmlab.slurm.allocation import sampler as allocation_usage
from slurmlab.testing import FakeRunner, golden
from slurmlab.testing.scripted import ANY

pytest.importorskip("ipywidgets")

from slurmlab.widgets.panel_usage import UsageSection, summary_html


@dataclass
class StandIn:
    runner: FakeRunner
    job_id: str = "31"
    state: str = "PENDING"
    gpus: dict[str, list[int]] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def ended(self) -> bool:
        return self.state == "COMPLETED"

    def time_left(self) -> float | None:
        return None


def _until(check: Callable[[], object], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_the_section_starts_when_the_job_runs_and_draws_the_samples_live() -> None:
    pytest.importorskip("jupyter_bokeh")
    with FakeRunner() as fake:
        fake.on(["sstat", ..., "-j", "31", ANY], stdout=golden("22.05/sstat/u01_sstat_busy_step.txt")).then(
            stdout=golden("22.05/sstat/u02_sstat_busy_step_later.txt")
        )
        alloc = StandIn(fake)
        dirty: list[int] = []
        section = UsageSection(alloc, lambda: dirty.append(1))  # type: ignore[arg-type]
        assert "slurmlab-usage" in section.widget._dom_classes
        section.render(alloc)  # type: ignore[arg-type]
        assert section.widget.layout.display == "none" and not fake.called(["sstat", ...])
        alloc.state = "RUNNING"
        allocation_usage.sampler_for(alloc).interval = 0.01  # type: ignore[arg-type]
        section.render(alloc)  # type: ignore[arg-type]
        assert section.widget.layout.display == "" and "sampling started" in section.summary.value
        _until(lambda: dirty and allocation_usage.sampler_for(alloc).table().samples)  # type: ignore[arg-type]
        section.render(alloc)  # type: ignore[arg-type]
        assert "slurmlab-usage-src-sstat" in section.widget._dom_classes
        assert "step 1.0" in section.summary.value and "this machine has no GPU" in section.summary.value
        summary, view = section.widget.children
        assert "slurmlab-usage-chart" in view._dom_classes and section.chart is not None
        drawn = len(section.chart.sources["step 1.0"].data["t"])
        _until(lambda: len(allocation_usage.sampler_for(alloc).table().samples) > drawn)  # type: ignore[arg-type]
        section.render(alloc)  # type: ignore[arg-type]
        assert section.widget.children[1] is view  # the same chart, grown in place
        assert len(section.chart.sources["step 1.0"].data["t"]) > drawn
        alloc.state = "COMPLETED"
        section.render(alloc)  # type: ignore[arg-type]
        sampler = allocation_usage.sampler_for(alloc)  # type: ignore[arg-type]
        _until(lambda: not sampler.alive)
        allocation_usage._samplers.pop(id(alloc), None)


def test_the_summary_line_escapes_and_says_why_it_stopped() -> None:
    table = UsageTable(
        "3", "nvml", (UsageSample("n<1> GPU 0", 1.0, 42.0, 100.0, 200.0),), None, "<b>gone</b>"
    )
    text = summary_html(table)
    assert "n&lt;1&gt; GPU 0: 42 % now, peak 42 %, 100 MiB" in text and "stopped: &lt;b&gt;gone" in text
    assert "no samples yet" in summary_html(UsageTable("3", None))


def test_the_panel_carries_the_usage_section() -> None:
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.poller import JobPoller
    from slurmlab.widgets.panel import AllocationPanel

    class Updater:
        def add(self, view: object) -> None: ...
        def remove(self, view: object) -> None: ...
        def mark_dirty(self, view: object) -> None: ...

    poller = JobPoller(
        runner=object(),
        fetch_brief=lambda ids, r: {},  # type: ignore[arg-type]
        fetch_detail=lambda jid, r: None,
        interval=3600,
    )  # type: ignore[arg-type,return-value]
    alloc = Allocation("8", runner=object(), poller=poller, release_at_exit=False)  # type: ignore[arg-type]
    poller.stop()
    panel = AllocationPanel(alloc, updater=Updater())  # type: ignore[arg-type]
    assert panel.usage.widget in panel.widget.children
    panel.render()  # not running: nothing sampled, the section stays hidden
    assert panel.usage.widget.layout.display == "none" and panel.usage.sampler is None
