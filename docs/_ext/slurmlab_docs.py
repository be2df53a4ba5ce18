"""Sphinx directives that write the reference pages from the code itself, at build time, so none can drift.

``.. slurmlab-magics::`` is every magic ``%load_ext slurmlab`` registers, each with the text ``%magic?`` shows
(for an argparse magic, its ``--help`` with the options), under the label ``magic-NAME`` (``cellmagic-NAME``
for a cell magic that is not also a line magic), so a page links to one with ``{ref}`magic-salloc```.

``.. slurmlab-cli::`` is the ``slurmlab`` command's ``--help``, and each subcommand's, from its argparse parsers.

``.. slurmlab-api::`` documents the names ``import slurmlab`` offers (``slurmlab.__all__`` and the lazy front
door), each through autodoc under its public name (``slurmlab.Allocation``), grouped by the room it comes
from; a public module (``slurmlab.viz``) gets a section with the names of its own ``__all__``. A public name
that cannot be imported, or whose room no group names, is a build warning, and ``make docs`` fails on warnings.

A reference in a docstring to an internal name (``:func:`check_request```) stays as code: the docstrings are
written for the reader of that module, and only the public names have pages. A reference written in a page of
docs/ must resolve. A reference by canonical path (``slurmlab.slurm.allocation.Allocation``, in a signature or
a docstring) leads to the public name's entry.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _help_width(columns: int = 100) -> Iterator[None]:
    """argparse wraps help at the terminal's width, and Python 3.14's may colour it: the pages get the same plain
    text on every machine."""
    settings = {"COLUMNS": str(columns), "PYTHON_COLORS": "0", "NO_COLOR": "1"}
    old = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# The API page's sections: (title, the modules whose names it holds). A module belongs to the first entry that
# names it or a package above it; "slurmlab" itself is matched exactly (its own functions), never as a prefix.
API_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Allocations", ("slurmlab.slurm.allocation",)),
    (
        "Reading the cluster",
        (
            "slurmlab.slurm.queries",
            "slurmlab.slurm.node_queries",
            "slurmlab.slurm.job_queries",
            "slurmlab.slurm.accounting",
        ),
    ),
    ("Running Slurm commands", ("slurmlab.slurm.runner",)),
    ("Requests", ("slurmlab.core.request",)),
    (
        "Topology, MIG and binding",
        (
            "slurmlab.core.gpu",
            "slurmlab.slurm.probes",
            "slurmlab.slurm.binding_probe",
            "slurmlab.slurm.hardware_files",
        ),
    ),
    ("Widgets", ("slurmlab.widgets",)),
    ("Diagnosis", ("slurmlab.slurm.doctor", "slurmlab.core.diagnosis")),
    ("Experiments", ("slurmlab.experiments",)),
    ("The sandbox", ("slurmlab.sandbox",)),
    ("IPython", ("slurmlab", "slurmlab.magics")),
    ("Errors", ("slurmlab.errors",)),
)


def _in_module(module: str, room: str) -> bool:
    if room == "slurmlab":
        return module == room
    # a room covers its package and the prefixed modules beside it (slurm.doctor: slurm/doctor_*.py)
    return module == room or module.startswith((room + ".", room + "_"))


def public_names() -> list[str]:
    """What ``from slurmlab import …`` offers: ``__all__`` and the lazy front door's names, dunders left out."""
    import slurmlab

    # the front door is read too, so that a name it serves but __all__ forgets is documented all the same
    names = {*slurmlab.__all__, *getattr(slurmlab, "_LAZY", {})}
    return sorted(n for n in names if not n.startswith("_"))


def _group_of(module: str) -> str | None:
    for title, rooms in API_GROUPS:
        if any(_in_module(module, room) for room in rooms):
            return title
    return None


def _public_values() -> Iterator[tuple[str, object]]:
    """(public name, what it names); a name that cannot be imported is a warning, and left out."""
    import slurmlab

    for name in public_names():
        try:
            yield name, getattr(slurmlab, name)
        except Exception as exc:  # the build says which name, instead of ending in a traceback
            logger.warning("slurmlab.%s cannot be imported: %s", name, exc, type="slurmlab", subtype="api")


def _autodoc_lines(path: str, value: object) -> list[str]:
    if inspect.isclass(value) and issubclass(value, BaseException):
        return [f".. autoexception:: {path}", "   :members:", "   :show-inheritance:", ""]
    if inspect.isclass(value):
        lines = [f".. autoclass:: {path}", "   :members:"]
        if value.__bases__ != (object,):
            lines.append("   :show-inheritance:")
        # what a class gets from slurmlab's own bases (a mixin, a shared base) is part of it; what it gets
        # from Python's (Mapping's get/keys …) is not repeated: autodoc stops at the classes named here
        outside = [c.__name__ for c in value.__mro__[1:] if not c.__module__.startswith("slurmlab")]
        if len(outside) < len(value.__mro__) - 1:
            lines.append("   :inherited-members: " + ", ".join(outside))
        return [*lines, ""]
    return [f".. {'autofunction' if callable(value) else 'autodata'}:: {path}", ""]


