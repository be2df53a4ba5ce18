"""A verdict says what it verified and what it could not (issue 28 point 5).

The checks are those lesson 06 showed on the sandbox: I1-I3 and I7 PASS on Slurm's records, the checks that need
a GPU SKIP with their reasons, and the note that there is no device cgroup. "verdict: isolated" alone claimed the
device cgroup (I4) and memory (I5) as well.
"""

from __future__ import annotations

import re

from slurmlab.core.gpu.sandbox_limits import NO_DEVICE_CGROUP
from slurmlab.experiments.isolation_result import (
    FAIL,
    INFO,
    ISOLATED,
    NOT_ISOLATED,
    PASS,
    SHARED,
    SKIP,
    CheckResult,
    Grant,
    VerifyReport,
)

NO_GPU = "no GPU visible to the workers (backend numpy)"
SANDBOX_CHECKS = [
    CheckResult("I1", "visible GPU count equals what Slurm granted", PASS),
    CheckResult("I2", "CUDA_VISIBLE_DEVICES consistent with the count (MIG- for MIG)", PASS),
    CheckResult("I3", "physical identity by UUID / PCI bus id", PASS),
    CheckResult("I4", "device cgroup enforced", SKIP, None, NO_GPU),
    CheckResult("I5", "memory isolation", SKIP, None, NO_GPU),
    CheckResult("I6", "compute: a neighbour's load", SKIP, None, "no time-slicing run was given"),
    CheckResult("I7", "--gpu-bind=closest: task CPUs within the GPU's local CPUs", PASS),
    CheckResult("I8", "GPU clocks vs --gpu-freq", SKIP, None, "--gpu-freq was not requested"),
    CheckResult("I9", "compute mode", SKIP, None, NO_GPU),
    CheckResult("I10", "co-location", SKIP, None, "needs a time-slicing run of two or more tasks"),
]


def _sandbox_report(checks: list[CheckResult], verdict: str = ISOLATED) -> VerifyReport:
    return VerifyReport(checks, Grant(1), verdict=verdict, identity_source="slurm", notes=[NO_DEVICE_CGROUP])


def test_isolated_with_skipped_checks_says_as_far_as_checked_and_names_both_sides() -> None:
    report = _sandbox_report(SANDBOX_CHECKS)
    text = report.summary()
    head = text.splitlines()[0]
    assert head.startswith("verdict: isolated as far as checked"), head
    assert not re.search(r"verdict: isolated \(", text), text
    assert (
        "verified (on Slurm's records: no GPU hardware answered): I1 GPU count, I2 CUDA_VISIBLE_DEVICES, "
        "I3 GPU identity, I7 CPUs near the GPU" in text
    )
    not_checked = next(line for line in text.splitlines() if "not checked:" in line)
    for name in (
        "I4 device cgroup",
        "I5 memory",
        "I6 compute",
        "I8 clocks",
        "I9 compute mode",
        "I10 co-location",
    ):
        assert name in not_checked, not_checked
    assert (
        f"I4 device cgroup, I5 memory, I9 compute mode ({NO_GPU})" in not_checked and "I1 " not in not_checked
    )
    assert [c.id for c in report.not_checked] == ["I4", "I5", "I6", "I8", "I9", "I10"]
    page = report._repr_html_()
    assert "verdict: isolated as far as checked" in page and "not checked: I4 device cgroup" in page
    assert page.index("not checked") < page.index("<table>")  # beside the verdict, not under the table
    assert report.verdict == ISOLATED  # the word code compares stays


def test_isolated_when_every_check_was_judged_says_so_plainly() -> None:
    judged = [
        CheckResult(c.id, c.title, INFO if c.id == "I5" else PASS, None, "whole GPUs" if c.id == "I5" else "")
        for c in SANDBOX_CHECKS
    ]
    report = VerifyReport(judged, Grant(1), verdict=ISOLATED)
    head = report.summary().splitlines()[0]
    assert head == "verdict: isolated (GPU identity from the GPUs themselves)", head
    assert "not checked" not in report.summary()
    assert "seen, not judged: I5 memory (whole GPUs)" in report.summary()
    assert "verified: I1 GPU count" in report.summary()


def test_not_isolated_names_its_failed_checks_and_what_was_not_checked() -> None:
    checks = [
        *SANDBOX_CHECKS[:1],
        CheckResult("I2", "CUDA_VISIBLE_DEVICES", FAIL, None, "2 entries"),
        *SANDBOX_CHECKS[2:],
    ]
    report = _sandbox_report(checks, NOT_ISOLATED)
    head = report.summary().splitlines()[0]
    assert head.startswith("verdict: not isolated; failed: I2 CUDA_VISIBLE_DEVICES"), head
    assert "not checked: I4 device cgroup" in report.summary()
    shared = _sandbox_report(SANDBOX_CHECKS, SHARED)
    assert shared.summary().startswith("verdict: shared (") and "not checked: I4" in shared.summary()
