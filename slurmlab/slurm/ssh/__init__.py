"""Slurm on another machine, over OpenSSH: the transport of ``Runner(ssh=...)`` (see :mod:`.link`).

:mod:`.askpass` and :mod:`.relay` also run as programs of their own (stdlib only): ssh's askpass, and the local
process that passes a background command's signals on to the remote side.
"""

from slurmlab.slurm.ssh.link import QUOTING_PROBE, LinkState, SshLink, ask_in_notebook, remote_words
from slurmlab.slurm.ssh.relay import signals_held as relay_signals_held
from slurmlab.slurm.ssh.target import SshLinkError, SshTarget, link_failure

__all__ = [
    "QUOTING_PROBE",
    "LinkState",
    "SshLink",
    "SshLinkError",
    "SshTarget",
    "ask_in_notebook",
    "link_failure",
    "relay_signals_held",
    "remote_words",
]
