"""Measured copy / peer-to-peer bandwidth against what the hardware should give.

The expectations are the per-link NVLink speeds that ``nvidia-smi nvlink -s`` reports, from slurmlab's one
table of NVLink facts per model (:data:`slurmlab.core.gpu.nvlink.NVLINK_MODELS`), and the device-copy anchor
per model. The comparison is pure; the measurements come from the workers (their ``copy`` report, see
:mod:`.node.worker`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmlab.core.gpu.nvlink import NVLINK_MODELS, NvlinkModel, nvlink_model_for
from slurmlab.errors import SlurmlabError

# achieved device-to-device copy, counting read + write (GB/s)
DEVICE_COPY_ANCHOR_GBPS: dict[str, float] = {"H200": 4300.0}
# below this fraction of the expectation a link or device counts as degraded; real copies
# reach 70-90 % of the line rate, so this flags only what is clearly wrong
DEGRADED_BELOW = 0.6


@dataclass(frozen=True)
class BandwidthVerdict:
    what: str
    measured_gbps: float
    expected_gbps: float
    ratio: float
    degraded: bool

    def __str__(self) -> str:
        state = "DEGRADED" if self.degraded else "ok"
        return (
            f"{self.what}: measured {self.measured_gbps:.1f} GB/s vs expected {self.expected_gbps:.1f} GB/s "
            f"({self.ratio:.0%}) {state}"
        )


def gpu_model(name: str) -> str | None:
    """The NVLink table's key for a device name such as 'NVIDIA H200' or 'NVIDIA A100-SXM4-80GB'."""
    row = nvlink_model_for(name)
    return row.key if row else None


def _row(name: str, what: str) -> NvlinkModel:
    row = nvlink_model_for(name)
    if row is None:
        raise SlurmlabError(
            f"no {what} for GPU {name!r}", hint=f"known models: {', '.join(m.key for m in NVLINK_MODELS)}"
        )
    return row


def expected_nvlink_gbps(name: str, links: int | None = None) -> float:
    """One-direction bandwidth of ``links`` NVLinks (default: all the GPU has) for GPU ``name``."""
    row = _row(name, "NVLink figures")
    n = row.links_per_gpu if links is None else links
    if n < 0 or n > row.links_per_gpu:
        raise SlurmlabError(f"{row.key} has {row.links_per_gpu} NVLinks, not {n}")
    return row.reported_gbps * n


def compare(
    what: str, measured_gbps: float, expected_gbps: float, *, threshold: float = DEGRADED_BELOW
) -> BandwidthVerdict:
    if expected_gbps <= 0:
        raise SlurmlabError(f"expected bandwidth for {what} must be positive, got {expected_gbps}")
    ratio = measured_gbps / expected_gbps
    return BandwidthVerdict(what, measured_gbps, expected_gbps, ratio, ratio < threshold)


def check_link_speeds(
    name: str, link_gbps: dict[int, float], *, tolerance: float = 0.02
) -> list[BandwidthVerdict]:
    """Each link's reported speed (``nvidia-smi nvlink -s``) against its model's speed; a slower link is degraded.

    A link reported down (speed 0 or missing from a full set) counts as degraded too.
    """
    row = _row(name, "NVLink figures")
    out = []
    for link in range(row.links_per_gpu):
        speed = link_gbps.get(link, 0.0)
        verdict = compare(f"{row.key} link {link}", speed, row.reported_gbps, threshold=1.0 - tolerance)
        out.append(verdict)
    return out


def check_device_copy(name: str, measured_gbps: float) -> BandwidthVerdict | None:
    model = gpu_model(name)
    if model not in DEVICE_COPY_ANCHOR_GBPS:
        return None
    return compare(f"{model} device copy", measured_gbps, DEVICE_COPY_ANCHOR_GBPS[model])


def check_p2p(name: str, measured_gbps: float, links: int) -> BandwidthVerdict:
    """A one-direction peer copy between two GPUs joined by ``links`` NVLinks (``NV<links>`` in topo -m)."""
    return compare(f"peer copy over NV{links}", measured_gbps, expected_nvlink_gbps(name, links))
