"""Parsers of ``nvidia-smi`` text, one module per kind of output: :mod:`.topo` (``topo -m``/``-p2p``/``-c``),
:mod:`.nvlink` (``nvlink -s``/``-c``), :mod:`.listing` (``-L``), :mod:`.mig` (``mig -lgip``/``-lgipp``/``-lgi``/
``-lci``, ``-cgi`` logs, the "MIG devices" table) and :mod:`.sniff` (which of these a capture is).

Callers import the public names from :mod:`slurmlab.core.gpu.smi_parse`.
"""