def _api_text() -> str:
    grouped: dict[str, list[tuple[str, object]]] = {title: [] for title, _ in API_GROUPS}
    modules: list[tuple[str, types.ModuleType]] = []
    for name, value in _public_values():
        if isinstance(value, types.ModuleType):
            modules.append((name, value))
            continue
        module = getattr(value, "__module__", None) or "slurmlab"
        group = _group_of(module)
        if group is None:
            logger.warning(
                "slurmlab.%s comes from %s, which no section of the API page names: add its room to "
                "API_GROUPS in docs/_ext/slurmlab_docs.py",
                name,
                module,
                type="slurmlab",
                subtype="api",
            )
            continue
        grouped[group].append((name, value))
    lines: list[str] = []
    for title, members in grouped.items():
        if not members:
            continue
        lines += [title, "-" * len(title), ""]
        for name, value in members:
            lines += _autodoc_lines(f"slurmlab.{name}", value)
    for name, module in modules:
        title = f"slurmlab.{name}"
        # the module's docstring, then each name of its own __all__ (loaded through its lazy __getattr__ if
        # it has one: autodoc's member search would not see those)
        lines += [title, "-" * len(title), "", f".. automodule:: {title}", ""]
        for member in getattr(module, "__all__", ()):
            try:
                value = getattr(module, member)
            except Exception as exc:
                logger.warning(
                    "%s.%s cannot be imported: %s", title, member, exc, type="slurmlab", subtype="api"
                )
                continue
            lines += _autodoc_lines(f"{title}.{member}", value)
    return "\n".join(lines)


def _canonical_paths() -> dict[str, str]:
    """The path where each public object is defined -> its public path (``slurmlab.slurm.allocation.Allocation``
    -> ``slurmlab.Allocation``)."""
    paths: dict[str, str] = {}
    for name, value in _public_values():
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        if module and qualname and not isinstance(value, types.ModuleType):
            paths[f"{module}.{qualname}"] = f"slurmlab.{name}"
    return paths


def _from_a_page(node: nodes.Element, srcdir: Path) -> bool:
    """Whether a reference was written in a page of docs/ (not a docstring or an autodoc signature)."""
    source = None
    at: nodes.Node | None = node
    while at is not None and source is None:  # a node made inline may leave its source to its paragraph
        source, at = at.source, at.parent
    if not source or ":docstring of " in source:
        return False
    with contextlib.suppress(ValueError):
        Path(source).resolve().relative_to(srcdir)
        return True
    return False


def resolve_public(
    app: Sphinx, env: BuildEnvironment, node: addnodes.pending_xref, contnode: nodes.TextElement
) -> nodes.Element | None:
    """``missing-reference``: a canonical path leads to its public name's entry; an internal name a docstring
    or a signature mentions stays as code; a page's own unresolved reference stays a warning."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    canonical = getattr(env, "_slurmlab_canonical", None)
    if canonical is None:
        canonical = env._slurmlab_canonical = _canonical_paths()  # type: ignore[attr-defined]
    for path, public in canonical.items():
        if target == path or target.startswith(path + "."):
            found = env.get_domain("py").resolve_xref(
                env,
                node["refdoc"],
                app.builder,
                node["reftype"],
                public + target[len(path) :],
                node,
                contnode,
            )
            if found is not None:
                return found
    if _from_a_page(node, Path(app.srcdir).resolve()):
        return None
    return contnode


class ApiDirective(SphinxDirective):
    """Every public name of ``slurmlab``, through autodoc, grouped by room."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        return self.parse_text_to_nodes(_api_text(), allow_section_headings=True)


