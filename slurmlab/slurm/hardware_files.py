"""Files that describe GPU hardware, read: saved ``nvidia-smi`` captures, the built-in hardware profiles, and the
hardware file a slurmlab sandbox writes beside its ``slurm.conf``.

This module only reads; :mod:`slurmlab.core.gpu.captures` and :mod:`slurmlab.core.gpu.hardware_profile` turn the
text into models. The sandbox is found by its file next to the ``SLURM_CONF`` a runner uses, never by importing
it. Nothing here runs a command.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from slurmlab.core.gpu.captures import mig_from_text, topology_from_text
from slurmlab.core.gpu.hardware_profile import (
    HARDWARE_FILE,
    SandboxHardware,
    parse_hardware,
    profile_mig,
    profile_topology,
)
from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
from slurmlab.errors import ParseError, SandboxError
from slurmlab.slurm.runner import Runner

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

# a profile name, profile data (a mapping), or a sandbox Profile (a dataclass whose fields are the profile
# schema); the slurm room never imports the sandbox, so the dataclass is recognised at run time
ProfileSource: TypeAlias = object

__all__ = [
    "mig_from_file",
    "mig_from_profile",
    "profile_data",
    "profile_names",
    "sandbox_hardware",
    "topology_from_file",
    "topology_from_profile",
]


def _read(path: str | os.PathLike[str], what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError(what, os.fspath(path), hint=f"cannot read it: {exc.strerror}") from None


def topology_from_file(
    path: str | os.PathLike[str], *, model: str | None = None, nvlink: str | os.PathLike[str] | None = None
) -> NodeTopology:
    """A topology from a saved ``nvidia-smi topo -m`` capture or a hardware-profile JSON file; ``nvlink`` names
    a saved ``nvidia-smi nvlink -s`` of the same node, whose inactive or slow links then show too.

    In a notebook, ``slurmlab.topology_from_file("topo-m.txt")`` alone draws it (GPUs, NVLink, NUMA, CPUs)."""
    topo = topology_from_text(_read(path, "topology file"), os.fspath(path), model=model)
    if nvlink is None:
        return topo
    return topo.with_nvlink_text(_read(nvlink, "nvlink -s file"), os.fspath(nvlink))


def mig_from_file(path: str | os.PathLike[str], *, model: str | None = None) -> NodeMig:
    """A MIG layout from saved ``nvidia-smi mig -lgi`` / ``nvidia-smi -L`` output or a profile JSON file.

    In a notebook it draws itself: ``slurmlab.mig_from_file("mig-lgi.txt")`` alone shows each GPU's 7 compute x
    8 memory slices with its instances as blocks, each named ``GPU 0 · 3g.40gb @ 4:4 · GI 2``; ``model=`` names
    the GPU when the capture does not (``"A100-40GB"``). As a file: ``slurmlab mig mig-lgi.txt --html mig.html``.
    """
    return mig_from_text(_read(path, "MIG file"), os.fspath(path), model=model)


# ---- built-in hardware profiles ----------------------------------------------------------------------
# The sandbox ships them as JSON files in slurmlab/sandbox/profiles: data read by path, not a module imported.


def _profiles() -> Traversable:
    return resources.files("slurmlab").joinpath("sandbox", "profiles")


def profile_names() -> list[str]:
    """The built-in hardware profiles (``topology_from_profile`` takes these names)."""
    return sorted(p.name[: -len(".json")] for p in _profiles().iterdir() if p.name.endswith(".json"))


def profile_data(name: str) -> dict[str, object]:
    """The data of the built-in hardware profile ``name`` (SandboxError listing the known ones)."""
    known = profile_names()
    if name not in known:
        raise SandboxError(
            f"unknown sandbox profile {name!r}",
            hint=f"choose one of: {', '.join(known)} (e.g. `slurmlab sandbox up --profile {known[0]}`)",
        )
    text = _profiles().joinpath(f"{name}.json").read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SandboxError(f"profile file {name}.json is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SandboxError(f"profile file {name}.json: expected an object")
    return data


def _data(profile: ProfileSource) -> Mapping[str, object]:
    if isinstance(profile, str):
        return profile_data(profile)
    if isinstance(profile, Mapping):
        return profile
    if dataclasses.is_dataclass(profile) and not isinstance(profile, type):
        # a sandbox Profile: its fields are the profile schema
        return dataclasses.asdict(profile)
    raise TypeError(f"expected a profile name, profile data or a Profile, not {type(profile).__name__}")


def topology_from_profile(profile: ProfileSource) -> NodeTopology:
    """The topology of a built-in hardware profile (``dgx-h100``, ``h200-mig``, ``seed``) or of profile data;
    in a notebook ``slurmlab.topology_from_profile("dgx-h100")`` alone draws it."""
    return profile_topology(_data(profile))


def mig_from_profile(profile: ProfileSource) -> NodeMig:
    """The MIG layout of a built-in hardware profile (RequestError when it has none); in a notebook
    ``slurmlab.mig_from_profile("h200-mig")`` alone draws it."""
    return profile_mig(_data(profile))


# ---- the sandbox beside SLURM_CONF -----------------------------------------------------------------


def sandbox_hardware(runner: Runner) -> SandboxHardware | None:
    """The hardware of the slurmlab sandbox the runner talks to (its file beside ``SLURM_CONF``), or None.

    A file that is there but unreadable or broken is a ParseError naming it: a sandbox it is, but one whose
    hardware cannot be told.
    """
    conf = runner.environ().get("SLURM_CONF")
    if not conf:
        return None
    folder = Path(conf).absolute().parent
    file = folder / HARDWARE_FILE
    if not file.is_file():
        return None
    return parse_hardware(_read(file, "sandbox hardware file"), directory=str(folder))
