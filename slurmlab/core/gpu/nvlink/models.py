"""NVLink facts: one row per GPU model (:data:`NVLINK_MODELS`: links per GPU, per-link speed, whether a pair
showing all its links can only be an NVSwitch) and the generations they belong to (:data:`NVLINK_GENERATIONS`).

This is the one table of NVLink figures in slurmlab; the topology summary, the figure and the bandwidth
experiments all read it. Sources (figures restated, not copied):

- per-generation links and per-link speed: stas00/ml-engineering (network/README.md) and public
  `nvidia-smi nvlink -s` captures for the reported speeds;
- P100/V100: NVIDIA Tesla P100 and V100 datasheets (160 / 300 GB/s NVLink), DGX-1 V100 system architecture
  whitepaper (hybrid cube mesh, at most 2 links per pair), NVIDIA NVSwitch / DGX-2 datasheet (16 V100, 6 links
  each into NVSwitch, 300 GB/s per GPU);
- A100 / A800 / A30: NVIDIA A100 datasheet and Ampere (GA100) whitepaper (12 links, 600 GB/s), A800 datasheet
  (400 GB/s = 8 links), A30 datasheet (NVLink bridge, 200 GB/s = 4 links);
- RTX 3090 / A40 / RTX A6000: NVIDIA Ampere GA102 whitepaper (4 links x 14.0625 GB/s per direction, 112.5 GB/s
  both ways) and the A40 / A6000 datasheets (112.5 GB/s);
- H100 / H200 / H20 / H800 / GH200: NVIDIA H100 datasheet and Hopper whitepaper (18 links, 900 GB/s; PCIe and NVL
  cards 600 GB/s through bridges = 12 links), H200 datasheet (SXM 900 GB/s on HGX NVSwitch; NVL 900 GB/s
  through 2- or 4-way bridges), H800 (400 GB/s = 8 links), GH200 datasheet (900 GB/s);
- B100 / B200 / GB200: NVIDIA Blackwell datasheets (NVLink 5, 18 links, 1.8 TB/s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "NVLINK_GENERATIONS",
    "NVLINK_MODELS",
    "NvlinkGeneration",
    "NvlinkModel",
    "nvlink_generation_for_model",
    "nvlink_model_for",
]


@dataclass(frozen=True)
class NvlinkModel:
    """The NVLink facts of one GPU model."""

    key: str  # short name, e.g. "H100" or "H100 NVL"
    pattern: str  # regex on the normalised model name (upper case, '-'/'_' as spaces)
    generation: str  # key of NVLINK_GENERATIONS
    links_per_gpu: int
    reported_gbps: float  # per link, as `nvidia-smi nvlink -s` prints it (the raw signalling rate)
    per_direction_gbps: float  # per link and direction, the spec figure
    # True for SXM parts: no direct board joins two of them with every link, so a pair showing all the
    # GPU's links (e.g. NV18 between two H100 SXM) is an NVSwitch fabric. False for bridged cards (a 2-GPU
    # bridge shows every link on the one pair) and for parts only ever cabled directly.
    full_pair_means_switch: bool

    def bandwidth_gbps(self, links: int, *, bidirectional: bool = False) -> float:
        """Spec bandwidth of ``links`` links (one direction unless ``bidirectional``)."""
        return links * self.per_direction_gbps * (2 if bidirectional else 1)

    def matches(self, model: str) -> bool:
        return re.search(self.pattern, _normalise(model)) is not None


def _base(name: str) -> str:
    """A model token that is not part of a longer one: H200 but not GH200 or H2000."""
    return rf"(?<![A-Z0-9]){name}(?![0-9])"


_PCIE_CARD = r".*\b(PCIE|NVL)\b"
NVLINK_MODELS: tuple[NvlinkModel, ...] = (
    NvlinkModel("P100", _base("P100"), "nvlink1", 4, 20.0, 20.0, False),
    NvlinkModel("V100", _base("V100"), "nvlink2", 6, 25.781, 25.0, True),
    NvlinkModel("A100", _base("A100"), "nvlink3", 12, 25.0, 25.0, True),
    NvlinkModel("A100 PCIe", _base("A100") + _PCIE_CARD, "nvlink3", 12, 25.0, 25.0, False),
    NvlinkModel("A800", _base("A800"), "nvlink3", 8, 25.0, 25.0, True),
    NvlinkModel("A30", _base("A30"), "nvlink3", 4, 25.0, 25.0, False),
    NvlinkModel("RTX 3090", r"\bRTX 3090\b", "nvlink3-bridge", 4, 14.062, 14.0625, False),
    NvlinkModel("A40", _base("A40"), "nvlink3-bridge", 4, 14.062, 14.0625, False),
    NvlinkModel("A6000", _base("A6000"), "nvlink3-bridge", 4, 14.062, 14.0625, False),
    NvlinkModel("H100", _base("H100"), "nvlink4", 18, 26.562, 25.0, True),
    NvlinkModel("H100 PCIe", _base("H100") + _PCIE_CARD, "nvlink4", 12, 26.562, 25.0, False),
    NvlinkModel("H800", _base("H800"), "nvlink4", 8, 26.562, 25.0, True),
    NvlinkModel("H20", _base("H20"), "nvlink4", 18, 26.562, 25.0, True),
    NvlinkModel("H200", _base("H200"), "nvlink4", 18, 26.562, 25.0, True),
    NvlinkModel("H200 NVL", _base("H200") + _PCIE_CARD, "nvlink4", 18, 26.562, 25.0, False),
    NvlinkModel("GH200", _base("GH200"), "nvlink4", 18, 26.562, 25.0, False),
    NvlinkModel("B100", _base("B100"), "nvlink5", 18, 53.125, 50.0, True),
    NvlinkModel("B200", _base("B200"), "nvlink5", 18, 53.125, 50.0, True),
    NvlinkModel("GB200", _base("GB200"), "nvlink5", 18, 53.125, 50.0, True),
)


def _normalise(model: str) -> str:
    return re.sub(r"[-_]", " ", model.upper())


def nvlink_model_for(model: str | None) -> NvlinkModel | None:
    """The NVLink facts of a GPU model name such as ``NVIDIA H100 80GB HBM3`` (None if unknown)."""
    if not model:
        return None
    found = [m for m in NVLINK_MODELS if m.matches(model)]
    # the most specific row wins: "H100 PCIe" over "H100"
    return max(found, key=lambda m: len(m.key)) if found else None


@dataclass(frozen=True)
class NvlinkGeneration:
    """Per-link NVLink figures of one generation, with the links of its biggest GPU."""

    name: str
    gpus: tuple[str, ...]
    links_per_gpu: int
    reported_gbps: float  # what `nvidia-smi nvlink -s` prints per link
    per_direction_gbps: float  # spec, one direction, per link

    def bandwidth_gbps(self, links: int, *, bidirectional: bool = False) -> float:
        """Spec bandwidth of ``links`` bonded links (one direction unless ``bidirectional``)."""
        return links * self.per_direction_gbps * (2 if bidirectional else 1)


def _generation(key: str, name: str, links: int, reported: float, per_dir: float) -> NvlinkGeneration:
    gpus = tuple(
        dict.fromkeys(
            m.key.split()[0] if m.key != "RTX 3090" else m.key for m in NVLINK_MODELS if m.generation == key
        )
    )
    return NvlinkGeneration(name, gpus, links, reported, per_dir)


NVLINK_GENERATIONS: dict[str, NvlinkGeneration] = {
    "nvlink1": _generation("nvlink1", "NVLink 1", 4, 20.0, 20.0),
    "nvlink2": _generation("nvlink2", "NVLink 2", 6, 25.781, 25.0),
    "nvlink3": _generation("nvlink3", "NVLink 3", 12, 25.0, 25.0),
    "nvlink3-bridge": _generation("nvlink3-bridge", "NVLink 3 bridge", 4, 14.062, 14.0625),
    "nvlink4": _generation("nvlink4", "NVLink 4", 18, 26.562, 25.0),
    "nvlink5": _generation("nvlink5", "NVLink 5", 18, 53.125, 50.0),
}


def nvlink_generation_for_model(model: str) -> NvlinkGeneration | None:
    """The NVLink generation of a GPU model name such as ``NVIDIA H100 80GB HBM3`` (None if unknown)."""
    row = nvlink_model_for(model)
    return NVLINK_GENERATIONS[row.generation] if row else None
