"""NVLink generations and their per-link figures (DESIGN §4, FACTS-mig-nvlink.md), and the generation of a GPU
model name."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NVLINK_GENERATIONS", "NvlinkGeneration", "nvlink_generation_for_model"]


@dataclass(frozen=True)
class NvlinkGeneration:
    """Per-link NVLink figures of one generation (DESIGN §4, FACTS-mig-nvlink.md)."""

    name: str
    gpus: tuple[str, ...]
    links_per_gpu: int
    reported_gbps: float  # what `nvidia-smi nvlink -s` prints per link
    per_direction_gbps: float  # spec, one direction, per link

    def bandwidth_gbps(self, links: int, *, bidirectional: bool = False) -> float:
        """Spec bandwidth of ``links`` bonded links (one direction unless ``bidirectional``)."""
        return links * self.per_direction_gbps * (2 if bidirectional else 1)


NVLINK_GENERATIONS: dict[str, NvlinkGeneration] = {
    "nvlink1": NvlinkGeneration("NVLink 1", ("P100",), 4, 20.0, 20.0),
    "nvlink2": NvlinkGeneration("NVLink 2", ("V100",), 6, 25.781, 25.0),
    "nvlink3": NvlinkGeneration("NVLink 3", ("A100", "A800", "A30"), 12, 25.0, 25.0),
    "nvlink3-bridge": NvlinkGeneration("NVLink 3 bridge", ("RTX 3090", "A6000", "A40"), 4, 14.062, 14.0625),
    "nvlink4": NvlinkGeneration("NVLink 4", ("H100", "H200", "H20", "H800", "GH200"), 18, 26.562, 25.0),
    "nvlink5": NvlinkGeneration("NVLink 5", ("B200", "B100", "GB200"), 18, 53.125, 50.0),
}


def nvlink_generation_for_model(model: str) -> NvlinkGeneration | None:
    """The NVLink generation of a GPU model name such as ``NVIDIA H100 80GB HBM3`` (None if unknown)."""
    text = model.upper().replace("-", " ")
    best: tuple[int, NvlinkGeneration] | None = None
    for gen in NVLINK_GENERATIONS.values():
        for gpu in gen.gpus:
            if re.search(rf"(?<![A-Z0-9]){re.escape(gpu.upper())}(?![0-9])", text):
                # the longest match wins: "GH200" over "H200"? no such overlap thanks to the lookbehind
                if best is None or len(gpu) > best[0]:
                    best = (len(gpu), gen)
    return best[1] if best else None
