"""A real local Slurm cluster built from a hardware profile (pure config rendering + process control).

    from slurmlab.sandbox import Sandbox
    sb = Sandbox.up(profile="dgx-h100")          # or Sandbox.find("dgx-h100") for a running one
    sb.env()        # {"SLURM_CONF": ...}
    sb.runner()     # a slurmlab.slurm.runner.Runner pointed at it
    sb.down()

Its steps find a stand-in ``nvidia-smi`` that answers from the hardware profile (:mod:`.standin`).
"""

from slurmlab.sandbox.control import (
    APT_INSTALL,
    DEFAULT_PROFILE,
    Sandbox,
    SandboxStatus,
    detect_release,
    detect_version,
)
from slurmlab.sandbox.profile import Profile, list_profiles, load_profile
from slurmlab.sandbox.render import RateLimit

__all__ = [
    "APT_INSTALL",
    "DEFAULT_PROFILE",
    "Profile",
    "RateLimit",
    "Sandbox",
    "SandboxStatus",
    "detect_release",
    "detect_version",
    "list_profiles",
    "load_profile",
]
