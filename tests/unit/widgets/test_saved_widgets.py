"""Every widget slurmlab shows leaves a readable saved form (issue 28, point 6): its display bundle carries the
widget view AND a text/html and text/plain snapshot of what it shows, so a reopened notebook without its kernel,
or the HTML course (nbconvert, no widget state), shows the snapshot instead of "model not found" or ipywidgets'
``VBox(children=(HBox(…``; a change made from a cell updates every display of it (a display id), a change made
in the page (rendered by the widget thread) does not rebuild the live view under the user's cursor."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ipywidgets")

from slurmlab.widgets.live import LiveUpdater
from slurmlab.widgets.saved import SAVED_NOTE

WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def updater() -> Iterator[LiveUpdater]:
    up = LiveUpdater(period=0.02)
    yield up
    up.stop()


@pytest.fixture
def inventory() -> Any:
    from slurmlab.core.request.inventory import ClusterInventory, NodeInventory

    nodes = [
        NodeInventory(f"node{i}", cpus=112, memory_mb=2_000_000, sockets=2, gpus={"h100": 8}, shards=32)
        for i in (1, 2)
    ]
    return ClusterInventory.build(nodes=nodes, partitions={"gpu": ["node1", "node2"]}, default="gpu")


@pytest.fixture
def shell() -> Any:
    from IPython.testing.globalipapp import get_ipython

    return get_ipython()


def _saved(bundle: dict[str, Any], kind: str) -> str:
    """The bundle's snapshot HTML, after checking the bundle is a widget view with a readable saved form."""
    assert WIDGET in bundle  # the live widget where its kernel is
    page, text = str(bundle["text/html"]), str(bundle["text/plain"])
    assert f"class='slurmlab-saved-widget slurmlab-saved-{kind}'" in page and SAVED_NOTE in page
    for shown in (page, text):
        assert "children=" not in shown and "VBox(" not in shown  # never ipywidgets' repr
    assert SAVED_NOTE in text
    return page


def test_the_request_form_saves_its_fields_and_command(inventory: Any, updater: LiveUpdater) -> None:
    from slurmlab.widgets.form import RequestForm

    form = RequestForm(inventory=inventory, updater=updater)
    form.gpu_type.value = "h100"
    form.count.value = 2
    form.gpu_bind.value = "closest"
    form.render()
    bundle = form._repr_mimebundle_()
    page = _saved(bundle, "form")
    assert "<th style='text-align:left'>Count</th><td style='text-align:left'>2</td>" in page
    assert "--gpus=h100:2" in page and "--gpu-bind=closest" in page and "What it asks for" in page
    text = str(bundle["text/plain"])
    assert text.startswith("request form: Partition: gpu · Sharing: whole GPUs · GPU type: h100 · Count: 2")
    assert "--gpus=h100:2" in text
    # a wrong request saves its problem, not a command
    form.count.value = 9
    form.per_node.value = True
    form.render()
    page = _saved(form._repr_mimebundle_(), "form")
    assert "slurmlab-form-problem" in page and "slurmlab-form-command" not in page
    assert set(form._repr_mimebundle_(include={"text/plain"})) == {"text/plain"}


def test_a_change_from_a_cell_updates_the_saved_form_a_change_in_the_page_does_not(
    inventory: Any, updater: LiveUpdater, shell: Any
) -> None:
    from IPython.display import display
    from IPython.utils.capture import capture_output

    from slurmlab.widgets.form import RequestForm

    form = RequestForm(inventory=inventory, updater=updater)
    with capture_output() as shown:
        display(form)
        form.count.value = 3
        form.render()  # as a cell that sets the fields does
        form.render()  # nothing changed since: nothing sent
        form.count.value = 4
        page_change = threading.Thread(target=form.render)  # what the widget thread does for the page
        page_change.start()
        page_change.join()
    first, update = shown.outputs
    display_id = first.transient["display_id"]
    assert (
        WIDGET in first.data
        and "<td style='text-align:left'>1</td>" in first.data["text/html"]
        and not first.update
    )
    assert update.update and update.transient["display_id"] == display_id
    assert (
        "<th style='text-align:left'>Count</th><td style='text-align:left'>3</td>" in update.data["text/html"]
    )
    assert WIDGET in update.data


def test_the_topology_explorer_saves_its_pick_and_follows_select(updater: LiveUpdater, shell: Any) -> None:
    pytest.importorskip("bokeh")
    from IPython.display import display
    from IPython.utils.capture import capture_output

    from slurmlab.widgets.explorer import TopologyExplorer

    explorer = TopologyExplorer(profiles=["dgx-h100", "seed"])
    page = _saved(explorer._repr_mimebundle_(), "explorer")
    assert "profile dgx-h100" in page and "GPU0" in page  # the topology as text
    with capture_output() as shown:
        display(explorer)
    # the explorer's own display, after the BokehJS loader where this kernel has not sent it yet
    (first,) = [o for o in shown.outputs if (o.transient or {}).get("display_id")]
    # outside a kernel the explorer's Output widget draws its figures (and clears them) here: look at ours only
    with capture_output() as shown:
        picked = explorer.select("profile:dgx-h100", 2)
    (update,) = [o for o in shown.outputs if (o.transient or {}).get("display_id")]
    assert not first.update and update.update and update.transient == first.transient
    page = _saved(update.data, "explorer")
    assert picked.salloc_line is not None and picked.salloc_line in page.replace("&#x27;", "'")
    assert "N GPUs 2" in page and "N GPUs 2" in update.data["text/plain"]


def test_the_queue_monitor_and_the_sandbox_picker_save_what_they_show(updater: LiveUpdater) -> None:
    from slurmlab.widgets.queue import QueueMonitor
    from slurmlab.widgets.rows import JOB_COLUMNS
    from slurmlab.widgets.sandbox_picker import SandboxPicker

    monitor = QueueMonitor(updater=LiveUpdater(period=3600))
    monitor.stop()
    monitor.rows = [dict.fromkeys(JOB_COLUMNS, "") | {"job": "4711", "state": "RUNNING"}]
    bundle = monitor._repr_mimebundle_()
    page = _saved(bundle, "queue")
    assert "4711" in page and "RUNNING" in page and "queue (mine): 1 jobs" in str(bundle["text/plain"])
    picker = SandboxPicker(lambda name: None, updater=updater)
    page = _saved(picker._repr_mimebundle_(), "sandbox-picker")
    assert "sandbox picker" in page and str(picker.dropdown.label) in page


def test_the_leftover_buttons_save_the_jobs_and_what_each_button_runs() -> None:
    from slurmlab.core.slurm.models import Job
    from slurmlab.magics.leftover_buttons import leftover_bundle, leftover_buttons
    from slurmlab.slurm.allocation.leftovers import Leftovers

    leftovers = Leftovers([Job(77, "slurmlab-77", "RUNNING", nodelist="node1", nodes=("node1",))])
    bundle = leftover_bundle(leftover_buttons(leftovers), leftovers)
    page = _saved(bundle, "leftovers")
    assert "job 77 (RUNNING): %slurm attach 77 · %scancel 77" in page
    assert str(bundle["text/plain"]).startswith("job 77 (RUNNING): %slurm attach 77")
