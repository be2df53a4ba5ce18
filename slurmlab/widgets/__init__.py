"""Jupyter widgets (ipywidgets) for allocations, requests and the queue.

Importing this package loads no widget library: each module imports ipywidgets lazily, so
``rows`` (plain table rows and words) can be used where ipywidgets is not installed.

    panel.AllocationPanel   the live view of one allocation (what ``%salloc`` displays)
    form.RequestForm        a GPU request form that validates as you type and submits
    queue.QueueMonitor      the queue as a sortable table that refreshes by itself
    explorer.TopologyExplorer  a node's (or profile's) topology and MIG layout; the best N GPUs and their salloc line
    sandbox_picker          a profile list and a Start button: a sandbox when no Slurm is configured
    live                    the ONE thread that assigns widget traits
    rows                    table rows, times and Slurm reasons in plain words (no ipywidgets)
    saved                   the readable snapshot each widget saves beside its view (a reopened notebook, the course)
"""
