"""Parsers of ``nvidia-smi`` text, one module per kind of output: :mod:`.topo` (``topo -m``/``-p2p``/``-c``),
:mod:`.nvlink` (``nvlink -s``/``-c``), :mod:`.listing` (``-L``), :mod:`.mig` (``mig -lgip``/``-lgipp``/``-lgi``/
``-lci``, ``-cgi`` logs, the "MIG devices" table), :mod:`.sniff` (which of these a capture is) and :mod:`.health`
(the sections of a node's GPU health probe).

They go by structure (header names, row labels, table borders), never by column position: real captures differ in
tabs vs spaces, ANSI escapes, NIC naming and empty cells. A token that does not fit is a
:class:`~slurmlab.errors.ParseError` quoting it. A capture cut short parses as far as it goes, with a
:class:`SmiParseWarning` and ``complete=False`` on the result. Callers import the public names from here.
"""

from __future__ import annotations

from slurmlab.core.gpu.smi._text import SmiParseWarning
from slurmlab.core.gpu.smi.health import (
    MARK,
    TIMED_OUT,
    ComputeApp,
    GpuProbe,
    GpuRow,
    Section,
    parse_compute_apps,
    parse_query_gpu,
    parse_version,
    read_probe,
    split_sections,
)
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
from slurmlab.core.gpu.smi.nvlink import (
    NvlinkStatus,
    parse_nvlink_capabilities,
    parse_nvlink_status,
    read_nvlink_status,
)
from slurmlab.core.gpu.smi.sniff import sniff
from slurmlab.core.gpu.smi.topo import parse_topo_cpu, parse_topo_matrix, parse_topo_p2p

__all__ = [
    "MARK",
    "TIMED_OUT",
    "ComputeApp",
    "GpuProbe",
    "GpuRow",
    "MigDevice",
    "MigProfileRow",
    "NvlinkStatus",
    "Section",
    "SmiDevice",
    "SmiParseWarning",
    "parse_compute_apps",
    "parse_mig_cgi_log",
    "parse_mig_devices",
    "parse_mig_lci",
    "parse_mig_lgi",
    "parse_mig_lgip",
    "parse_mig_lgipp",
    "parse_nvlink_capabilities",
    "parse_nvlink_status",
    "parse_query_gpu",
    "parse_smi_list",
    "parse_topo_cpu",
    "parse_topo_matrix",
    "parse_topo_p2p",
    "parse_version",
    "read_nvlink_status",
    "read_probe",
    "sniff",
    "split_sections",
]
