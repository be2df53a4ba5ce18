"""slurmlab's colours, in one place: the categorical palette of charts, the colours of states and verdicts in
tables and panels, and the fixed colours of the topology and MIG figures.

Every room may import it (it is in ``core``: plain strings, no I/O), so a job state, a failed check or a flagged
binding is the same red in a widget, an experiment's table and a figure. The JupyterLab sidebar is TypeScript and
keeps its own job colours (``extensions/slurmlab-lab/src/palette.ts``).
"""

from __future__ import annotations

__all__ = [
    "BACKGROUND",
    "BLACK",
    "BUSY",
    "CATEGORICAL",
    "EDGE",
    "EMPTY",
    "FAILED",
    "FLAGGED_BACKGROUND",
    "HIGHLIGHT",
    "INFO",
    "INK",
    "INK_FAINT",
    "INK_SOFT",
    "LINK_KIND_COLOURS",
    "MIG_FREE",
    "MIG_TAKEN",
    "MIG_UNKNOWN",
    "MUTED",
    "NUMA_FILLS",
    "NVLINK",
    "NVSWITCH",
    "OK",
    "OUTLINE",
    "PENDING",
    "RULE",
    "UNKNOWN_LINK",
    "WARN",
    "WHITE",
]

# colour-blind-friendly categorical palette (Okabe-Ito), then Tableau-like extras: one colour per series, group
# or task, taken in order
CATEGORICAL = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#000000",
    "#4E79A7",
    "#F28E2B",
    "#59A14F",
    "#B07AA1",
    "#76B7B2",
    "#EDC948",
    "#FF9DA7",
    "#9C755F",
)
# what the user pointed at (a GPU, its links), in every figure
HIGHLIGHT = "#D55E00"

# ---- neutrals of the figures -------------------------------------------------------------------------------
WHITE = "#FFFFFF"
BLACK = "#000000"
INK = "#333333"  # labels
INK_SOFT = "#555555"  # secondary labels, a NIC's outline
INK_FAINT = "#888888"  # axis-like notes (slice numbers)
OUTLINE = "#BBBBBB"  # a sector's or a box's edge
RULE = "#DDDDDD"  # the lines between a table's rows
EDGE = "#8A8A8A"  # a link drawn before its kind is known
BACKGROUND = "#F2F2F2"  # the empty slice grid
EMPTY = "#E4E4E4"  # a GPU no task holds

# ---- states and verdicts (text and badges on a white page) ------------------------------------------------
OK = "#28a745"  # running, completed well, a check passed
FAILED = "#dc3545"  # failed, a check failed, a flagged binding, an error said in a widget
MUTED = "#6c757d"  # done or not applicable: completed, cancelled, gone, skipped
PENDING = "#d9a400"  # waiting: pending, a time warning's edge
BUSY = "#17a2b8"  # between states: configuring, completing
WARN = "#b8860b"  # a warning's text
INFO = "#0072B2"  # a fact, neither good nor bad
FLAGGED_BACKGROUND = "#FDECEA"  # a table row with a trap in it

# ---- the topology figure ------------------------------------------------------------------------------------
NVLINK = "#2F6B3A"  # an NVLink chord
NVSWITCH = "#4D4D4D"  # the switch in the middle of a switched fabric
# PCIe relations by their ``topo -m`` name (LinkKind's value), best first
LINK_KIND_COLOURS = {
    "PIX": "#009E73",
    "PXB": "#56B4E9",
    "PHB": "#CC79A7",
    "NODE": "#E69F00",
    "SYS": "#999999",
}
UNKNOWN_LINK = "#999999"
# the shaded sectors of NUMA groups, in order
NUMA_FILLS = ("#DCEAF7", "#FBE8CC", "#D8F0E6", "#F3DDEA", "#E6E6E6", "#FFF6C8", "#E0E0F8", "#F8E0E0")

# ---- the MIG figure: a slice's state ----------------------------------------------------------------------
MIG_FREE = "#009E73"
MIG_TAKEN = "#BBBBBB"
MIG_UNKNOWN = "#56B4E9"
