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
from slurmlab.errors import ParseError, RequestError, SandboxError
from slurmlab.slurm.runner import Runner

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

# a profile name, profile data (a mapping), or a sandbox Profile (a dataclass whose fields are the profile
# schema); the slurm room never imports the sandbox, so the dataclass is recognised at run time
ProfileSource: TypeAlias = object

__all__ = ["mig", "profile_data", "profile_names", "sandbox_hardware", "topology"]


def _read(path: str | os.PathLike[str], what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError(what, os.fspath(path), hint=f"cannot read it: {exc.strerror}") from None


def _capture(
    what: str,
    file: str | os.PathLike[str] | None,
    profile: ProfileSource | None,
    text: str | None,
    reading: str,
) -> tuple[str, str] | None:
    """(the text to read, where it came from) of a ``file`` or ``text`` source; None for a ``profile``.

    Exactly one source is given, or RequestError saying which were."""
    given = [
        name for name, value in (("file", file), ("profile", profile), ("text", text)) if value is not None
    ]
    if len(given) != 1:
        example = "h200-mig" if what == "mig" else "dgx-h100"
        raise RequestError(
            f"slurmlab.{what}() reads one source: a file, profile= or text= "
            f"(got {' and '.join(given) if given else 'none'})",
            hint=f"slurmlab.{what}('saved.txt'), slurmlab.{what}(profile='{example}') or "
            f"slurmlab.{what}(text=output); the nodes of an allocation: alloc.{what}(node)",
        )
    if text is not None:
        return text, "the text given"
    if file is not None:
        return _read(file, reading), os.fspath(file)
    return None


def topology(
    file: str | os.PathLike[str] | None = None,
    *,
    profile: ProfileSource | None = None,
    text: str | None = None,
    nvlink: str | os.PathLike[str] | None = None,
    model: str | None = None,
) -> NodeTopology:
    """A node's topology without an allocation, from one source: ``file``, a saved ``nvidia-smi topo -m`` or a
    hardware-profile JSON; ``profile``, a built-in hardware profile by name (``dgx-h100``, ``h200-mig``,
    ``seed``: see ``slurmlab sandbox profiles``) or profile data; or ``text``, such output as a string.

    ``nvlink`` names a saved ``nvidia-smi nvlink -s`` of the same node, whose inactive or slow links then show
    too; ``model`` names the GPU (``"H100-SXM5-80GB"``) where the source does not.
    In a notebook ``slurmlab.topology(profile="dgx-h100")`` or ``slurmlab.topology("topo-m.txt")`` alone draws
    it (GPUs, NVLink, NUMA, CPUs). An allocation's nodes answer live: ``alloc.topology(node)``.
    """
    capture = _capture("topology", file, profile, text, "topology file")
    if capture is not None:
        topo = topology_from_text(*capture, model=model)
    else:
        topo = profile_topology(_data(profile))
        if model:
            topo = dataclasses.replace(topo, topology=topo.topology.with_model(model))
    if nvlink is None:
        return topo
    return topo.with_nvlink_text(_read(nvlink, "nvlink -s file"), os.fspath(nvlink))


def mig(
    file: str | os.PathLike[str] | None = None,
    *,
    profile: ProfileSource | None = None,
    text: str | None = None,
    model: str | None = None,
) -> NodeMig:
    """A node's MIG layout without an allocation, from one source: ``file``, a saved ``nvidia-smi mig -lgi`` /
    ``nvidia-smi -L`` output, a ``mig -cgi`` log or a hardware-profile JSON; ``profile``, a built-in hardware
    profile by name (``h200-mig``) or profile data (RequestError when it has no MIG instances); or ``text``,
    such output as a string. ``model`` names the GPU when a capture does not (``"A100-40GB"``).

    In a notebook it draws itself: ``slurmlab.mig("mig-lgi.txt")`` alone shows each GPU's 7 compute x 8 memory
    slices with its instances as blocks, each named ``GPU 0 · 3g.40gb @ 4:4 · GI 2``. As a file:
    ``slurmlab mig mig-lgi.txt --html mig.html``. An allocation's nodes answer live: ``alloc.mig(node)``.
    """
    capture = _capture("mig", file, profile, text, "MIG file")
    if capture is None:
        return profile_mig(_data(profile))
    return mig_from_text(*capture, model=model)


# ---- built-in hardware profiles ----------------------------------------------------------------------
# The sandbox ships them as JSON files in slurmlab/sandbox/profiles: data read by path, not a module imported.


def _profiles() -> Traversable:
    return resources.files("slurmlab").joinpath("sandbox", "profiles")


def profile_names() -> list[str]:
    """The built-in hardware profiles (``topology(profile=…)`` and ``mig(profile=…)`` take these names)."""
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
