"""Parsers of ``nvidia-smi`` text: ``topo -m``, ``topo -c``, ``nvlink -s``/``-c``, ``mig -lgip``/``-lgipp``/
``-lgi``/``-lci``, ``mig -cgi`` logs and ``-L``.

They go by structure (header names, row labels, table borders), never by column position: real captures
differ in tabs vs spaces, ANSI escapes, NIC naming and empty cells. A token that does not fit is a
:class:`~slurmlab.errors.ParseError` quoting it. A capture cut short parses as far as it goes, with a
:class:`SmiParseWarning` and ``complete=False`` on the result.

The parsers live in :mod:`slurmlab.core.gpu.smi`, one module per kind of output; this module is where callers
import them from.
"""

from __future__ import annotations

from slurmlab.core.gpu.smi._text import SmiParseWarning
from slurmlab.core.gpu.smi.listing import SmiDevice, parse_smi_list
from slurmlab.core.gpu.smi.mig import (
    MigDevice,
    MigProfileRow,
    parse_mig_cgi_log,
    parse_mig_devices,
    parse_mig_lci,
    parse_mig_lgi,
    parse_mig_lgip,
    parse_mig_lgipp,
)
from slurmlab.core.gpu.smi.nvlink import NvlinkStatus, parse_nvlink_capabilities, parse_nvlink_status
from slurmlab.core.gpu.smi.sniff import sniff
from slurmlab.core.gpu.smi.topo import parse_topo_cpu, parse_topo_matrix, parse_topo_p2p

__all__ = [
    "MigDevice",
    "MigProfileRow",
    "NvlinkStatus",
    "SmiDevice",
    "SmiParseWarning",
    "parse_mig_cgi_log",
    "parse_mig_devices",
    "parse_mig_lci",
    "parse_mig_lgi",
    "parse_mig_lgip",
    "parse_mig_lgipp",
    "parse_nvlink_capabilities",
    "parse_nvlink_status",
    "parse_smi_list",
    "parse_topo_cpu",
    "parse_topo_p2p",
    "parse_topo_matrix",
    "sniff",
]
