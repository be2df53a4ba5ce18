"""How the hardware models show themselves: their text, and their figure where one can be drawn.

Evaluating a topology, a MIG layout or a binding table in a notebook draws it, with no import and no
``figure_args()``. core draws nothing itself (it is pure and may not import the viz room): a model's
``_repr_mimebundle_`` calls :func:`mime_bundle` with the ``draw`` it was given, none by default. In a notebook
kernel IPython's own display formatter gives one: ``import slurmlab`` (and ``%load_ext slurmlab``) register
slurmlab's figures with the shell's mime-bundle formatter by the models' module and class names
(``for_type_by_name``, so registering loads neither the models nor bokeh; see :mod:`slurmlab.viz.notebook`),
and that formatter asks the model for its bundle with the figure's drawing function. Without IPython (plain
Python, a script that writes HTML) the bundle is the text as ``text/plain`` and as readable HTML, with one line
that says why there is no figure.

With a figure, ``text/html`` is the figure above the text (folded away). When the figure cannot be drawn the HTML
is the text plus one line that says why and what to do (bokeh missing: the extra to install), never a traceback.

Stable CSS classes for whoever looks at the page: ``slurmlab-figure`` (with ``slurmlab-figure-<kind>``) around a
drawn figure, ``slurmlab-figure-caption`` above it, ``slurmlab-figure-text`` for the folded text, and
``slurmlab-no-figure`` with ``slurmlab-no-figure-why`` when there is no figure.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Container

from slurmlab.errors import MissingExtraError

__all__ = ["KINDS", "NOT_REGISTERED", "VIZ_EXTRA_HINT", "FigureHtml", "mime_bundle"]

# the kinds of model that draw themselves
KINDS = ("topology", "mig", "binding", "job-topology", "job-mig")
VIZ_EXTRA_HINT = "pip install 'slurmlab[viz]'"
# why a model shown with no drawing function has no figure, and what gives it one
NOT_REGISTERED = (
    "no figure: figures are drawn in IPython/Jupyter, where `import slurmlab` registers them with the "
    "shell's display formatter"
)

# the model -> HTML that draws it in a notebook (its own BokehJS included where the page may lack it)
FigureHtml = Callable[[object], str]


def _wanted(mime: str, include: Container[str] | None, exclude: Container[str] | None) -> bool:
    return (include is None or mime in include) and (exclude is None or mime not in exclude)


def mime_bundle(
    model: object,
    kind: str,
    text: str,
    caption: str,
    *,
    draw: FigureHtml | None = None,
    html_text: str | None = None,
    text_first: bool = False,
    include: Container[str] | None = None,
    exclude: Container[str] | None = None,
) -> dict[str, str]:
    """The display data of ``model``: ``text`` as ``text/plain``, and as ``text/html`` its figure
    (``draw(model)``) under ``caption`` with the text (``html_text``, default ``text`` preformatted) folded below,
    or above it, unfolded, when ``text_first`` (a table that is the answer itself); or, with no figure (no
    ``draw``, or drawing failed), the text and one line saying why (``slurmlab-no-figure-why``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of figure {kind!r}; known: {', '.join(KINDS)}")
    bundle: dict[str, str] = {}
    if _wanted("text/plain", include, exclude):
        bundle["text/plain"] = text
    if not _wanted("text/html", include, exclude):
        return bundle
    as_html = html_text if html_text is not None else f"<pre>{html.escape(text)}</pre>"
    why = ""
    figure = ""
    if draw is None:
        why = NOT_REGISTERED
    else:
        try:
            figure = draw(model)
        except MissingExtraError as exc:
            why = f"no figure: {exc.feature} needs {exc.package} — {VIZ_EXTRA_HINT}"
        except Exception as exc:  # a display must never end in a traceback: say what failed instead
            first = str(exc).splitlines()[0] if str(exc) else ""
            why = f"no figure: drawing it failed ({type(exc).__name__}: {first})"
    if why:
        if "text/plain" in bundle:
            bundle["text/plain"] = f"{text}\n({why})"
        bundle["text/html"] = (
            f"<div class='slurmlab-no-figure slurmlab-figure-{kind}'>{as_html}"
            f"<div class='slurmlab-no-figure-why'>{html.escape(why)}</div></div>"
        )
        return bundle
    head = f"<div class='slurmlab-figure-caption'>{html.escape(caption)}</div>"
    if text_first:
        body = f"<div class='slurmlab-figure-text'>{as_html}</div>{head}{figure}"
    else:
        body = f"{head}{figure}<details class='slurmlab-figure-text'><summary>as text</summary>{as_html}</details>"
    bundle["text/html"] = f"<div class='slurmlab-figure slurmlab-figure-{kind}'>{body}</div>"
    return bundle
