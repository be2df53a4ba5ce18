"""Sphinx configuration of slurmlab's documentation: ``make docs`` writes build/docs/index.html.

The pages are Markdown (MyST) beside two reStructuredText pages that the code writes at build time: the magics
reference (each magic's own help) and the API reference (autodoc, from the docstrings of ``slurmlab``'s public
names). ``make docs`` turns every warning into an error, and ``nitpicky`` makes an unresolved reference, a
page's or a docstring's, one of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import slurmlab

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))  # the local extension, slurmlab_docs

project = "slurmlab"
author = "the slurmlab contributors"
copyright = "2026, the slurmlab contributors"
release = version = slurmlab.__version__  # the one version source

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "slurmlab_docs",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]

# a reference that leads nowhere is a warning, and make docs fails on warnings
nitpicky = True

myst_heading_anchors = 3  # [text](page.md#a-heading) links, checked like any other reference

# The docstrings are prose with reStructuredText markup (no Google or NumPy sections, so no napoleon, which
# reads a property's "The address …: …" first line as a type). Classes list their documented members
# (docs/_ext/slurmlab_docs.py asks for them) in the order of the code.
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True  # `python=sys.executable`, not the path of the machine that built the docs

# Command lines are the subject of most pages and docstrings: "--gpus" stays two hyphens, quotes stay straight
smartquotes = False

html_theme = "alabaster"
html_title = f"slurmlab {release}"
html_theme_options = {
    "description": "A Jupyter-native toolkit for Slurm GPU clusters",
    "fixed_sidebar": True,
    # wide enough for a magic's --help (100 columns, as the reference pages write it) without scrolling
    "page_width": "1280px",
    "sidebar_width": "240px",
    "body_max_width": "none",
}
html_show_sourcelink = False