def _magics() -> Iterator[tuple[str, str, Any]]:
    """(kind, name, function) of every magic ``%load_ext slurmlab`` registers, in the order it registers them."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False  # building the docs writes nothing into ~/.ipython
    shell = InteractiveShell.instance(config=config)
    shell.extension_manager.load_extension("slurmlab")
    manager = shell.magics_manager
    load_all = getattr(manager, "load_all_lazy_magics", None)
    if load_all is not None:  # IPython 9: magics declared lazily are imported now, to read their help
        load_all()
    else:  # IPython 8: a lazy magic names the extension that registers it
        for module in set(getattr(manager, "lazy_magics", {}).values()):
            shell.extension_manager.load_extension(module)
    for kind in ("line", "cell"):
        for name, function in manager.magics[kind].items():
            if (getattr(function, "__module__", None) or "").startswith("slurmlab"):
                yield kind, name, function


def _help_parts(function: Any) -> tuple[str, str, str]:
    """(usage and options, description, what follows) of what ``%magic?`` prints.

    For a magic with IPython's magic_arguments, ``%magic?`` is its argparse help (usage, the description, every
    option) and whatever the code appended after it; the description, written in reStructuredText like every
    docstring, is rendered, and the usage and options are shown verbatim, as ``%magic --help`` prints them."""
    doc = function.__doc__ or ""
    parser = getattr(function, "parser", None)
    if parser is None:
        return "", inspect.cleandoc(doc), ""
    full = parser.format_help()
    tail = doc[len(full) :] if doc.startswith(full) else ""
    description = parser.description
    parser.description = None  # the parser's own help, less the description (rendered above it instead)
    try:
        options = parser.format_help()
    finally:
        parser.description = description
    # IPython's help formatter writes the usage as an indented reStructuredText literal ("::"); shown verbatim
    # here, it reads as %magic --help prints it in a terminal: the usage first, flush left
    usage, _, rest = options.strip().removeprefix("::").strip("\n").partition("\n\n")
    return f"{textwrap.dedent(usage)}\n\n{rest}".strip(), inspect.cleandoc(description or ""), tail.strip()


def _magics_text() -> str:
    lines: list[str] = []
    found = list(_magics())
    line_functions = {getattr(f, "__func__", f) for kind, _, f in found if kind == "line"}
    tails: dict[str, str] = {}  # a note that follows a magic's help -> the label of the first magic with it
    for kind, name, function in found:
        also_line = kind == "cell" and getattr(function, "__func__", function) in line_functions
        if also_line:
            continue  # a line-and-cell magic: its line magic's section says both
        both = kind == "line" and any(
            k == "cell" and n == name and getattr(f, "__func__", f) is getattr(function, "__func__", function)
            for k, n, f in found
        )
        title = f"%{name} and %%{name}" if both else ("%" if kind == "line" else "%%") + name
        label = f"magic-{name}" if kind == "line" else f"cellmagic-{name}"
        options, description, tail = _help_parts(function)
        lines += [f".. _{label}:", "", title, "-" * len(title), "", description, ""]
        if options:
            lines += [".. code-block:: text", ""]
            lines += [f"   {line}".rstrip() for line in options.splitlines()]
            lines.append("")
        if tail in tails:  # the same note appended to several magics (IPython's $name rules): written once
            lines += [f"{tail.split(':', 1)[0]}: see :ref:`{tails[tail]}`.", ""]
        elif tail:
            tails[tail] = label
            lines += [tail, ""]
    if not found:
        logger.warning("%load_ext slurmlab registered no magic", type="slurmlab", subtype="magics")
    return "\n".join(lines)


class MagicsDirective(SphinxDirective):
    """Every magic of ``%load_ext slurmlab`` with its own help text."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        with _help_width():
            return self.parse_text_to_nodes(_magics_text(), allow_section_headings=True)


def machine_free_signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: object,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    """``autodoc-process-signature``: a default taken from the machine that builds the docs (a dataclass field
    ``python: str = sys.executable`` shows the path of its venv) is shown as the code spells it; any other path
    of this checkout in a signature is a warning, since the page would publish it."""
    if signature is None:
        return None
    signature = signature.replace(repr(sys.executable), "sys.executable")
    if str(Path(app.srcdir).resolve().parent) in signature:
        logger.warning(
            "the signature of %s holds a path of this machine: %s",
            name,
            signature,
            type="slurmlab",
            subtype="api",
        )
    return signature, return_annotation


def _commands(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for (
        action
    ) in parser._actions:  # argparse keeps subcommands there; sphinx-argparse reads them the same way
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser again
                    seen.add(id(sub))
                    yield from _commands(sub, f"{path} {name}")


def _cli_text() -> str:
    from slurmlab.cli import build_parser

    lines: list[str] = []
    for path, parser in _commands(build_parser(), "slurmlab"):
        label = "cli-" + path.replace(" ", "-")
        lines += [f".. _{label}:", "", path, "-" * len(path), "", ".. code-block:: text", ""]
        lines += [f"   {line}".rstrip() for line in parser.format_help().strip().splitlines()]
        lines.append("")
    return "\n".join(lines)


class CliDirective(SphinxDirective):
    """The ``slurmlab`` command and every subcommand, each with its ``--help``."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        with _help_width():
            return self.parse_text_to_nodes(_cli_text(), allow_section_headings=True)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("slurmlab-api", ApiDirective)
    app.add_directive("slurmlab-magics", MagicsDirective)
    app.add_directive("slurmlab-cli", CliDirective)
    app.connect("missing-reference", resolve_public)
    app.connect("autodoc-process-signature", machine_free_signature)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
